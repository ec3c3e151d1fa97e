import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { decodeEventLog, type Hex } from 'viem';
import { TOKEN_NAME, TOKEN_VERSION } from '../../test/support/chain/token';
import type { MppServer } from '../../test/support/payments/mpp-server';
import {
  fetchChallenge,
  startPaidFixture,
  type PaidFixture,
} from '../../test/support/payments/paid-fixture';
import { Credential } from 'mppx';
import { authorizationValidUntilMs } from './charge';
import { paymentIdempotencyKey } from './idempotency';
import { MPP_CHALLENGE_HEADER, parseMppChallenge } from './mpp-challenge';
import { settleMpp } from './mpp-settle';
import { SettlementError } from './settlement';
import { walletFromPrivateKey } from './wallet';

// A real MPP server (mppx, method "evm", intent "charge") that settles through the real
// @x402 facilitator on anvil: the charge comes from a real 402 and money moves on chain.

let f: PaidFixture;
let mpp: MppServer;
beforeAll(async () => {
  f = await startPaidFixture({ mppAmount: '0.75' });
  mpp = f.mpp!;
}, 60_000);
afterAll(async () => {
  await f.close();
});

const challenge = (url: string) => fetchChallenge(url, MPP_CHALLENGE_HEADER);

const call = (toolCallId: string) => ({ conversationId: 'c-1', turnId: 't-1', toolCallId });

