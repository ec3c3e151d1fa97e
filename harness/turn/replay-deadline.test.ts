/**
 * Replay of a delegate's deadline across a wait for a person (docs/turns.md, "Delegation"):
 * the journal the real stack wrote (test/support/crew-replies.ts: the real coordinator and
 * harness, the lead and its clerk over the local Messages API) when the clerk's approval
 * was answered six minutes later. Replay leaves the same wait out of the clerk's deadline,
 * from the journal's times alone, and finds a journal whose request time was moved.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { decodePayload, encodePayload } from '../../common/event-kinds';
import { requestIds } from '../../common/request-ids';
import type { JournalEntry } from '../../common/state-journal';
import type { AgentTurns } from '../../test/support/agent-turns';
import { startClerkTurns } from '../../test/support/crew-replies';
import { TEST_ADMIN } from '../../test/support/real-turns';
import { nodeEd25519Verifier } from '../crypto/node-ed25519';
import type { ReplayEntry } from './journal-turns';
import { replayJournal } from './replay';
import type { JournalReplay } from './replay-verdict';

const WAIT_MS = 6 * 60_000;
let rig: AgentTurns;
let entries: JournalEntry[];

beforeAll(async () => {
  let waitedMs = 0;
  rig = await startClerkTurns(
    { name: 'calculator', input: { expression: '6*7' } },
    () => Date.now() + waitedMs,
  );
  const paused = await rig.post('Ask the clerk: what is 6*7?');
  waitedMs = WAIT_MS;
  await rig.turns.coordinator.answerApproval(
    TEST_ADMIN,
    { conversationId: rig.uid, requestId: paused.approval?.requestId ?? '', decision: 'approve' },
    AbortSignal.timeout(30_000),
  );
  entries = await rig.turns.journal.entries(`conv-${rig.uid}`);
}, 60_000);

afterAll(async () => {
  await rig.close();
});

function replay(journal: readonly ReplayEntry[]): JournalReplay {
  return replayJournal(journal, {
    ids: requestIds,
    verifier: nodeEd25519Verifier,
    approvalPublicKey: rig.turns.approvals.publicKey,
  });
}

/** The journal with the approval request's `requested_at_ms` set by `move`. */
function movedRequest(move: (requestedAtMs: number, answeredAtMs: number) => number) {
  const answer = entries.find((e) => e.kind === 'approval_response');
  const answeredAtMs = decodePayload('approval_response', answer!.payload).answeredAtMs;
  return entries.map((entry) => {
    if (entry.kind !== 'approval_request') return entry;
    const request = decodePayload('approval_request', entry.payload);
    const requestedAtMs = move(request.requestedAtMs, answeredAtMs);
    return { ...entry, payload: encodePayload('approval_request', { ...request, requestedAtMs }) };
  });
}

describe('replay of a delegate whose approval was answered six minutes later', () => {
  it('replays the turn in full across both attempts: the thread answered within its time', () => {
    const result = replay(entries);
    expect(result.divergence).toBeUndefined();
    expect(result.turns.map((t) => [t.status, t.mode, t.ok, t.attempts])).toEqual([
      ['complete', 'full', true, 2],
    ]);
    const closing = entries
      .filter((e) => e.kind === 'tool_result')
      .map((e) => decodePayload('tool_result', e.payload))
      .find((r) => r.delegate === 'clerk');
    expect(closing?.content).toBe('clerk got "42"');
  });

  it('finds a request time moved to just before its answer: the wait did not happen, so the thread ran past its deadline', () => {
    const result = replay(movedRequest((_, answeredAtMs) => answeredAtMs - 1));
    expect(result.ok).toBe(false);
    expect(result.divergence?.expected).toContain('ran past its deadline of 300 s');
    expect(result.divergence?.found).toContain('clerk got');
  });

  it('finds a request time with none recorded (a journal before times were) the same way', () => {
    const result = replay(movedRequest(() => 0));
    expect(result.divergence?.expected).toContain('ran past its deadline of 300 s');
  });

  it('still replays a request time moved within the wait that leaves the thread under 5 minutes', () => {
    // One minute less of waiting: the clerk ran about a minute, under its 5.
    const result = replay(movedRequest((requestedAtMs) => requestedAtMs + 60_000));
    expect(result.divergence).toBeUndefined();
  });
});
