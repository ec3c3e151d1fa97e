import { isErrorCode } from '../../common/errors';
import type {
  TextDelta as ProtoTextDelta,
  TrustedToolCall,
  TrustedToolResult,
  TurnOutput,
} from '../../proto/gen/polychrome/harness/v1/harness';
import type { ToolCallRequest, ToolOutcome } from '../turn/ports/tool-port';
import { invalidField, jsonObjectField } from '../turn/proto-fields';
import {
  approvalRequestFromProto,
  approvalRequestToProto,
  handoffFromProto,
  handoffToProto,
  questionRequestFromProto,
  questionRequestToProto,
} from '../turn/request-codec';
import type { TextDelta } from '../turn/effect-calls';
import type { TurnOutcome } from '../turn/turn-outcome';
import { toolEffectFromProto, toolEffectToProto } from '../turn/step-codec';
import type { ToolEffect } from '../turn/turn-records';

/**
 * What a `Harness.RunTurn` call streams besides steps (harness.v1 `TurnOutput`: text
 * deltas, trusted tool calls and their answers, the terminal `paused` or `result`) to and
 * from domain values: one `toProto`/`fromProto` pair per message (STYLE.md §1).
 */

/** A call the harness forwards to the control plane (the trusted-tool proxy). */
export interface TrustedCall {
  readonly call: ToolCallRequest;
  readonly effect: ToolEffect;
}

/** The control plane's answer to a trusted call: a known outcome or an unknown one. */
export type TrustedAnswer =
  | { readonly toolCallId: string; readonly known: true; readonly outcome: ToolOutcome }
  | { readonly toolCallId: string; readonly known: false; readonly reason: string };

/** The turn's terminal outcome as a stream message (`paused` or `result`). */
export type TerminalOutput = Extract<
  NonNullable<TurnOutput['output']>,
  { $case: 'paused' | 'result' }
>;

/** A text delta to proto. */
export function textDeltaToProto(delta: TextDelta): ProtoTextDelta {
  return { step: delta.step, text: delta.text, thread: delta.thread ?? '' };
}

/** Proto `TextDelta` to domain. */
export function textDeltaFromProto(delta: ProtoTextDelta): TextDelta {
  return {
    step: delta.step,
    text: delta.text,
    ...(delta.thread === '' ? {} : { thread: delta.thread }),
  };
}

/** A trusted call to proto `TrustedToolCall`. */
export function trustedCallToProto(trusted: TrustedCall): TrustedToolCall {
  return {
    turnId: trusted.call.turnId,
    step: trusted.call.step,
    toolCallId: trusted.call.toolCallId,
    toolName: trusted.call.name,
    argsJson: trusted.call.argsJson,
    effect: toolEffectToProto(trusted.effect),
  };
}

/**
 * Proto `TrustedToolCall` to a trusted call. `maxSteps` is not on the wire (the control
 * plane knows the budget), so it comes back as 0.
 *
 * @throws AppError `invalid_argument` when the args are not a JSON object or the effect is
 *   unspecified.
 */
export function trustedCallFromProto(call: TrustedToolCall): TrustedCall {
  return {
    call: {
      turnId: call.turnId,
      toolCallId: call.toolCallId,
      name: call.toolName,
      input: jsonObjectField(call.argsJson, 'trusted_tool_call.args_json'),
      argsJson: call.argsJson,
      step: call.step,
      maxSteps: 0,
    },
    effect: toolEffectFromProto(call.effect, 'trusted_tool_call.effect'),
  };
}

/** A trusted answer to proto `TrustedToolResult`. */
export function trustedAnswerToProto(answer: TrustedAnswer): TrustedToolResult {
  return answer.known
    ? {
        toolCallId: answer.toolCallId,
        content: answer.outcome.content,
        isError: answer.outcome.isError,
        outcomeUnknownReason: '',
      }
    : {
        toolCallId: answer.toolCallId,
        content: '',
        isError: false,
        outcomeUnknownReason: answer.reason,
      };
}

/**
 * Proto `TrustedToolResult` to a trusted answer.
 *
 * @throws AppError `invalid_argument` when the tool call id is empty.
 */
