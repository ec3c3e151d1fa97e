import { describe, expect, it } from '@jest/globals';
import { approvalArgsSha256 } from '../../common/approval-bytes';
import { nodeEd25519Signer, nodeEd25519Verifier } from '../crypto/node-ed25519';
import { signApproval, verifyApprovalAnswer, type PendingApproval } from './approval-token';
import type { ApprovalAnswer } from './turn-records';

const signer = nodeEd25519Signer(new Uint8Array(32).fill(7));
const intruder = nodeEd25519Signer(new Uint8Array(32).fill(9));
const pending: PendingApproval = {
  turnId: 'turn-1',
  requestId: 'apr_1',
  toolName: 'refund_payment',
  argsSha256: approvalArgsSha256('{"amount_minor":500}'),
};

function answer(overrides: Partial<ApprovalAnswer> = {}, by = signer): ApprovalAnswer {
  const base = { ...pending, decision: 'approved' as const, ...overrides };
  const signed = signApproval(base, by);
  return {
    answeredBy: 'web:alice',
    answeredAtMs: 1,
    comment: '',
    ...base,
    keyId: signed.keyId,
    signature: signed.signature,
    ...('signature' in overrides ? { signature: overrides.signature } : {}),
    ...('keyId' in overrides ? { keyId: overrides.keyId } : {}),
  };
}

const check = (a: ApprovalAnswer) =>
  verifyApprovalAnswer(a, pending, nodeEd25519Verifier, signer.publicKey);

describe('verifyApprovalAnswer', () => {
  it('accepts a signed approval and a signed denial', () => {
    expect(check(answer())).toMatchObject({ ok: true, answer: { decision: 'approved' } });
    expect(check(answer({ decision: 'denied' }))).toMatchObject({
      ok: true,
      answer: { decision: 'denied' },
    });
  });

  it('matches the signature in docs/approvals.md', () => {
    expect(Buffer.from(signer.publicKey).toString('hex')).toBe(
      'ea4a6c63e29c520abef5507b132ec5f9954776aebebe7b92421eea691446d22c',
    );
  });

  const flipped = (): ApprovalAnswer => {
    // Signed as a denial, presented as an approval.
    const denied = answer({ decision: 'denied' });
    return { ...denied, decision: 'approved' };
  };

  it.each<[string, () => ApprovalAnswer, string | RegExp]>([
    [
      'another turn (replayed)',
      () => answer({ turnId: 'turn-0' }),
      'answer is for turn turn-0, not turn-1 (replayed)',
    ],
    [
      'another request',
      () => answer({ requestId: 'apr_2' }),
      'answer is for request apr_2, not apr_1',
    ],
    [
      'another tool',
      () => answer({ toolName: 'send_email' }),
      'answer approves tool send_email, not refund_payment',
    ],
    [
      'other arguments',
      () => answer({ argsSha256: approvalArgsSha256('{"amount_minor":50000}') }),
      'answer binds different arguments; new arguments need a new approval',
    ],
    [
      'an unknown key',
      () => answer({}, intruder),
      /^answer is signed by key [0-9a-f]{32}, not the approval key fe812c12f3ab4ce6ac5db69ac352f906$/,
    ],
    [
      'a forged signature under the right key id',
      () => answer({ keyId: answer().keyId, signature: answer({}, intruder).signature }),
      'answer signature does not verify with the approval key (forged)',
    ],
    [
      'a flipped decision',
      flipped,
      'answer signature does not verify with the approval key (forged)',
    ],
    [
      'a truncated signature',
      () => answer({ signature: new Uint8Array(10) }),
      'answer signature does not verify with the approval key (forged)',
    ],
  ])('rejects %s', (_name, make, reason) => {
    const verdict = check(make());
    if (typeof reason === 'string') expect(verdict).toEqual({ ok: false, reason });
    else expect(verdict).toEqual({ ok: false, reason: expect.stringMatching(reason) });
  });
});
