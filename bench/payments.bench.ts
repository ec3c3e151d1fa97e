/*
 * What a payment adds to a tool call: one x402 settle on a local chain, from the first
 * request (answered 402 with the challenge) to the settled 200, on the real parts of the
 * payment tests (test/support): anvil from npm with the EIP-3009 test token, a resource
 * server built with @x402/express and a facilitator built with @x402/core and @x402/evm
 * (its own HTTP server, settling `transferWithAuthorization` on anvil and waiting for the
 * receipt), and the control plane's code: readChallenge, paymentIdempotencyKey and the
 * x402 adapter's settle (sign the EIP-3009 authorization, send, read PAYMENT-RESPONSE).
 * The same for MPP: an mppx server settling through the same facilitator.
 *
 * Baseline measured in the same run: the same GET to the same server's unpaid route.
 * Parts of a paid call: the 402 round trip, and the settle (payment header, verify and
 * settle at the facilitator, the on-chain transaction and its receipt on anvil, the body).
 *
 * Then the same in a turn (test/support/paid-turns.ts): the real coordinator and the real
 * harness over mutual-TLS gRPC, the model scripted, its built-in `fetch` buying `GET /paid`
 * (x402 from the x402 stack; MPP from the mppx server), the approval answered at once. A
 * paid turn is timed in two stretches, post to the paused card (the 402, the charge read,
 * checked and committed, the pause) and approval to reply (`payment_sent`, the settle on
 * anvil, the signed receipt, the tool result, the model's last reply); its baseline, in
 * the same run and conversation, is a turn whose `fetch` GETs the unpaid route. The third
 * and fourth sellers are an MCP server's paid tool over x402's MCP transport and MPP's
 * (test/support/payments/x402-mcp-server.ts, mpp-mcp-server.ts): the control plane signs,
 * the harness calls the tool again with the payment, and the server verifies and settles
 * through the same facilitator.
 *
 * Usage: npx tsx bench/payments.bench.ts [iterations, default 40] [turns, default 20]
 */
import pino from 'pino';
import { TOKEN_NAME, TOKEN_VERSION } from '../test/support/chain/token';
import { startPaidTurns, type Seller } from '../test/support/paid-turns';
import { TEST_ADMIN, TEST_OWNER, textReply } from '../test/support/real-turns';
import { startPaidFixture } from '../test/support/payments/paid-fixture';
import { paymentIdempotencyKey } from '../operator/payments/idempotency';
import {
  mppProtocol,
  readChallenge,
  x402Protocol,
  type PaymentProtocol,
} from '../operator/payments/payment-protocol';
import { walletFromPrivateKey } from '../operator/payments/wallet';

const ITERATIONS = Number(process.argv[2] ?? 40);
const TURNS = Number(process.argv[3] ?? 20);
const WARM_UP = 3;

function stats(samples: number[]): { p50: number; p95: number; mean: number } {
  const sorted = [...samples].sort((a, b) => a - b);
  const at = (q: number) =>
    sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? NaN;
  return { p50: at(0.5), p95: at(0.95), mean: samples.reduce((s, x) => s + x, 0) / samples.length };
}

const fmt = (ms: number): string => `${ms.toFixed(2)} ms`;

async function timeFree(url: string): Promise<number> {
  const start = performance.now();
  const response = await fetch(url);
  await response.arrayBuffer();
  if (response.status !== 200) throw new Error(`unpaid route answered ${response.status}`);
  return performance.now() - start;
}

async function timePaid(
  protocols: PaymentProtocol[],
  url: string,
  payerKey: `0x${string}`,
  n: number,
): Promise<{ total: number; challenge: number }> {
  const wallet = walletFromPrivateKey('bench', payerKey);
  const start = performance.now();
  const first = await fetch(url);
  await first.arrayBuffer();
  if (first.status !== 402) throw new Error(`paid route answered ${first.status} unpaid`);
  const challengeMs = performance.now() - start;
  const read = readChallenge(protocols, first.headers, url, new Date());
  const paid = await read.protocol.settle({
    charge: read.charge,
    challenge: read.challenge,
    wallet,
    request: { url, method: 'GET', headers: {} },
    idempotencyKey: paymentIdempotencyKey(read.charge, {
      conversationId: 'bench',
      turnId: 'bench',
      toolCallId: `call-${n}`,
    }),
  });
  if (paid.status !== 200 || paid.settlement.transaction === '') throw new Error('not settled');
  return { total: performance.now() - start, challenge: challengeMs };
}

