/**
 * Batch two (docs/turns.md "One message", 7): how the turn settles for how the harness
 * ended. Pure.
 */
import { AppError } from '../../common/errors';
import { EventKind } from '../../common/event-kinds';
import {
  ToolEffect,
  type ApprovalRequest,
  type QuestionRequest,
} from '../../proto/gen/polychrome/events/v1/events';
import type { Step, TurnResult } from '../../proto/gen/polychrome/harness/v1/harness';
import { recordedSteps } from './turn-projections';
import { type TurnView } from './journal-view-types';
import { describe, FAILED_TURN_TEXT, planned, type PlannedEvent } from './plan-common';
import {
  checkApprovalRequest,
  checkQuestionRequest,
  checkStep,
  type DispatchedTurn,
} from './plan-harness-checks';
import type { TurnStatusChange } from './turn-status';

/** How the harness call ended, as the shell saw it. */
export type HarnessEnd =
  | {
      readonly kind: 'paused';
      readonly request:
        | { readonly $case: 'approvalRequest'; readonly value: ApprovalRequest }
        | { readonly $case: 'questionRequest'; readonly value: QuestionRequest }
        | undefined;
    }
  | { readonly kind: 'result'; readonly result: TurnResult; readonly carried: readonly Step[] }
  /** The call failed (unreachable, died, cancelled); `error` says how. */
  | { readonly kind: 'failed'; readonly error: unknown; readonly retryable: boolean }
  /** A step or request the harness sent was refused as forged (see {@link checkStep}). */
  | { readonly kind: 'forged'; readonly reason: string; readonly toolCallId: string };

export interface SettleInput {
  readonly dispatched: DispatchedTurn;
  readonly end: HarnessEnd;
  readonly attempt: number;
  readonly maxAttempts: number;
  readonly nowMs: number;
}

export type SettlePlan =
  /** The turn stays an orphan, recovered on the next claim; `message` says why. */
  | { readonly kind: 'orphan'; readonly message: string }
  | {
      readonly kind: 'commit';
      readonly events: readonly PlannedEvent[];
      readonly status: TurnStatusChange;
    };

/**
 * Batch two for how the harness ended (docs/turns.md "One message", 7): the carried reply
 * and `turn_complete`, a pause, a handoff, or `turn_ambiguous`; a retryable failure before
 * the last attempt leaves an orphan; anything else settles with the fallback, or as
 * ambiguous when a side effect is in doubt. What the harness says is checked first: a
 * forged request or outcome quarantines the turn with the reason, and none of it is
 * committed.
 */
export function planSettle(input: SettleInput): SettlePlan {
  const { dispatched, end } = input;
  const turnId = dispatched.turn.turnId;
  const lastAttempt = input.attempt >= input.maxAttempts;
  switch (end.kind) {
    case 'forged':
      return quarantine(turnId, end.toolCallId, forgedReason(end.reason), input.nowMs);
    case 'failed':
      if (!lastAttempt || !end.retryable) {
        return { kind: 'orphan', message: describe(end.error) };
      }
      return settleFailed(dispatched.turn, describe(end.error), input.nowMs);
    case 'paused': {
      const request = end.request;
      if (request?.$case === 'approvalRequest') {
        const forged = checkApprovalRequest(dispatched, request.value);
        if (forged !== undefined) {
          return quarantine(turnId, request.value.toolCallId, forgedReason(forged), input.nowMs);
        }
        return {
          kind: 'commit',
          // The request's time is the control plane's clock, not the harness's.
          events: [
            planned(EventKind.ApprovalRequest, { ...request.value, requestedAtMs: input.nowMs }),
          ],
          status: { kind: 'awaiting_approval', turnId, requestId: request.value.requestId },
        };
      }
      if (request?.$case === 'questionRequest') {
        const forged = checkQuestionRequest(dispatched, request.value);
        if (forged !== undefined) {
          return quarantine(turnId, request.value.toolCallId, forgedReason(forged), input.nowMs);
        }
        return {
          kind: 'commit',
          // The request's time is the control plane's clock, not the harness's.
          events: [
            planned(EventKind.QuestionRequest, { ...request.value, requestedAtMs: input.nowMs }),
          ],
          status: { kind: 'awaiting_answer', turnId, requestId: request.value.requestId },
        };
      }
      return quarantine(turnId, '', forgedReason('it paused without a request'), input.nowMs);
    }
    case 'result':
      return settleResult(input, end.result, end.carried);
  }
}