describe('settleMpp against an mppx server on anvil', () => {
  it('pays a real MPP 402 once and reads the Payment-Receipt', async () => {
    const url = `${mpp.url}/paid`;
    const header = await challenge(url);
    const { charge } = parseMppChallenge(header, url, new Date());
    expect(charge).toMatchObject({
      protocol: 'mpp',
      amount: '750000',
      asset: f.token.address.toLowerCase(),
      network: 'eip155:31337',
      payee: f.payee.toLowerCase(),
    });
    const before = await f.token.balanceOf(f.payee);
    const paid = await settleMpp({
      charge,
      challenge: header,
      wallet: walletFromPrivateKey('payer', f.payerKey),
      request: { url, method: 'GET', headers: {} },
      tokenDomain: { name: TOKEN_NAME, version: TOKEN_VERSION },
      idempotencyKey: paymentIdempotencyKey(charge, call('mpp-1')),
    });
    expect(paid.status).toBe(200);
    expect(JSON.parse(Buffer.from(paid.body).toString('utf8'))).toMatchObject({
      content: 'paid by mpp',
    });
    expect(paid.settlement.payer).toBe(f.payer.toLowerCase());
    expect(paid.settlement.transaction).toMatch(/^0x[0-9a-f]{64}$/);
    expect(await f.token.balanceOf(f.payee)).toBe(before + 750_000n);
    const receipt = await f.token.publicClient.getTransactionReceipt({
      hash: paid.settlement.transaction as Hex,
    });
    const names = receipt.logs.map(
      (log) => decodeEventLog({ abi: f.token.abi, data: log.data, topics: log.topics }).eventName,
    );
    expect(names).toEqual(['AuthorizationUsed', 'Transfer']);
  }, 60_000);

  it('paying the same challenge again moves no money', async () => {
    const url = `${mpp.url}/paid`;
    const header = await challenge(url);
    const { charge } = parseMppChallenge(header, url, new Date());
    const input = {
      charge,
      challenge: header,
      wallet: walletFromPrivateKey('payer', f.payerKey),
      request: { url, method: 'GET', headers: {} },
      tokenDomain: { name: TOKEN_NAME, version: TOKEN_VERSION },
      idempotencyKey: paymentIdempotencyKey(charge, call('mpp-2')),
    };
    await settleMpp(input);
    const after = {
      payer: await f.token.balanceOf(f.payer),
      payee: await f.token.balanceOf(f.payee),
    };
    const runs = mpp.paidHandlerRuns();
    const again = await settleMpp(input).catch((error: unknown) => error);
    expect(again).toBeInstanceOf(SettlementError);
    expect((again as SettlementError).outcome).toBe('rejected');
    expect(await f.token.balanceOf(f.payer)).toBe(after.payer);
    expect(await f.token.balanceOf(f.payee)).toBe(after.payee);
    expect(mpp.paidHandlerRuns()).toBe(runs);
  }, 60_000);

  it('refuses a credential valid longer than the charge allows, and sends nothing', async () => {
    // A challenge without `expires` gets a charge that expires five minutes after it was
    // received, and mppx signs the credential valid five minutes from signing. Received
    // twenty minutes ago (a clock the settle is given), the credential mppx signs now would
    // stay valid long past the charge: an admin's did_not_run relies on it not.
    const url = `${mpp.url}/paid-no-expiry`;
    const header = await challenge(url);
    expect(header).not.toMatch(/expires=/u);
    const receivedAt = new Date(Date.now() - 20 * 60_000);
    const { charge } = parseMppChallenge(header, url, receivedAt);
    const sent = mpp.credentials().length;
    const refused = await settleMpp({
      charge,
      challenge: header,
      wallet: walletFromPrivateKey('payer', f.payerKey),
      request: { url, method: 'GET', headers: {} },
      tokenDomain: { name: TOKEN_NAME, version: TOKEN_VERSION },
      idempotencyKey: paymentIdempotencyKey(charge, call('mpp-late')),
      options: { now: () => receivedAt },
    }).catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(SettlementError);
    expect((refused as SettlementError).outcome).toBe('refused');
    expect((refused as SettlementError).message).toContain('nothing was sent');
    expect(mpp.credentials().length).toBe(sent);

    // Signed in time, the same kind of challenge's credential is sent, valid no longer than
    // the charge allows. (This seller then refuses it without moving money: an mppx server
    // requires `expires`, which the draft leaves optional.)
    const fresh = await challenge(url);
    const inTime = parseMppChallenge(fresh, url, new Date()).charge;
    const payerBefore = await f.token.balanceOf(f.payer);
    await settleMpp({
      charge: inTime,
      challenge: fresh,
      wallet: walletFromPrivateKey('payer', f.payerKey),
      request: { url, method: 'GET', headers: {} },
      tokenDomain: { name: TOKEN_NAME, version: TOKEN_VERSION },
      idempotencyKey: paymentIdempotencyKey(inTime, call('mpp-in-time')),
    }).catch((error: unknown) => error);
    expect(mpp.credentials().length).toBe(sent + 1);
    const { payload } = Credential.deserialize<{ validBefore: string }>(
      mpp.credentials().at(-1) ?? '',
    );
    expect(Number(payload.validBefore) * 1000).toBeLessThanOrEqual(
      authorizationValidUntilMs(inTime) ?? 0,
    );
    expect(await f.token.balanceOf(f.payer)).toBe(payerBefore);
  }, 60_000);

  it("signs over the table's domain: a wrong one is rejected by the seller and moves no money", async () => {
    // An operator's mistake in POLYCHROME_MPP_TOKENS (the domain's name or version not the
    // contract's) makes a signature the token cannot verify: no transfer, nothing unknown.
    const url = `${mpp.url}/paid`;
    const before = {
      payer: await f.token.balanceOf(f.payer),
      runs: mpp.paidHandlerRuns(),
      settled: f.x402.settles().succeeded,
    };
    for (const tokenDomain of [
      { name: 'USD Coin', version: TOKEN_VERSION },
      { name: TOKEN_NAME, version: '1' },
    ]) {
      const header = await challenge(url);
      const { charge } = parseMppChallenge(header, url, new Date());
      const error = await settleMpp({
        charge,
        challenge: header,
        wallet: walletFromPrivateKey('payer', f.payerKey),
        request: { url, method: 'GET', headers: {} },
        tokenDomain,
        idempotencyKey: paymentIdempotencyKey(charge, call(`mpp-domain-${tokenDomain.name}`)),
      }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(SettlementError);
      expect((error as SettlementError).outcome).toBe('rejected');
    }
    expect(await f.token.balanceOf(f.payer)).toBe(before.payer);
    expect(mpp.paidHandlerRuns()).toBe(before.runs);
    expect(f.x402.settles().succeeded).toBe(before.settled);
  }, 60_000);
});
