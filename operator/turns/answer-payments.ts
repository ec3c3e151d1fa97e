/**
 * The control plane's answers to a paid call's messages (docs/payments.md, "A paid call in
 * a turn", "A paid MCP tool"): a 402's challenge, a request to pay, and a paid MCP tool's
 * result. The plans decide (plan-payments.ts, plan-mcp-payment.ts); this commits what they
 * planned, pays or hands over the signed payment (pay-charge.ts), and answers the call,
 * each inside its payment span (payment-spans.ts).
 */
import { isMcpResource } from '../../common/payment-approval';
import type {
  McpPaidResult,
  PaymentChallenge,
  PaymentSettle,
  TrustedToolResult,
} from '../../proto/gen/polychrome/harness/v1/harness';
import type { AnswerContext, ForgedEnd } from './answer-context';
import type { HarnessCall } from './harness-call';
import { forgedEnd } from './harness-run';
import { authorizeMcpCharge, notPaid, payCharge, recordMcpPaid } from './pay-charge';
import { pendingCharges } from './effective-payment';
import { countPersonaSpend, personaPaymentOf } from './persona-payment-facts';
import {
  inPaymentSpan,
  PaymentSpanOutcome,
  type PaymentSpanCall,
  type PaymentSpanNotes,
} from './payment-spans';
import type { PlannedEvent } from './plan-common';
import { mcpPaidResultPlan } from './plan-mcp-payment';
import { chargeOfCall, paymentChallengePlan, paymentSettlePlan } from './plan-payments';

/** A tool met a 402: its charge, or a refusal, inside the charge's span. */
export function answerPaymentChallenge(
  challenge: PaymentChallenge,
  call: HarnessCall,
  context: AnswerContext,
): Promise<ForgedEnd | undefined> {
  return inPaymentSpan('charge', paymentSpanCall(context, challenge), (notes) =>
    answerChallenge(challenge, call, context, notes),
  );
}

/** A call asks for its approved charge to be paid, inside the settle's span. */
export function answerPaymentSettle(
  settle: PaymentSettle,
  call: HarnessCall,
  context: AnswerContext,
): Promise<ForgedEnd | undefined> {
  return inPaymentSpan('settle', paymentSpanCall(context, settle), (notes) =>
    answerSettle(settle, call, context, notes),
  );
}

/** Whose paid call a harness's payment message is about, for its span. */
function paymentSpanCall(
  context: AnswerContext,
  message: { readonly toolCallId: string },
): PaymentSpanCall {
  const { turnId } = context.facts().turn;
  const { conversationId } = context.payments();
  return { conversationId, turnId, toolCallId: message.toolCallId };
}

/** What both payment messages read: the context, the turn, the time, the turn persona's policy. */
async function paymentFacts(context: AnswerContext) {
  const payments = context.payments();
  const { turn } = context.facts();
  const nowMs = payments.nowMs();
  const persona = await personaPaymentOf(payments.personas, turn.attribution.persona, nowMs);
  return { payments, turn, nowMs, persona };
}

/** A tool met a 402: the plan reads the charge; a charge is committed before it is answered. */
async function answerChallenge(
  challenge: PaymentChallenge,
  call: HarnessCall,
  context: AnswerContext,
  notes: PaymentSpanNotes,
): Promise<ForgedEnd | undefined> {
  const { payments, turn, nowMs, persona } = await paymentFacts(context);
  const plan = paymentChallengePlan(turn, challenge, {
    ...payments,
    protocols: payments.settings?.protocols ?? [],
    pending: pendingCharges(payments.openTurns, nowMs),
    ...(persona === undefined ? {} : { persona }),
    nowMs,
  });
  if (plan.kind === 'forged') {
    notes.outcome(PaymentSpanOutcome.Forged);
    return forgedEnd(plan.reason, challenge.toolCallId, call);
  }
  const answer = plan.answer.answer;
  if (answer?.$case === 'charge') notes.charge(answer.value);
  if (plan.kind === 'charge') await context.commit(plan.events);
  notes.outcome(plan.kind === 'charge' ? PaymentSpanOutcome.Charged : PaymentSpanOutcome.Refused);
  call.chargeAnswer(plan.answer);
  return undefined;
}