async function main(): Promise<void> {
  const f = await startPaidFixture({ price: '10000', payerBalance: 10n ** 15n, mppAmount: '0.01' });
  const mpp = f.mpp!;
  try {
    const x402 = [x402Protocol()];
    const mppP = [mppProtocol(() => ({ name: TOKEN_NAME, version: TOKEN_VERSION }))];
    const free: number[] = [];
    const paid: number[] = [];
    const challenge: number[] = [];
    const mppPaid: number[] = [];
    for (let i = 0; i < WARM_UP; i += 1) {
      await timeFree(`${f.x402.resourceUrl}/free`);
      await timePaid(x402, `${f.x402.resourceUrl}/paid`, f.payerKey, -1 - i);
      await timePaid(mppP, `${mpp.url}/paid`, f.payerKey, -1 - i);
    }
    for (let i = 0; i < ITERATIONS; i += 1) {
      free.push(await timeFree(`${f.x402.resourceUrl}/free`));
      const p = await timePaid(x402, `${f.x402.resourceUrl}/paid`, f.payerKey, i);
      paid.push(p.total);
      challenge.push(p.challenge);
      mppPaid.push((await timePaid(mppP, `${mpp.url}/paid`, f.payerKey, 10_000 + i)).total);
    }
    const base = stats(free);
    console.log(
      `payments: ${ITERATIONS} sequential calls each (after ${WARM_UP} warm-up), anvil automining`,
    );
    row('baseline: GET unpaid route', base);
    row('x402: 402 round trip (challenge)', stats(challenge));
    row('x402: challenge to settled 200', stats(paid));
    row('mpp (evm charge): challenge to settled 200', stats(mppPaid));
    console.log(`x402 added over the unpaid call (p50): ${fmt(stats(paid).p50 - base.p50)}`);
  } finally {
    await f.close();
  }
  console.log(`paid turns: ${TURNS} of each (after ${WARM_UP} warm-up), approved at once`);
  for (const [seller, protocols] of [
    ['x402', 'x402'],
    ['mpp', 'mpp'],
    ['x402-mcp', 'x402'],
    ['mpp-mcp', 'mpp'],
  ] as const) {
    const t = await timeTurns(seller, protocols, TURNS);
    row(`${seller} turn baseline: fetch of the unpaid route`, stats(t.free));
    row(`${seller} turn: post to approval card`, stats(t.toCard));
    row(`${seller} turn: approval to reply`, stats(t.toReply));
    row(`${seller} turn: both stretches`, stats(t.paid));
    console.log(
      `${seller} added to a turn over the unpaid fetch (p50): ${fmt(stats(t.paid).p50 - stats(t.free).p50)}`,
    );
  }
}

function row(name: string, s: { p50: number; p95: number; mean: number }): void {
  console.log(
    `${name.padEnd(52)} p50 ${fmt(s.p50).padStart(10)}   p95 ${fmt(s.p95).padStart(10)}   mean ${fmt(s.mean).padStart(10)}`,
  );
}

/** Paid turns and unpaid-fetch turns, alternating in one conversation. */
async function timeTurns(
  seller: Seller,
  protocols: string,
  n: number,
): Promise<{ free: number[]; toCard: number[]; toReply: number[]; paid: number[] }> {
  const total = WARM_UP + n;
  const price = '10000';
  const turns = await startPaidTurns({
    price,
    seller,
    protocols,
    logger: pino({ level: 'silent' }),
    replies: (buy, free) =>
      Array.from({ length: total }, (_, i) => [
        free(`toolu_free_${i}`),
        textReply('Fetched.'),
        buy(`toolu_buy_${i}`),
        textReply('Bought.'),
      ]).flat(),
  });
  const out = {
    free: [] as number[],
    toCard: [] as number[],
    toReply: [] as number[],
    paid: [] as number[],
  };
  try {
    await turns.link(price, (BigInt(price) * BigInt(total + 1)).toString());
    const { coordinator } = turns.turns;
    const { conversationId } = turns;
    for (let i = 0; i < total; i += 1) {
      const signal = AbortSignal.timeout(60_000);
      const t0 = performance.now();
      const fetched = await coordinator.postMessage(
        TEST_OWNER,
        { conversationId, text: 'fetch it', idempotencyKey: `free-${i}` },
        signal,
      );
      const t1 = performance.now();
      const paused = await coordinator.postMessage(
        TEST_OWNER,
        { conversationId, text: 'buy it', idempotencyKey: `buy-${i}` },
        signal,
      );
      const t2 = performance.now();
      const done = await coordinator.answerApproval(
        TEST_ADMIN,
        { conversationId, requestId: paused.approval?.requestId ?? '', decision: 'approve' },
        signal,
      );
      const t3 = performance.now();
      if (
        fetched.status !== 'complete' ||
        paused.status !== 'paused' ||
        done.status !== 'complete'
      ) {
        throw new Error(`turn ${i}: ${fetched.status}, ${paused.status}, ${done.status}`);
      }
      if (i < WARM_UP) continue;
      out.free.push(t1 - t0);
      out.toCard.push(t2 - t1);
      out.toReply.push(t3 - t2);
      out.paid.push(t3 - t1);
    }
    if (turns.paidHandlerRuns() !== total) throw new Error('not every turn was paid once');
  } finally {
    await turns.close();
  }
  return out;
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
