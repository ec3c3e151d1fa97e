/**
 * An admin settles a quarantined turn (docs/turns.md, "Resolving a quarantined turn"). Pure.
 *
 * The batch is one `turn_resolved` recording the decision, the actor and the caller, and,
 * for `ran`, the pending side-effecting call's `tool_result` (the result given, or an
 * error result saying it is unknown). Nothing committed before it changes. The resolution
 * ends the quarantine: the turn is an orphan again, and the next claim (a new message, or
 * the retry of the original request) dispatches it under its original id, as any orphan.
 * For `did_not_run` the pending call is left out of the steps the harness is given
 * (turn-projections.ts, `recordedSteps`), so the harness runs it again; for `ran` the
 * recorded result is in them, so the harness goes on past the call.
 */
import { AppError } from '../../common/errors';
import { EventKind } from '../../common/event-kinds';
import { StandingState } from '../../common/turn-standing';
import {
  ResolveDecision,
  ToolEffect,
  type ToolCall,
} from '../../proto/gen/polychrome/events/v1/events';
import type { Conversation } from '../api/v1alpha1/conversation-types';
import { ForensicAction, forensicRefusal } from './forensic-access';
import { turnState } from './turn-state';
import { type JournalView, type RecordedPayment, type TurnView } from './journal-view-types';
import {
  paymentResolveRefusal,
  planPaymentNotMade,
  planPaymentResolve,
  unsettledPayment,
  type PaymentResolveInput,
} from './plan-resolve-payment';
import { planned, refuse, type PlannedEvent, type Refusal } from './plan-common';
import type { Caller, ResolveTurn } from './turn-service';
import type { TurnStatusChange } from './turn-status';

/** The `tool_result` text of a call an admin says ran without knowing its result. */
export const UNKNOWN_RESULT_TEXT =
  'The outcome of this tool call is unknown: it may have run, but its result was not recorded. An admin marked it as run without a result; do not assume it succeeded, and do not run it again without asking the user.';

export interface ResolveInput {
  readonly view: JournalView;
  readonly conversation: Conversation | undefined;
  readonly caller: Caller;
  readonly request: ResolveTurn;
  readonly nowMs: number;
  /**
   * For a turn quarantined on a payment (plan-resolve-payment.ts): the paying wallet's
   * address, as the shell read it, and the approval key's receipt signature.
   */
  readonly payment?: Pick<PaymentResolveInput, 'payer' | 'signReceipt'>;
}

export type ResolvePlan =
  | Refusal
  | {
      readonly kind: 'resolve';
      readonly turn: TurnView;
      readonly events: readonly PlannedEvent[];
      readonly status: TurnStatusChange;
    };

/**
 * Who may resolve: an admin acting as one of their own identities (forensic-access.ts,
 * the rule of every admin command), on a conversation that exists.
 */
export function authorizeResolve(
  caller: Caller,
  request: ResolveTurn,
  conversation: Conversation | undefined,
): Refusal | undefined {
  const error = forensicRefusal(
    caller,
    request.conversationId,
    conversation,
    ForensicAction.Resolve,
    request.actor,
  );
  return error === undefined ? undefined : refuse(error);
}

/**
 * The resolve batch, or why not (nothing is committed on refusal), in order: who may
 * (404, 403); the turn must be in this conversation's journal and quarantined (409, naming
 * its state, and the earlier resolution when there is one); `ran` needs the call the
 * quarantine is about: a side-effecting `tool_call` of the turn without a result (409).
 */
export function planResolve(input: ResolveInput): ResolvePlan {
  const { view, caller, request } = input;
  const denied = authorizeResolve(caller, request, input.conversation);
  if (denied !== undefined) return denied;
  const turn = view.turnsById.get(request.turnId);
  if (turn === undefined) return unknownTurn(request);
  const quarantine = turn.standingFold.standing;
  if (quarantine.state !== StandingState.Quarantined) return notQuarantined(turn);
  const paying = unsettledPayment(turn, quarantine.toolCallId);
  const transaction = request.decision.kind === 'ran' ? request.decision.transaction : undefined;
  if (paying !== undefined || transaction !== undefined) {
    return resolvePayment(input, turn, paying, transaction, quarantine.position);
  }
  const pending = pendingCall(turn, quarantine.toolCallId);
  if (request.decision.kind === 'ran' && pending === undefined) {
    return refuse(
      new AppError(
        'conflict',
        `turn ${turn.turnId} has no side-effecting tool call waiting for its result (${quarantine.reason}); "ran" records that call's result, so resolve it with "did_not_run" to retry the turn`,
        { details: { turnId: turn.turnId, field: 'decision' } },
      ),
    );
  }
  const toolCallId = pending?.toolCallId ?? quarantine.toolCallId;
  const ran = request.decision.kind === 'ran' ? request.decision : undefined;
  const events: PlannedEvent[] = [
    planned(EventKind.TurnResolved, {
      turnId: turn.turnId,
      decision:
        ran === undefined
          ? ResolveDecision.RESOLVE_DECISION_DID_NOT_RUN
          : ResolveDecision.RESOLVE_DECISION_RAN,
      toolCallId,
      result: ran?.result ?? '',
      resultUnknown: ran !== undefined && ran.result === undefined,
      actor: request.actor,
      caller: caller.identity,
      session: caller.sessionId,
      resolvedAtMs: input.nowMs,
      quarantinePosition: quarantine.position,
    }),
  ];
  if (ran !== undefined) {
    events.push(
      planned(EventKind.ToolResult, {
        turnId: turn.turnId,
        toolCallId,
        content: ran.result ?? UNKNOWN_RESULT_TEXT,
        isError: ran.result === undefined,
        denied: false,
        // A delegate's call: its result belongs to the thread it ran on (docs/turns.md, "Delegation").
        thread: pending?.thread ?? '',
      }),
    );
  }
  return { kind: 'resolve', turn, events, status: { kind: 'resolved', turnId: turn.turnId } };
}

