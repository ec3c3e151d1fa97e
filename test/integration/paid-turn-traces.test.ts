/**
 * No key, seed or signature material in a trace (docs/payments.md, "Wallets and the
 * SecretStore"; docs/observability.md#spans): paid turns on the real stack (the
 * control-plane process paying from a wallet directory, the harness process with the
 * built-in `fetch`, the state-plane process), every plane exporting its spans over OTLP to
 * the real OpenTelemetry Collector (hack/otelcol), one purchase from an @x402 resource
 * server and one from an `mppx` server, both settling an EIP-3009 token on anvil. Every
 * byte the collector wrote (resources, spans, attributes, events, links) is searched for the
 * wallet's key and for what the sellers received (x402's `PAYMENT-SIGNATURE`, MPP's
 * `Authorization: Payment`, and the EIP-3009 signature inside each); the payment's own
 * spans are checked to carry what an operator needs instead.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomBytes } from 'node:crypto';
import { rm } from 'node:fs/promises';
import { formatUnits } from 'viem';
import { payloadCodecs } from '../../common/event-kinds';
import { PAYMENT_APPROVAL_TOOL } from '../../common/payment-approval';
import { Role } from '../../common/persona-roles';
import { pollUntil } from '../../hack/lib/processes';
import { ANVIL_NETWORK } from '../support/chain/anvil';
import { TOKEN_DECIMALS } from '../support/chain/token';
import { toolDirective } from '../support/messages-api-server';
import { expectNoPaymentSecrets } from '../support/payment-secrets';
import {
  fixtureMppTokens,
  fixtureSpendLimits,
  fixtureWalletDir,
  startPaidFixture,
  type PaidFixture,
} from '../support/payments/paid-fixture';
import { OtelCollector, type CollectedSpan } from './support/otel-collector';
import { apiCall, linkWallet, type ApiAnswer } from './support/public-api';
import { startTurnStack, type TurnStack } from './support/turn-stack';

const PRICE = '1250000';
const WALLET = 'ops';
const OWNER = 'test:trace-payer';
const ADMIN = 'test:trace-admin';
const INTERNAL = 1;
const CONTROL_PLANE = 'polychrome-control-plane';
const APPROVAL_ROUTE = 'POST /v1/conversations/{conversationId}/approvals/{requestId}';
const MESSAGES_ROUTE = 'POST /v1/conversations/{conversationId}/messages';

/** Every string in a parsed OTLP/JSON line, unescaped: what the raw text holds escaped. */
function stringsOf(value: unknown): string[] {
  if (typeof value === 'string') return [value];
  if (Array.isArray(value)) return value.flatMap(stringsOf);
  if (typeof value === 'object' && value !== null) return Object.values(value).flatMap(stringsOf);
  return [];
}