/** An approved charge's call asks to be paid: the plan decides, `payCharge` pays. */
async function answerSettle(
  settle: PaymentSettle,
  call: HarnessCall,
  context: AnswerContext,
  notes: PaymentSpanNotes,
): Promise<ForgedEnd | undefined> {
  const { payments, turn, nowMs, persona } = await paymentFacts(context);
  const plan = paymentSettlePlan(turn, settle, {
    policy: payments.policy,
    spent: payments.spent,
    ...(persona === undefined ? {} : { persona }),
    nowMs,
  });
  if (plan.kind === 'forged') {
    notes.outcome(PaymentSpanOutcome.Forged);
    return forgedEnd(plan.reason, settle.toolCallId, call);
  }
  const recorded = chargeOfCall(turn, settle.toolCallId);
  if (recorded !== undefined) notes.charge(recorded.charge);
  if (plan.kind === 'answer') {
    notes.outcome(
      recorded?.receipt !== undefined ? PaymentSpanOutcome.Answered : settledOutcome(plan.result),
    );
    call.toolResult(plan.result);
    return undefined;
  }
  // Counted against the persona before the send is recorded: a crash between the two
  // over-counts, never under-counts; the records refuse a count over the persona's cap.
  const { charge } = plan;
  const who = plan.persona ?? '';
  const id = payments.conversationId;
  const refused = await countPersonaSpend(payments.personas, who, charge, id, nowMs, persona);
  if (refused !== undefined) {
    notes.outcome(PaymentSpanOutcome.NotPaid);
    call.toolResult(notPaid(charge.toolCallId, refused));
    return undefined;
  }
  await context.commit(plan.events);
  const parts = {
    ...payments,
    commit: (events: readonly PlannedEvent[]) => context.commit(events),
  };
  if (isMcpResource(plan.charge.resourceUrl)) {
    // The MCP session is the harness's: it gets the signed payment and calls the tool.
    const authorized = await authorizeMcpCharge(plan.charge, plan.wallet, parts);
    if ('payment' in authorized) {
      notes.outcome(PaymentSpanOutcome.Handed);
      call.mcpPayment(authorized.payment);
      return undefined;
    }
    notes.outcome(settledOutcome(authorized.result));
    call.toolResult(authorized.result);
    return undefined;
  }
  const result = await payCharge(plan.charge, plan.wallet, parts);
  notes.outcome(settledOutcome(result));
  call.toolResult(result);
  return undefined;
}

/**
 * What a paid MCP tool answered, relayed by the harness this call handed its payment to:
 * the receipt is committed before the tool is answered, inside the settle's span.
 */
export function answerMcpPaidResult(
  result: McpPaidResult,
  handed: boolean,
  call: HarnessCall,
  context: AnswerContext,
): Promise<ForgedEnd | undefined> {
  return inPaymentSpan('settle', paymentSpanCall(context, result), async (notes) => {
    const plan = mcpPaidResultPlan(context.facts().turn, result, handed);
    if (plan.kind === 'forged') {
      notes.outcome(PaymentSpanOutcome.Forged);
      return forgedEnd(plan.reason, result.toolCallId, call);
    }
    notes.charge(plan.charge);
    const payments = context.payments();
    const commit = (events: readonly PlannedEvent[]) => context.commit(events);
    const answer = await recordMcpPaid(plan.charge, plan.wallet, result, { ...payments, commit });
    notes.outcome(settledOutcome(answer));
    call.toolResult(answer);
    return undefined;
  });
}

/** What a settle's answer says of the money: unknown, not paid, or paid. */
function settledOutcome(result: TrustedToolResult): PaymentSpanOutcome {
  if (result.outcomeUnknownReason !== '') return PaymentSpanOutcome.Unknown;
  return result.isError ? PaymentSpanOutcome.NotPaid : PaymentSpanOutcome.Paid;
}
