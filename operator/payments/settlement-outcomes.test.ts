import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import {
  fetchChallenge,
  startPaidFixture,
  type PaidFixture,
} from '../../test/support/payments/paid-fixture';
import { TcpRelay } from '../../test/support/tcp-relay';
import { paymentIdempotencyKey } from './idempotency';
import { x402Protocol } from './payment-protocol';
import { SettlementError, type SettleInput } from './settlement';
import { walletFromPrivateKey } from './wallet';
import { X402_CHALLENGE_HEADER } from './x402-challenge';

// How a failed settlement is classified, against the real x402 stack on anvil, each case
// checked on the chain: refused and rejected moved no money; unknown may have (here it
// did, once), and a retry under the same key moves nothing more.

let f: PaidFixture;
let relay: TcpRelay;
const x402 = x402Protocol();
beforeAll(async () => {
  f = await startPaidFixture();
  relay = await TcpRelay.start(Number(new URL(f.x402.resourceUrl).port));
}, 60_000);
afterAll(async () => {
  await relay.close();
  await f.close();
});

async function input(base: string, toolCallId: string): Promise<SettleInput> {
  const url = `${base}/paid`;
  const challenge = await fetchChallenge(url, X402_CHALLENGE_HEADER);
  const charge = x402.parse(challenge, url, new Date());
  return {
    charge,
    challenge,
    wallet: walletFromPrivateKey('payer', f.payerKey),
    request: { url, method: 'GET', headers: {} },
    idempotencyKey: paymentIdempotencyKey(charge, { conversationId: 'c', turnId: 't', toolCallId }),
  };
}

async function outcome(settle: Promise<unknown>): Promise<string> {
  const error = await settle.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(SettlementError);
  return (error as SettlementError).outcome;
}

const balances = async () => [await f.token.balanceOf(f.payer), await f.token.balanceOf(f.payee)];

describe('settlement outcomes on the real x402 stack', () => {
  it('refuses before sending: expired, another challenge, altered fields; nothing reaches the server', async () => {
    const good = await input(f.x402.resourceUrl, 'refused');
    const before = await balances();
    const seen = f.x402.paymentSignatures().length;
    const later = () => new Date(Date.parse(good.charge.expiresAt) + 1);
    expect(await outcome(x402.settle({ ...good, options: { now: later } }))).toBe('refused');
    expect(await outcome(x402.settle({ ...good, challenge: `${good.challenge}=` }))).toBe(
      'refused',
    );
    expect(await outcome(x402.settle({ ...good, charge: { ...good.charge, amount: '1' } }))).toBe(
      'refused',
    );
    expect(
      await outcome(
        x402.settle({ ...good, charge: { ...good.charge, payee: f.payer.toLowerCase() } }),
      ),
    ).toBe('refused');
    expect(
      await outcome(
        x402.settle({ ...good, request: { ...good.request, url: `${good.request.url}?x` } }),
      ),
    ).toBe('refused');
    expect(f.x402.paymentSignatures().length).toBe(seen);
    expect(await balances()).toEqual(before);
  }, 60_000);

  it('refuses when the connection never opens, and no money moves', async () => {
    const closed = await TcpRelay.start(Number(new URL(f.x402.resourceUrl).port));
    const paid = await input(closed.url, 'no-connection');
    await closed.close();
    const before = await balances();
    expect(await outcome(x402.settle(paid))).toBe('refused');
    expect(await balances()).toEqual(before);
  }, 60_000);

  it('is unknown when the answer is lost after settling; a retry under the same key moves nothing', async () => {
    const paid = await input(relay.url, 'lost-answer');
    const before = await balances();
    const cut = relay.cutWithin('HTTP/1.1 200', 0);
    expect(await outcome(x402.settle(paid))).toBe('unknown');
    await cut;
    const price = BigInt(f.price);
    expect(await balances()).toEqual([before[0]! - price, before[1]! + price]);
    expect(await f.token.authorizationState(f.payer, `0x${paid.idempotencyKey}`)).toBe(true);

    // The turn layer retries under the same key: the chain refuses the used nonce.
    expect(await outcome(x402.settle(paid))).toBe('rejected');
    expect(await balances()).toEqual([before[0]! - price, before[1]! + price]);
  }, 60_000);
});
