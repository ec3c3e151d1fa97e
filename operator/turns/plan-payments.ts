import type {
  PaymentChallenge,
  PaymentChargeAnswer,
  PaymentSettle,
  TrustedToolResult,
} from '../../proto/gen/polychrome/harness/v1/harness';
import type {
  PaymentPolicyRef,
  RecordedPayment,
  SpentPayment,
  TurnView,
} from './journal-view-types';
import {
  ApprovalDecision,
  type PaymentCharge,
  type ToolCall,
} from '../../proto/gen/polychrome/events/v1/events';
import { approvalArgsSha256 } from '../../common/approval-bytes';
import {
  chargeFactsOf,
  FETCH_TOOL,
  mcpResourceUrl,
  PAYMENT_APPROVAL_TOOL,
  paymentApprovalArgsJson,
} from '../../common/payment-approval';
import { isAppError } from '../../common/errors';
import { EventKind } from '../../common/event-kinds';
import { requestIds } from '../../common/request-ids';
import { paymentIdempotencyKey } from '../payments/idempotency';
import { chargeFromProto, chargeToProto } from '../payments/payment-events';
import {
  readChallenge,
  readMcpChallenge,
  type PaymentProtocol,
  type ReadChallenge,
} from '../payments/payment-protocol';
import {
  effectivePayment,
  NO_WALLET,
  payingWallet,
  policiesOfTurn,
  type PendingCharge,
  type PersonaPayment,
} from './effective-payment';
import { planned, type PlannedEvent } from './plan-common';
import { paidResult } from './paid-result';

/**
 * The turn plan's part for a paid call (docs/payments.md, "A paid call in a turn"): what the
 * control plane answers a harness's `payment_challenge` and `payment_settle`, decided from
 * the turn's journal view alone. The harness is less trusted than the control plane, so a
 * message about a call the journal does not hold as waiting for it is forged and quarantines
 * the turn, as a forged step does.
 *
 * Payments are off unless an admin linked a wallet to the conversation (`payment_policy`) or
 * to the persona the turn is attributed to (effective-payment.ts): until then every charge
 * is refused, named, and the tool is told nothing was paid.
 */

/** What the control plane does with a harness's payment message. */
export type PaymentPlan =
  | { readonly kind: 'forged'; readonly reason: string }
  | { readonly kind: 'answer'; readonly answer: PaymentChargeAnswer };

/** Why a call's payment messages cannot be about `toolCallId` of `turn`, or undefined. */
export function waitingCallProblem(
  turn: TurnView,
  turnId: string,
  toolCallId: string,
): string | undefined {
  if (turnId !== turn.turnId) {
    return `the harness named turn ${turnId}, not the dispatched turn ${turn.turnId}`;
  }
  const called = turn.steps.some(
    (step) => step.kind === 'tool_call' && step.payload.toolCallId === toolCallId,
  );
  if (!called) return `no tool_call ${toolCallId} is committed in turn ${turn.turnId}`;
  const done = turn.steps.some(
    (step) => step.kind === 'tool_result' && step.payload.toolCallId === toolCallId,
  );
  if (done) return `tool call ${toolCallId} already has its result`;
  return undefined;
}

/** The committed charge of a call, if one is. */
export function chargeOfCall(turn: TurnView, toolCallId: string): RecordedPayment | undefined {
  return turn.payments.findLast((payment) => payment.charge.toolCallId === toolCallId);
}

/** What the charge plan reads besides the turn and the challenge. */
export interface ChargeFacts {
  readonly conversationId: string;
  /** The wallet and limits in force (the journal view's newest `payment_policy`). */
  readonly policy: PaymentPolicyRef | undefined;
  /** Every payment sent in the conversation: the limits' totals. */
  readonly spent: readonly SpentPayment[];
  /** The conversation's charges committed and not yet paid, denied or expired. */
  readonly pending?: readonly PendingCharge[];
  /** The policy of the persona the turn is attributed to, and what it spent; absent: none. */
  readonly persona?: PersonaPayment;
  /** The protocols the control plane pays, in the order it prefers them. */
  readonly protocols: readonly PaymentProtocol[];
  readonly nowMs: number;
}

/** A charge to commit, and what the harness is answered once it is. */
export type ChargePlan =
  | PaymentPlan
  | {
      readonly kind: 'charge';
      readonly events: readonly PlannedEvent[];
      readonly answer: PaymentChargeAnswer;
    };

/**
 * A tool met a 402. The call must be committed and waiting, with no charge yet (a call
 * whose charge is committed waits for its approval and never meets its 402 again), and be
 * the built-in `fetch` of exactly the URL the challenge came from: the control plane pays
 * only for what the journal says the tool asked. Then, deny by default: no wallet linked,
 * a challenge no protocol reads, or a charge outside the spend limits is refused, named,
 * before anyone is asked; else the charge is committed and the turn pauses for its approval.
 */
