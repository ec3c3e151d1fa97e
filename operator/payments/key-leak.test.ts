import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { inspect } from 'node:util';
import { TOKEN_NAME, TOKEN_VERSION } from '../../test/support/chain/token';
import type { MppServer } from '../../test/support/payments/mpp-server';
import { startPaidFixture, type PaidFixture } from '../../test/support/payments/paid-fixture';
import { paymentIdempotencyKey } from './idempotency';
import { mppProtocol, readChallenge, x402Protocol, type PaymentProtocol } from './payment-protocol';
import { kubernetesSecretStore } from './secret-store';
import { walletFromPrivateKey } from './wallet';

// The attacker's test for the wallet key: pay for real (x402 and MPP), fail in every way
// the settlement classifies, and grep every returned object and error (message, details,
// cause chain, JSON and inspect output) for the key in every form it exists in.

let f: PaidFixture;
let mpp: MppServer;
beforeAll(async () => {
  f = await startPaidFixture({ mppAmount: '0.5' });
  mpp = f.mpp!;
}, 60_000);
afterAll(async () => {
  await f.close();
});

function keyForms(key: string): string[] {
  const hex = key.replace(/^0x/, '');
  const bytes = Buffer.from(hex, 'hex');
  return [
    hex,
    hex.toUpperCase(),
    bytes.toString('base64'),
    bytes.toString('base64url'),
    Buffer.from(key).toString('base64'),
    Buffer.from(hex).toString('base64'),
    BigInt(`0x${hex}`).toString(10),
  ];
}

function views(value: unknown): string {
  return [
    JSON.stringify(value, (_k, v: unknown) => (typeof v === 'bigint' ? v.toString() : v)),
    inspect(value, { depth: 20, showHidden: true, getters: true }),
    value instanceof Error ? `${value.message} ${String(value.stack)}` : '',
  ].join('\n');
}

const settleAll = async (
  protocols: PaymentProtocol[],
  path: string,
  toolCallId: string,
  extra = {},
) => {
  const url = `${path}/paid`;
  const first = await fetch(url);
  await first.arrayBuffer();
  const read = readChallenge(protocols, first.headers, url, new Date());
  const input = {
    charge: read.charge,
    challenge: read.challenge,
    wallet: walletFromPrivateKey('payer', f.payerKey),
    request: { url, method: 'GET', headers: {} },
    idempotencyKey: paymentIdempotencyKey(read.charge, {
      conversationId: 'c',
      turnId: 't',
      toolCallId,
    }),
    ...extra,
  };
  return { read, input, settle: () => read.protocol.settle(input) };
};

describe('the wallet key never leaves the signer', () => {
  it('appears in no result and no error of a paid or failed settlement', async () => {
    const seen: unknown[] = [];
    const capture = async (run: () => Promise<unknown>) => {
      try {
        seen.push(await run());
      } catch (error) {
        seen.push(error);
      }
    };
    const domains = () => ({ name: TOKEN_NAME, version: TOKEN_VERSION });
    const x402 = x402Protocol();
    const mppP = mppProtocol(domains);

    const paid = await settleAll([x402], f.x402.resourceUrl, 'leak-1');
    await capture(paid.settle); // settled
    await capture(paid.settle); // rejected: the nonce is used
    const expired = await settleAll([x402], f.x402.resourceUrl, 'leak-2', {
      options: { now: () => new Date(Date.now() + 3_600_000) },
    });
    await capture(expired.settle); // refused: expired
    const slow = await settleAll([x402], f.x402.resourceUrl, 'leak-3', {
      options: { timeoutMs: 1 },
    });
    await capture(slow.settle); // unknown or settled, depending on the race
    await capture(() => x402.settle({ ...paid.input, challenge: `${paid.input.challenge} ` })); // refused: not the approved challenge
    await capture(() =>
      x402.settle({ ...paid.input, wallet: walletFromPrivateKey('payer', `0x${'ff'.repeat(32)}`) }),
    );
    const viaMpp = await settleAll([mppP, x402], mpp.url, 'leak-4');
    expect(viaMpp.read.protocol.name).toBe('mpp');
    await capture(viaMpp.settle); // settled
    await capture(viaMpp.settle); // rejected
    await capture(() =>
      Promise.resolve().then(() => walletFromPrivateKey('bad', f.payerKey.slice(0, -1))),
    );
    await capture(() =>
      Promise.resolve().then(() => walletFromPrivateKey('bad', `${f.payerKey}00`)),
    );
    const secrets = {
      read: () =>
        Promise.resolve({ 'private-key': Buffer.from(f.payerKey.slice(0, -2)).toString('base64') }),
    };
    await capture(() => kubernetesSecretStore(secrets, 'ns').wallet('short'));
    await capture(() => Promise.resolve(walletFromPrivateKey('payer', f.payerKey)));

    expect(seen.filter((s) => s instanceof Error).length).toBeGreaterThanOrEqual(8);
    const text = seen.map(views).join('\n');
    for (const form of keyForms(f.payerKey)) expect(text).not.toContain(form);
    // The near-miss keys of the malformed cases must not be echoed either.
    expect(text).not.toContain(f.payerKey.slice(2, -2));
  }, 120_000);
});