/**
 * A payment quarantine's resolution: "ran" with the transaction that paid it, or
 * "did_not_run" once its authorization can no longer move money (plan-resolve-payment.ts).
 */
function resolvePayment(
  input: ResolveInput,
  turn: TurnView,
  paying: RecordedPayment | undefined,
  transaction: string | undefined,
  quarantinePosition: number,
): ResolvePlan {
  if (paying === undefined) {
    return refuse(
      new AppError(
        'conflict',
        `turn ${turn.turnId} is not quarantined on a payment sent without a receipt; a transaction resolves only such a quarantine, so leave it out and resolve with "ran" (with the result, or unknown) or "did_not_run"`,
        { details: { turnId: turn.turnId, field: 'transaction' } },
      ),
    );
  }
  const { request, caller, nowMs, payment } = input;
  if (request.decision.kind === 'did_not_run') {
    const notMade = planPaymentNotMade(turn, paying, request, {
      caller,
      nowMs,
      quarantinePosition,
    });
    if ('kind' in notMade) return notMade;
    return resolved(turn, notMade.events);
  }
  if (transaction === undefined) return paymentResolveRefusal(turn, paying);
  if (payment === undefined) {
    throw new AppError('internal', 'unreachable: the shell reads the payer of a payment resolve');
  }
  const plan = planPaymentResolve(turn, paying, request, transaction, {
    ...payment,
    caller,
    conversationId: request.conversationId,
    nowMs,
    quarantinePosition,
  });
  if ('kind' in plan) return plan;
  return resolved(turn, plan.events);
}

function resolved(turn: TurnView, events: readonly PlannedEvent[]): ResolvePlan {
  return { kind: 'resolve', turn, events, status: { kind: 'resolved', turnId: turn.turnId } };
}

function unknownTurn(request: ResolveTurn): Refusal {
  return refuse(
    new AppError(
      'conflict',
      `turn ${request.turnId} is not in conversation ${request.conversationId}'s journal; name a quarantined turn of this conversation (status.turns.quarantined)`,
      { details: { turnId: request.turnId, state: 'unknown' } },
    ),
  );
}

function notQuarantined(turn: TurnView): Refusal {
  const state = turnState(turn);
  const last = turn.resolutions.at(-1)?.response;
  const earlier =
    last === undefined
      ? ''
      : ` it was already resolved (${last.decision === ResolveDecision.RESOLVE_DECISION_RAN ? 'ran' : 'did_not_run'}, by ${last.actor});`;
  return refuse(
    new AppError(
      'conflict',
      `turn ${turn.turnId} is not quarantined:${earlier} it is ${state}; only a quarantined turn (turn_ambiguous) can be resolved`,
      { details: { turnId: turn.turnId, state } },
    ),
  );
}

/**
 * The side-effecting call the quarantine is about, when it has no result: the one it names,
 * else (a quarantine that names none) the turn's last step if it is such a call.
 */
function pendingCall(turn: TurnView, named: string): ToolCall | undefined {
  const calls = turn.steps.filter((s) => s.kind === 'tool_call').map((s) => s.payload);
  const call =
    named === ''
      ? turn.steps.at(-1)?.kind === 'tool_call'
        ? calls.at(-1)
        : undefined
      : calls.findLast((c) => c.toolCallId === named);
  if (call === undefined || call.effect !== ToolEffect.TOOL_EFFECT_SIDE_EFFECT) return undefined;
  const answered = turn.steps.some(
    (s) => s.kind === 'tool_result' && s.payload.toolCallId === call.toolCallId,
  );
  return answered ? undefined : call;
}
