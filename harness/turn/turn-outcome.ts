import type { ErrorCode } from '../../common/errors';
import type { TerminalEffect } from './turn-machine';
import type { ApprovalRequestRecord, HandoffRecord, QuestionRequestRecord } from './turn-records';

/** How a turn ended (or paused). The caller records it in batch two. */
export type TurnOutcome =
  | {
      readonly kind: 'completed';
      readonly text: string;
      readonly steps: number;
      readonly fallback: boolean;
      readonly completedAtMs: number;
    }
  | {
      readonly kind: 'awaiting_approval';
      readonly request: ApprovalRequestRecord;
      readonly rejection?: string;
    }
  | {
      readonly kind: 'awaiting_answer';
      readonly request: QuestionRequestRecord;
      readonly rejection?: string;
    }
  | { readonly kind: 'handed_off'; readonly handoff: HandoffRecord }
  | {
      readonly kind: 'ambiguous';
      readonly toolCallId: string;
      readonly reason: string;
      readonly detectedAtMs: number;
    }
  | {
      readonly kind: 'failed';
      readonly code: ErrorCode;
      readonly message: string;
      readonly retryable: boolean;
    }
  | { readonly kind: 'cancelled'; readonly reason: string };

/**
 * The outcome a terminal effect of the machine stands for; `clock` stamps the moment of a
 * completion or of an ambiguity.
 */
export function toOutcome(effect: TerminalEffect, clock: { nowMs(): number }): TurnOutcome {
  switch (effect.type) {
    case 'finish':
      return {
        kind: 'completed',
        text: effect.text,
        steps: effect.steps,
        fallback: effect.fallback,
        completedAtMs: clock.nowMs(),
      };
    case 'pause_for_approval':
      return {
        kind: 'awaiting_approval',
        request: effect.request,
        ...(effect.rejection === undefined ? {} : { rejection: effect.rejection }),
      };
    case 'pause_for_question':
      return {
        kind: 'awaiting_answer',
        request: effect.request,
        ...(effect.rejection === undefined ? {} : { rejection: effect.rejection }),
      };
    case 'handoff':
      return { kind: 'handed_off', handoff: effect.handoff };
    case 'ambiguous':
      return {
        kind: 'ambiguous',
        toolCallId: effect.toolCallId,
        reason: effect.reason,
        detectedAtMs: clock.nowMs(),
      };
    case 'fail':
      return {
        kind: 'failed',
        code: effect.code,
        message: effect.message,
        retryable: effect.retryable,
      };
    case 'cancelled':
      return { kind: 'cancelled', reason: effect.reason };
    default: {
      const never: never = effect;
      return never;
    }
  }
}