describe('the traces of paid turns hold no key or signature material', () => {
  let collector: OtelCollector;
  let fixture: PaidFixture;
  let stack: TurnStack;
  let walletDir: string;
  let owner: string;
  let admin: string;
  /** The trace ids of every request made, to wait for their spans before the search. */
  const traces: string[] = [];
  /** Each purchase's charge as the journal recorded it, by protocol. */
  const charges = new Map<string, { idempotencyKey: string; transaction: string }>();

  beforeAll(async () => {
    collector = await OtelCollector.start();
    fixture = await startPaidFixture({
      price: PRICE,
      mppAmount: formatUnits(BigInt(PRICE), TOKEN_DECIMALS),
    });
    walletDir = await fixtureWalletDir(fixture, WALLET);
    const tracing = {
      OTEL_EXPORTER_OTLP_ENDPOINT: collector.endpoint,
      OTEL_BSP_SCHEDULE_DELAY: '100',
    };
    stack = await startTurnStack({
      namespacePrefix: 'paytrace',
      controlPlaneEnv: {
        ...tracing,
        // MPP first: the mppx server's 402 offers both and is paid with MPP, the x402
        // server's offers x402 only and is paid with it.
        POLYCHROME_PAYMENT_PROTOCOLS: 'mpp,x402',
        POLYCHROME_MPP_TOKENS: fixtureMppTokens(fixture),
        POLYCHROME_WALLET_DIR: walletDir,
      },
      harnessEnv: tracing,
      stateEnv: tracing,
    });
    owner = await stack.mintToken(OWNER);
    admin = await stack.mintToken(ADMIN, [Role.Admin]);
  }, 180_000);

  afterAll(async () => {
    await stack?.stop();
    await fixture?.close();
    await collector?.stop();
    if (walletDir !== undefined) await rm(walletDir, { recursive: true, force: true });
  }, 60_000);

  /** A request to the public API under a new trace of its own. */
  async function traced(
    path: string,
    token: string,
    body: unknown,
  ): Promise<{ answer: ApiAnswer; traceId: string }> {
    const traceId = randomBytes(16).toString('hex');
    traces.push(traceId);
    const answer = await apiCall(stack.apiUrl, 'POST', path, {
      token,
      headers: { traceparent: `00-${traceId}-${randomBytes(8).toString('hex')}-01` },
      body,
    });
    return { answer, traceId };
  }

  /** Waits until trace `traceId` holds a span named each of `names` (a prefix ends in a space). */
  function spansOf(traceId: string, names: readonly string[]): Promise<CollectedSpan[]> {
    return pollUntil(
      `the spans ${names.join(', ')} of trace ${traceId}`,
      () => {
        const mine = collector.spans().filter((span) => span.traceId === traceId);
        const has = (name: string): boolean =>
          mine.some((span) =>
            name.endsWith(' ') ? span.name.startsWith(name) : span.name === name,
          );
        return Promise.resolve(names.every(has) ? mine : undefined);
      },
      { timeoutMs: 30_000, intervalMs: 250 },
    );
  }

  /** The one span named `name` in `spans`. */
  function one(spans: readonly CollectedSpan[], name: string): CollectedSpan {
    const found = spans.filter((span) => span.name === name);
    expect(found.map((span) => span.name)).toEqual([name]);
    return found[0] as CollectedSpan;
  }

  function buy(url: string): string {
    return `buy the report ${toolDirective('fetch', { url })}`;
  }

  /** A conversation offered `fetch`; `linked` has an admin link the wallet (recorded). */
  async function paidConversation(name: string, linked: boolean): Promise<string> {
    const uid = await stack.createConversation(name, {
      owner: OWNER,
      tools: { builtin: ['fetch'] },
    });
    if (linked) await link(uid);
    return uid;
  }

  async function link(uid: string): Promise<void> {
    const answer = await linkWallet(stack.apiUrl, admin, uid, {
      actor: ADMIN,
      wallet: WALLET,
      limits: fixtureSpendLimits(fixture, PRICE),
    });
    expect(answer.status).toBe(200);
  }

  it('records a charge refused for want of a wallet as a payment_charge span, outcome refused', async () => {
    await stack.withDiagnostics(async () => {
      const uid = await paidConversation('refused', false);
      const { answer, traceId } = await traced(`/v1/conversations/${uid}/messages`, owner, {
        text: buy(`${fixture.x402.resourceUrl}/paid`),
        idempotencyKey: 'k-refused',
      });
      expect(answer.body).toMatchObject({ status: 'complete' });
      const spans = await spansOf(traceId, [MESSAGES_ROUTE, 'payment_charge']);
      const charge = one(spans, 'payment_charge');
      expect([charge.service, charge.kind]).toEqual([CONTROL_PLANE, INTERNAL]);
      expect(charge.parentSpanId).toBe(one(spans, MESSAGES_ROUTE).spanId);
      expect(charge.attributes).toMatchObject({
        'polychrome.payment.outcome': 'refused',
        'polychrome.conversation.id': uid,
        'gen_ai.conversation.id': uid,
      });
      // No charge was read: the span names none.
      expect(charge.attributes['polychrome.payment.protocol']).toBeUndefined();
      expect(await stack.journalKinds(uid)).not.toContain('payment_charge');
    });
  }, 120_000);

  it.each([
    { protocol: 'x402', seller: () => fixture.x402.resourceUrl },
    { protocol: 'mpp', seller: () => fixture.mpp?.url ?? '' },
  ])(
    'a $protocol purchase: payment_charge and payment_settle spans under the requests that made them, with safe attributes',
    async ({ protocol, seller }) => {
      await stack.withDiagnostics(async () => {
        const uid = await paidConversation(`buys-${protocol}`, true);
        const post = await traced(`/v1/conversations/${uid}/messages`, owner, {
          text: buy(`${seller()}/paid`),
          idempotencyKey: `k-${protocol}`,
        });
        expect(post.answer.body).toMatchObject({
          status: 'paused',
          approval: { toolName: PAYMENT_APPROVAL_TOOL, args: { amount: PRICE, protocol } },
        });
        const approval = post.answer.body.approval as { requestId: string; toolCallId: string };
        const approve = await traced(
          `/v1/conversations/${uid}/approvals/${approval.requestId}`,
          admin,
          { decision: 'approve' },
        );
        expect(approve.answer.body).toMatchObject({ status: 'complete' });
        expect(String(approve.answer.body.reply)).toMatch(/^tool fetch said: HTTP 200\n/u);

        const journal = await stack.journal(uid);
        const payload = (kind: 'payment_charge' | 'outbound_payment_receipt') =>
          journal.find((entry) => entry.kind === kind)?.payload ?? new Uint8Array();
        const charge = payloadCodecs.payment_charge.decode(payload('payment_charge'));
        const receipt = payloadCodecs.outbound_payment_receipt.decode(
          payload('outbound_payment_receipt'),
        );
        expect(receipt.transaction).toMatch(/^0x[0-9a-f]{64}$/u);
        charges.set(protocol, {
          idempotencyKey: charge.idempotencyKey,
          transaction: receipt.transaction,
        });

        const chargeFields = {
          'polychrome.payment.protocol': protocol,
          'polychrome.payment.network': ANVIL_NETWORK,
          'polychrome.payment.asset': fixture.token.address.toLowerCase(),
          'polychrome.payment.amount': PRICE,
          'polychrome.payment.payee': fixture.payee.toLowerCase(),
          'polychrome.payment.idempotency_key': charge.idempotencyKey,
          'polychrome.payment.approval_request_id': approval.requestId,
          'polychrome.conversation.id': uid,
          'gen_ai.conversation.id': uid,
          'polychrome.turn.id': charge.turnId,
          'gen_ai.tool.call.id': approval.toolCallId,
        };
        // The charge is read and committed in the request that met the 402.
        const asked = await spansOf(post.traceId, [MESSAGES_ROUTE, `payment_charge ${protocol}`]);
        const chargeSpan = one(asked, `payment_charge ${protocol}`);
        expect([chargeSpan.service, chargeSpan.kind]).toEqual([CONTROL_PLANE, INTERNAL]);
        expect(chargeSpan.parentSpanId).toBe(one(asked, MESSAGES_ROUTE).spanId);
        expect(chargeSpan.attributes).toMatchObject({
          ...chargeFields,
          'polychrome.payment.outcome': 'charged',
        });
        expect(chargeSpan.attributes['polychrome.payment.transaction']).toBeUndefined();

        // It is paid in the request that approved it, once.
        const paid = await spansOf(approve.traceId, [APPROVAL_ROUTE, `payment_settle ${protocol}`]);
        const settle = one(paid, `payment_settle ${protocol}`);
        expect([settle.service, settle.kind]).toEqual([CONTROL_PLANE, INTERNAL]);
        expect(settle.parentSpanId).toBe(one(paid, APPROVAL_ROUTE).spanId);
        expect(settle.attributes).toMatchObject({
          ...chargeFields,
          'polychrome.payment.outcome': 'paid',
          'polychrome.payment.transaction': receipt.transaction,
          'polychrome.payment.payer': fixture.payer.toLowerCase(),
        });
        expect(settle.status.code ?? 0).toBe(0);
      });
    },
    150_000,
  );

  it('leaves no key or signature material in any exported span, attribute, event or resource', async () => {
    expect([...charges.keys()].sort()).toEqual(['mpp', 'x402']);
    // Every request's spans of all three planes have arrived: the harness's and the state
    // plane's come in batches of their own.
    for (const traceId of traces) {
      await pollUntil(
        `the three planes' spans of trace ${traceId}`,
        () => {
          const services = new Set(
            collector
              .spans()
              .filter((span) => span.traceId === traceId)
              .map((span) => span.service),
          );
          return Promise.resolve(services.size === 3 ? true : undefined);
        },
        { timeoutMs: 30_000, intervalMs: 250 },
      );
    }
    const raw = collector.exported();
    const decoded = raw
      .split('\n')
      .filter((line) => line.trim() !== '')
      .flatMap((line) => stringsOf(JSON.parse(line)));
    const all = [raw, ...decoded].join('\n');
    const lower = all.toLowerCase();
    // What is public is there, so the search reads the right bytes: the payer's address,
    // each charge's idempotency key and transaction, the fetch tool's spans in the harness.
    expect(lower).toContain(fixture.payer.slice(2).toLowerCase());
    for (const { idempotencyKey, transaction } of charges.values()) {
      expect(all).toContain(idempotencyKey);
      expect(all).toContain(transaction);
    }
    expect(all).toContain('execute_tool fetch');
    expect(all).toContain('polychrome-harness');
    expect(all).toContain('polychrome.state.v1.Journal/Append');

    expectNoPaymentSecrets(all, {
      payerKey: fixture.payerKey,
      paymentSignatures: fixture.x402.paymentSignatures(),
      mppCredentials: fixture.mpp?.credentials() ?? [],
    });
  }, 120_000);
});