export function paymentChallengePlan(
  turn: TurnView,
  challenge: PaymentChallenge,
  facts: ChargeFacts,
): ChargePlan {
  const { toolCallId } = challenge;
  const unfit = challengedCall(turn, challenge);
  if (unfit !== undefined) return unfit;
  const policies = policiesOfTurn(turn, facts);
  if (payingWallet(policies) === undefined) return refused(toolCallId, NO_WALLET);
  let read: ReadChallenge;
  try {
    read = readChallengeOf(challenge, facts.protocols, new Date(facts.nowMs));
  } catch (error) {
    if (!isAppError(error)) throw error;
    return refused(toolCallId, error.message);
  }
  const decided = effectivePayment(policies, read.charge, facts.nowMs);
  if (decided.kind === 'refuse') return refused(toolCallId, decided.reason);
  const paymentCall = { conversationId: facts.conversationId, turnId: turn.turnId, toolCallId };
  const charge = chargeToProto(read.charge, paymentCall, {
    approvalRequestId: requestIds.paymentApprovalRequestId(turn.turnId, toolCallId),
    idempotencyKey: paymentIdempotencyKey(read.charge, paymentCall),
    challenge: read.challenge,
    thread: challenge.thread,
  });
  return {
    kind: 'charge',
    events: [planned(EventKind.PaymentCharge, charge)],
    answer: { toolCallId, answer: { $case: 'charge', value: charge } },
  };
}

/** The charge of a challenge: a 402's headers, or an MCP tool's `PaymentRequired`. */
function readChallengeOf(
  challenge: PaymentChallenge,
  protocols: readonly PaymentProtocol[],
  at: Date,
): ReadChallenge {
  if (challenge.mcpPaymentRequired !== '') {
    return readMcpChallenge(protocols, challenge.mcpPaymentRequired, challenge.url, at);
  }
  const headers = new Headers(challenge.headers.map(({ name, value }) => [name, value]));
  return readChallenge(protocols, headers, challenge.url, at);
}

/**
 * Why the call cannot have met this challenge (forged), or cannot have it paid (refused):
 * it must wait, have no charge yet, and be `fetch` of exactly the challenge's URL, or an
 * MCP server's tool whose result carried the challenge, named by exactly its call.
 */
function challengedCall(turn: TurnView, challenge: PaymentChallenge): PaymentPlan | undefined {
  const { toolCallId } = challenge;
  const problem = waitingCallProblem(turn, challenge.turnId, toolCallId);
  if (problem !== undefined) return { kind: 'forged', reason: `payment_challenge: ${problem}` };
  if (chargeOfCall(turn, toolCallId) !== undefined) {
    return {
      kind: 'forged',
      reason: `payment_challenge: tool call ${toolCallId} already has a committed charge`,
    };
  }
  const call = committedCall(turn, toolCallId);
  const toolName = call?.toolName ?? '?';
  if (challenge.mcpPaymentRequired !== '') {
    const resource = mcpResourceUrl(toolName);
    if (resource === undefined) {
      return {
        kind: 'forged',
        reason: `payment_challenge: tool call ${toolCallId} (${toolName}) is not an MCP server's tool, yet its challenge came as one's result`,
      };
    }
    if (challenge.headers.length > 0) {
      return {
        kind: 'forged',
        reason: `payment_challenge: tool call ${toolCallId}'s MCP challenge came with HTTP headers`,
      };
    }
    return resource === challenge.url
      ? undefined
      : {
          kind: 'forged',
          reason: `payment_challenge: tool call ${toolCallId} is ${resource}, not ${challenge.url}`,
        };
  }
  if (call?.toolName !== FETCH_TOOL) {
    return refused(
      toolCallId,
      `only the built-in ${FETCH_TOOL} tool's HTTP 402s are paid (an MCP server's tool is paid over x402's MCP transport), not ${toolName}'s`,
    );
  }
  const fetched = urlOfArgs(call.argsJson);
  return fetched === challenge.url
    ? undefined
    : {
        kind: 'forged',
        reason: `payment_challenge: tool call ${toolCallId} fetched ${fetched ?? '(no url)'}, not ${challenge.url}`,
      };
}

function refused(toolCallId: string, refusal: string): PaymentPlan {
  return { kind: 'answer', answer: { toolCallId, answer: { $case: 'refusal', value: refusal } } };
}

/** The committed `tool_call` of `toolCallId`, if one is. */
function committedCall(turn: TurnView, toolCallId: string): ToolCall | undefined {
  for (const step of turn.steps) {
    if (step.kind === 'tool_call' && step.payload.toolCallId === toolCallId) return step.payload;
  }
  return undefined;
}

/** The URL a `fetch` call's arguments name, as the tool fetched it, or undefined. */
function urlOfArgs(argsJson: string): string | undefined {
  try {
    const { url } = JSON.parse(argsJson) as { url?: unknown };
    return typeof url === 'string' ? new URL(url).href : undefined;
  } catch {
    return undefined;
  }
}

/** What the settle plan reads besides the turn. */
export interface SettleFacts {
  /** The wallet linked now: an unlink after the approval stops the payment. */
  readonly policy: PaymentPolicyRef | undefined;
  /** Every payment sent in the conversation so far (the journal view's `spentPayments`). */
  readonly spent: readonly SpentPayment[];
  /** The policy of the persona the turn is attributed to, as it stands now; absent: none. */
  readonly persona?: PersonaPayment;
  readonly nowMs: number;
}