export function trustedAnswerFromProto(result: TrustedToolResult): TrustedAnswer {
  if (result.toolCallId === '') throw invalidField('trusted_tool_result.tool_call_id', 'is empty');
  return result.outcomeUnknownReason === ''
    ? {
        toolCallId: result.toolCallId,
        known: true,
        outcome: { content: result.content, isError: result.isError },
      }
    : { toolCallId: result.toolCallId, known: false, reason: result.outcomeUnknownReason };
}

/** A turn outcome to its terminal stream message: `paused` for a pause, else `result`. */
export function turnOutcomeToProto(outcome: TurnOutcome, turnId: string): TerminalOutput {
  switch (outcome.kind) {
    case 'completed':
      return {
        $case: 'result',
        value: {
          outcome: {
            $case: 'complete',
            value: {
              turnId,
              text: outcome.text,
              steps: outcome.steps,
              completedAtMs: outcome.completedAtMs,
              fallback: outcome.fallback,
            },
          },
        },
      };
    case 'awaiting_approval':
      return {
        $case: 'paused',
        value: {
          request: { $case: 'approvalRequest', value: approvalRequestToProto(outcome.request) },
          rejection: outcome.rejection ?? '',
        },
      };
    case 'awaiting_answer':
      return {
        $case: 'paused',
        value: {
          request: { $case: 'questionRequest', value: questionRequestToProto(outcome.request) },
          rejection: outcome.rejection ?? '',
        },
      };
    case 'handed_off':
      return {
        $case: 'result',
        value: { outcome: { $case: 'handoff', value: handoffToProto(outcome.handoff) } },
      };
    case 'ambiguous':
      return {
        $case: 'result',
        value: {
          outcome: {
            $case: 'ambiguous',
            value: {
              turnId,
              toolCallId: outcome.toolCallId,
              reason: outcome.reason,
              detectedAtMs: outcome.detectedAtMs,
            },
          },
        },
      };
    case 'failed':
      return {
        $case: 'result',
        value: {
          outcome: {
            $case: 'failed',
            value: { code: outcome.code, message: outcome.message, retryable: outcome.retryable },
          },
        },
      };
    case 'cancelled':
      return {
        $case: 'result',
        value: { outcome: { $case: 'cancelled', value: { reason: outcome.reason } } },
      };
    default: {
      const never: never = outcome;
      return never;
    }
  }
}

/**
 * A terminal stream message to the outcome it reports (the control plane's side).
 *
 * @throws AppError `invalid_argument` when a oneof is empty or a failure names an unknown
 *   error code.
 */
export function turnOutcomeFromProto(output: TerminalOutput): TurnOutcome {
  if (output.$case === 'paused') {
    const request = output.value.request;
    const rejection = output.value.rejection === '' ? {} : { rejection: output.value.rejection };
    switch (request?.$case) {
      case 'approvalRequest':
        return {
          kind: 'awaiting_approval',
          request: approvalRequestFromProto(request.value),
          ...rejection,
        };
      case 'questionRequest':
        return {
          kind: 'awaiting_answer',
          request: questionRequestFromProto(request.value),
          ...rejection,
        };
      default:
        throw invalidField('paused', 'has no approval_request or question_request');
    }
  }
  const outcome = output.value.outcome;
  switch (outcome?.$case) {
    case 'complete':
      return {
        kind: 'completed',
        text: outcome.value.text,
        steps: outcome.value.steps,
        fallback: outcome.value.fallback,
        completedAtMs: outcome.value.completedAtMs,
      };
    case 'handoff':
      return { kind: 'handed_off', handoff: handoffFromProto(outcome.value) };
    case 'ambiguous':
      return {
        kind: 'ambiguous',
        toolCallId: outcome.value.toolCallId,
        reason: outcome.value.reason,
        detectedAtMs: outcome.value.detectedAtMs,
      };
    case 'failed': {
      const code = outcome.value.code;
      if (!isErrorCode(code))
        throw invalidField('result.failed.code', `${JSON.stringify(code)} is not an error code`);
      return {
        kind: 'failed',
        code,
        message: outcome.value.message,
        retryable: outcome.value.retryable,
      };
    }
    case 'cancelled':
      return { kind: 'cancelled', reason: outcome.value.reason };
    default:
      throw invalidField('result', 'has no outcome');
  }
}
