import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { decodeEventLog, parseSignature, type Hex } from 'viem';
import {
  fetchChallenge,
  startPaidFixture,
  type PaidFixture,
} from '../../test/support/payments/paid-fixture';
import { paymentIdempotencyKey } from './idempotency';
import { SettlementError } from './settlement';
import { walletFromPrivateKey } from './wallet';
import { parseX402Challenge, X402_CHALLENGE_HEADER } from './x402-challenge';
import { settleX402 } from './x402-settle';

// A real x402 v2 resource server and facilitator (@x402/*) settling on anvil against the
// EIP-3009 test token: the charge comes from a real 402, money moves on the chain.

let f: PaidFixture;
beforeAll(async () => {
  f = await startPaidFixture();
}, 60_000);
afterAll(async () => {
  await f.close();
});

const challengeFor = (url: string) => fetchChallenge(url, X402_CHALLENGE_HEADER);

const call = (toolCallId: string) => ({ conversationId: 'c-1', turnId: 't-1', toolCallId });

describe('settleX402 against @x402/express and the @x402 facilitator on anvil', () => {
  it('pays a real 402 once: one transfer, the body, and a settlement naming the transaction', async () => {
    const url = `${f.x402.resourceUrl}/paid`;
    const challenge = await challengeFor(url);
    const { charge } = parseX402Challenge(challenge, url, new Date());
    expect(charge).toMatchObject({
      protocol: 'x402',
      amount: f.price,
      asset: f.token.address.toLowerCase(),
      network: 'eip155:31337',
      payee: f.payee.toLowerCase(),
      resourceUrl: url,
    });
    const before = {
      payer: await f.token.balanceOf(f.payer),
      payee: await f.token.balanceOf(f.payee),
    };
    const key = paymentIdempotencyKey(charge, call('call-1'));
    const paid = await settleX402({
      charge,
      challenge,
      wallet: walletFromPrivateKey('payer', f.payerKey),
      request: { url, method: 'GET', headers: {} },
      idempotencyKey: key,
    });
    expect(paid.status).toBe(200);
    expect(JSON.parse(Buffer.from(paid.body).toString('utf8'))).toMatchObject({
      content: 'paid content',
    });
    expect(paid.settlement).toMatchObject({
      protocol: 'x402',
      payer: f.payer.toLowerCase(),
      network: 'eip155:31337',
      idempotencyKey: key,
    });
    expect(paid.settlement.transaction).toMatch(/^0x[0-9a-f]{64}$/);
    expect(paid.settlement.upstreamReceipt.length).toBeGreaterThan(0);

    expect(await f.token.balanceOf(f.payer)).toBe(before.payer - BigInt(f.price));
    expect(await f.token.balanceOf(f.payee)).toBe(before.payee + BigInt(f.price));
    const receipt = await f.token.publicClient.getTransactionReceipt({
      hash: paid.settlement.transaction as Hex,
    });
    const events = receipt.logs.map((log) =>
      decodeEventLog({ abi: f.token.abi, data: log.data, topics: log.topics }),
    );
    expect(events.map((e) => e.eventName)).toEqual(['AuthorizationUsed', 'Transfer']);
    expect(events[0]?.args).toMatchObject({ authorizer: f.payer, nonce: `0x${key}` });
    expect(events[1]?.args).toMatchObject({ from: f.payer, to: f.payee, value: BigInt(f.price) });
    expect(await f.token.authorizationState(f.payer, `0x${key}`)).toBe(true);
  }, 60_000);

  it('a second settle under the same idempotency key moves no money: the chain refuses the reused nonce', async () => {
    const url = `${f.x402.resourceUrl}/paid`;
    const challenge = await challengeFor(url);
    const { charge } = parseX402Challenge(challenge, url, new Date());
    const key = paymentIdempotencyKey(charge, call('call-2'));
    const wallet = walletFromPrivateKey('payer', f.payerKey);
    const input = {
      charge,
      challenge,
      wallet,
      request: { url, method: 'GET', headers: {} },
      idempotencyKey: key,
    };
    await settleX402(input);
    const afterFirst = {
      payer: await f.token.balanceOf(f.payer),
      payee: await f.token.balanceOf(f.payee),
    };
    const settledBefore = f.x402.settles().succeeded;
    const handlerRunsBefore = f.x402.paidHandlerRuns();

    const second = await settleX402(input).catch((error: unknown) => error);
    expect(second).toBeInstanceOf(SettlementError);
    expect((second as SettlementError).outcome).toBe('rejected');
    expect(await f.token.balanceOf(f.payer)).toBe(afterFirst.payer);
    expect(await f.token.balanceOf(f.payee)).toBe(afterFirst.payee);
    expect(f.x402.settles().succeeded).toBe(settledBefore);
    expect(f.x402.paidHandlerRuns()).toBe(handlerRunsBefore);

    // The token contract itself refuses the same authorization sent straight to the chain.
    // Both attempts sent the same signed authorization (the server saw it twice).
    const [first, second_] = f.x402.paymentSignatures().slice(-2);
    expect(second_).toBe(first);
    const header = JSON.parse(Buffer.from(first!, 'base64').toString('utf8')) as {
      payload: { authorization: Record<string, string>; signature: Hex };
    };
    const a = header.payload.authorization;
    const sig = parseSignature(header.payload.signature);
    await expect(
      f.token.publicClient.simulateContract({
        address: f.token.address,
        abi: f.token.abi,
        functionName: 'transferWithAuthorization',
        args: [
          a.from,
          a.to,
          BigInt(a.value!),
          BigInt(a.validAfter!),
          BigInt(a.validBefore!),
          a.nonce,
          Number(sig.v),
          sig.r,
          sig.s,
        ],
        account: f.payee,
      }),
    ).rejects.toThrow(/authorization is used/);
  }, 60_000);
});