/** What the control plane does with a request to pay. */
export type SettlePlan =
  | { readonly kind: 'forged'; readonly reason: string }
  /** Nothing to pay: the answer is known (a receipt, a refusal) or unknown (sent, no receipt). */
  | { readonly kind: 'answer'; readonly result: TrustedToolResult }
  | {
      readonly kind: 'pay';
      /** `payment_sent`: committed before the payment leaves the control plane. */
      readonly events: readonly PlannedEvent[];
      readonly charge: PaymentCharge;
      readonly wallet: string;
      /**
       * The persona the turn is attributed to: the payment is counted against it in the
       * state plane's records before the `payment_sent` (over-counting on a crash, never
       * under), whether or not it has limits yet.
       */
      readonly persona?: string;
    };

/**
 * Pay an approved charge. Only a waiting call whose charge is committed and approved, by a
 * signed answer recorded for exactly that charge, may ask. Exactly once: a charge with a
 * receipt is answered from it and never paid again; one sent without a receipt (a crash
 * between the two) may have moved money, so its outcome is unknown and the turn is
 * quarantined naming it, never paid again; only a charge never sent is paid.
 */
export function paymentSettlePlan(
  turn: TurnView,
  settle: PaymentSettle,
  facts: SettleFacts,
): SettlePlan {
  const { toolCallId } = settle;
  const problem = waitingCallProblem(turn, settle.turnId, toolCallId);
  if (problem !== undefined) return { kind: 'forged', reason: `payment_settle: ${problem}` };
  const payment = chargeOfCall(turn, toolCallId);
  if (payment === undefined) {
    return {
      kind: 'forged',
      reason: `payment_settle: tool call ${toolCallId} has no committed charge to pay`,
    };
  }
  const { charge } = payment;
  if (settle.approvalRequestId !== charge.approvalRequestId || !approvedCharge(turn, charge)) {
    return {
      kind: 'forged',
      reason: `payment_settle: the charge of tool call ${toolCallId} has no recorded approval of exactly its fields under ${charge.approvalRequestId}`,
    };
  }
  if (payment.receipt !== undefined) {
    return { kind: 'answer', result: paidResult(toolCallId, payment.receipt.payload) };
  }
  if (payment.sent !== undefined) {
    return {
      kind: 'answer',
      result: {
        toolCallId,
        content: '',
        isError: false,
        outcomeUnknownReason: `the payment of charge ${charge.idempotencyKey} (${charge.amount} of ${charge.asset} on ${charge.network} to ${charge.payee}) was sent at position ${payment.sent.position} and no receipt is recorded: it may or may not have moved money, so it is not sent again; an admin resolves the turn with the transaction hash (docs/payments.md, "Exactly once")`,
      },
    };
  }
  return payPlan(turn, charge, facts);
}

/**
 * Pays an approved, unsent charge, if both policies as they stand now allow it: limits may
 * have changed or expired, or another payment been sent, while the person decided.
 */
function payPlan(turn: TurnView, charge: PaymentCharge, facts: SettleFacts): SettlePlan {
  const { toolCallId } = charge;
  const policies = policiesOfTurn(turn, facts);
  const decided = effectivePayment(
    policies,
    chargeFromProto(charge),
    facts.nowMs,
    charge.idempotencyKey,
  );
  if (decided.kind === 'refuse') {
    const refusal = decided.noWallet
      ? 'no wallet is linked to the conversation or to the persona of the turn any more'
      : decided.reason;
    return {
      kind: 'answer',
      result: {
        toolCallId,
        content: `the approved payment was not made: ${refusal}. Nothing was paid.`,
        isError: true,
        outcomeUnknownReason: '',
      },
    };
  }
  const { wallet } = decided;
  return {
    kind: 'pay',
    events: [sentEvent(charge, wallet, facts.nowMs)],
    charge,
    wallet,
    ...(turn.attribution.persona === '' ? {} : { persona: turn.attribution.persona }),
  };
}

/** The `payment_sent` of `charge`, with what it counts against the limits. */
function sentEvent(charge: PaymentCharge, wallet: string, sentAtMs: number): PlannedEvent {
  const { turnId, toolCallId, idempotencyKey, approvalRequestId, network, asset, amount } = charge;
  return planned(EventKind.PaymentSent, {
    ...{ turnId, toolCallId, idempotencyKey, approvalRequestId, sentAtMs, wallet },
    ...{ network, asset, amount },
  });
}

/** True when an approved answer for exactly this charge's fields is recorded. */
function approvedCharge(turn: TurnView, charge: PaymentCharge): boolean {
  const argsSha256 = Buffer.from(
    approvalArgsSha256(paymentApprovalArgsJson(chargeFactsOf(charge))),
  );
  return turn.approvalResponses.some(
    ({ response }) =>
      response.requestId === charge.approvalRequestId &&
      response.toolName === PAYMENT_APPROVAL_TOOL &&
      response.decision === ApprovalDecision.APPROVAL_DECISION_APPROVED &&
      Buffer.from(response.argsSha256).equals(argsSha256),
  );
}