function settleResult(
  input: SettleInput,
  result: TurnResult,
  carried: readonly Step[],
): SettlePlan {
  const { dispatched } = input;
  const turnId = dispatched.turn.turnId;
  const outcome = result.outcome;
  const named =
    outcome?.$case === 'complete' || outcome?.$case === 'handoff' || outcome?.$case === 'ambiguous'
      ? outcome.value.turnId
      : turnId;
  if (named !== turnId) {
    return quarantine(
      turnId,
      '',
      forgedReason(
        `its ${outcome?.$case ?? 'result'} names turn ${named || '(none)'}, not ${turnId}`,
      ),
      input.nowMs,
    );
  }
  switch (outcome?.$case) {
    case 'complete':
      return settleComplete(input, outcome.value, carried);
    case 'handoff':
      return settleHandoff(input, outcome.value);
    case 'ambiguous':
      return {
        kind: 'commit',
        events: [planned(EventKind.TurnAmbiguous, outcome.value)],
        status: {
          kind: 'ambiguous',
          turnId,
          toolCallId: outcome.value.toolCallId,
          reason: outcome.value.reason,
        },
      };
    case 'failed':
      if (outcome.value.retryable && input.attempt < input.maxAttempts) {
        return { kind: 'orphan', message: outcome.value.message };
      }
      return settleFailed(dispatched.turn, outcome.value.message, input.nowMs);
    case 'cancelled':
    case undefined:
      return { kind: 'orphan', message: 'the harness gave up' };
  }
}

type OutcomeValue<C extends NonNullable<TurnResult['outcome']>['$case']> = Extract<
  NonNullable<TurnResult['outcome']>,
  { $case: C }
>['value'];

/** A completed turn: its carried steps (checked like streamed ones) and `turn_complete`. */
function settleComplete(
  input: SettleInput,
  complete: OutcomeValue<'complete'>,
  carried: readonly Step[],
): SettlePlan {
  const { dispatched } = input;
  const turnId = dispatched.turn.turnId;
  for (const step of carried) {
    const forged = checkStep(dispatched, step);
    if (forged !== undefined) return quarantine(turnId, '', forgedReason(forged), input.nowMs);
  }
  return {
    kind: 'commit',
    events: [...carried.map(stepEventOf), planned(EventKind.TurnComplete, complete)],
    status: { kind: 'settled', turnId },
  };
}

/** A handoff, to one of the conversation's handoff targets only. */
function settleHandoff(input: SettleInput, handoff: OutcomeValue<'handoff'>): SettlePlan {
  const turnId = input.dispatched.turn.turnId;
  const targets = input.dispatched.conversation.spec.agent?.handoffTargets ?? [];
  if (!targets.includes(handoff.targetAgent)) {
    return quarantine(
      turnId,
      handoff.toolCallId,
      forgedReason(
        `it handed off to ${handoff.targetAgent || '(none)'}, which is not one of the conversation's handoff targets`,
      ),
      input.nowMs,
    );
  }
  return {
    kind: 'commit',
    events: [planned(EventKind.Handoff, handoff)],
    status: { kind: 'settled', turnId },
  };
}

function forgedReason(what: string): string {
  return `the harness sent what this turn cannot have produced, so nothing of it was committed: ${what}`;
}

function quarantine(turnId: string, toolCallId: string, reason: string, nowMs: number): SettlePlan {
  return {
    kind: 'commit',
    events: [planned(EventKind.TurnAmbiguous, { turnId, toolCallId, reason, detectedAtMs: nowMs })],
    status: { kind: 'ambiguous', turnId, toolCallId, reason },
  };
}

/**
 * A turn that cannot finish: `turn_ambiguous` if its last committed step is a
 * side-effecting call (did it run?), else `turn_complete` with the fixed fallback.
 */
export function settleFailed(turn: TurnView, why: string, nowMs: number): SettlePlan {
  const steps = recordedSteps(turn);
  const last = steps.at(-1)?.step;
  if (last?.$case === 'toolCall' && last.value.effect === ToolEffect.TOOL_EFFECT_SIDE_EFFECT) {
    return quarantine(
      turn.turnId,
      last.value.toolCallId,
      `the turn could not be resumed after its side-effecting call ${last.value.toolName} was committed (${why})`,
      nowMs,
    );
  }
  return {
    kind: 'commit',
    events: [
      planned(EventKind.TurnComplete, {
        turnId: turn.turnId,
        text: FAILED_TURN_TEXT,
        steps: steps.filter((s) => s.step?.$case === 'modelCall').length,
        completedAtMs: nowMs,
        fallback: true,
      }),
    ],
    status: { kind: 'settled', turnId: turn.turnId },
  };
}

/** The event a harness step is committed as. */
export function stepEventOf(step: Step): PlannedEvent {
  switch (step.step?.$case) {
    case 'modelCall':
      return planned(EventKind.ModelCall, step.step.value);
    case 'toolCall':
      return planned(EventKind.ToolCall, step.step.value);
    case 'toolResult':
      return planned(EventKind.ToolResult, step.step.value);
    case 'agentConfig':
      return planned(EventKind.AgentConfig, step.step.value);
    case 'agentHandoff':
      return planned(EventKind.AgentHandoff, step.step.value);
    case undefined:
      throw new AppError(
        'invalid_argument',
        `the harness sent step ${step.sequence} without content`,
      );
  }
}
