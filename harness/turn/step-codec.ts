import {
  ToolEffect as ProtoToolEffect,
  type AgentConfig,
  type AgentHandoff,
  type ContentBlock as ProtoContentBlock,
  type ModelCall,
  type ToolCall,
  type ToolResult,
} from '../../proto/gen/polychrome/events/v1/events';
import type { Step } from '../../proto/gen/polychrome/harness/v1/harness';
import { StopReason, type Usage } from '../../common/model/model-port';
import { invalidField, plainBytes, wireBytes } from './proto-fields';
import type {
  AgentConfigRecord,
  AgentHandoffRecord,
  ModelCallRecord,
  RecordedBlock,
  ToolCallRecord,
  ToolEffect,
  ToolResultRecord,
  TurnStep,
} from './turn-records';

/**
 * The steps a turn commits (`model_call`, `tool_call`, `tool_result`, `agent_config`,
 * `agent_handoff`)
 * between their events.v1 / harness.v1 messages and the turn loop's records: one
 * `toProto`/`fromProto` pair per message (STYLE.md §1). The harness server sends them to
 * the control plane with these; replay and what-if read them back from the journal.
 */

const stopReasons = new Set<string>(Object.values(StopReason));

function isStopReason(value: string): value is StopReason {
  return stopReasons.has(value);
}

/** Domain tool effect to proto. */
export function toolEffectToProto(effect: ToolEffect): ProtoToolEffect {
  return effect === 'pure'
    ? ProtoToolEffect.TOOL_EFFECT_PURE
    : ProtoToolEffect.TOOL_EFFECT_SIDE_EFFECT;
}

/**
 * Proto tool effect to domain.
 *
 * @throws AppError `invalid_argument` for UNSPECIFIED or an unknown value: guessing "pure"
 *   could re-run a side effect.
 */
export function toolEffectFromProto(effect: ProtoToolEffect, field: string): ToolEffect {
  switch (effect) {
    case ProtoToolEffect.TOOL_EFFECT_PURE:
      return 'pure';
    case ProtoToolEffect.TOOL_EFFECT_SIDE_EFFECT:
      return 'side_effect';
    default:
      throw invalidField(field, 'tool effect must be PURE or SIDE_EFFECT');
  }
}

/** A recorded block to proto `ContentBlock`. */
export function recordedBlockToProto(block: RecordedBlock): ProtoContentBlock {
  return block.type === 'text'
    ? { block: { $case: 'text', value: block.text } }
    : {
        block: {
          $case: 'toolUse',
          value: { toolCallId: block.toolCallId, name: block.name, argsJson: block.argsJson },
        },
      };
}

/**
 * Proto `ContentBlock` to a recorded block.
 *
 * @throws AppError `invalid_argument` when the oneof is empty.
 */
export function recordedBlockFromProto(block: ProtoContentBlock, field: string): RecordedBlock {
  const value = block.block;
  switch (value?.$case) {
    case 'text':
      return { type: 'text', text: value.value };
    case 'toolUse':
      return {
        type: 'tool_use',
        toolCallId: value.value.toolCallId,
        name: value.value.name,
        argsJson: value.value.argsJson,
      };
    default:
      throw invalidField(field, 'content block has neither text nor tool_use');
  }
}

/** A model call record to proto `ModelCall`. */
export function modelCallToProto(record: ModelCallRecord): ModelCall {
  return {
    turnId: record.turnId,
    step: record.step,
    model: record.model,
    content: record.content.map(recordedBlockToProto),
    stopReason: record.stopReason,
    usage: usageToProto(record.usage),
    startedAtMs: record.startedAtMs,
    finishedAtMs: record.finishedAtMs,
    closing: record.closing,
    configSha256: wireBytes(record.configSha256 ?? new Uint8Array()),
    requestSha256: wireBytes(record.requestSha256 ?? new Uint8Array()),
    agent: record.agent ?? '',
    thread: record.thread ?? '',
    depth: record.depth ?? 0,
  };
}

/** An agent configuration record to proto `AgentConfig`. */
export function agentConfigToProto(record: AgentConfigRecord): AgentConfig {
  return { turnId: record.turnId, sha256: wireBytes(record.sha256), configJson: record.configJson };
}

/** Proto `AgentConfig` to a record (its digest is checked by whoever relies on it). */
export function agentConfigFromProto(config: AgentConfig): AgentConfigRecord {
  return {
    turnId: config.turnId,
    sha256: plainBytes(config.sha256),
    configJson: config.configJson,
  };
}

/**
 * Proto `ModelCall` to a record. An unknown stop reason becomes `other`, as adapters map
 * vendor reasons.
 *
 * @throws AppError `invalid_argument` for an empty content block.
 */
export function modelCallFromProto(call: ModelCall, field = 'model_call'): ModelCallRecord {
  return {
    turnId: call.turnId,
    step: call.step,
    model: call.model,
    content: call.content.map((block, i) =>
      recordedBlockFromProto(block, `${field}.content[${i}]`),
    ),
    stopReason: isStopReason(call.stopReason) ? call.stopReason : StopReason.Other,
    usage: usageFromProto(call.usage),
    startedAtMs: call.startedAtMs,
    finishedAtMs: call.finishedAtMs,
    closing: call.closing,
    // Empty in journals written before recording (docs/replay.md): unset.
    ...(call.configSha256.length === 0 ? {} : { configSha256: plainBytes(call.configSha256) }),
    ...(call.requestSha256.length === 0 ? {} : { requestSha256: plainBytes(call.requestSha256) }),
    ...(call.agent === '' ? {} : { agent: call.agent }),
    ...lineageFromProto(call),
  };
}

/** Domain usage to proto. */
export function usageToProto(usage: Usage): { inputTokens: number; outputTokens: number } {
  return { inputTokens: usage.inputTokens, outputTokens: usage.outputTokens };
}

/** Proto usage to domain; absent counts as zero tokens. */
export function usageFromProto(
  usage: { inputTokens: number; outputTokens: number } | undefined,
): Usage {
  return { inputTokens: usage?.inputTokens ?? 0, outputTokens: usage?.outputTokens ?? 0 };
}

/** A tool call record to proto `ToolCall`. */
export function toolCallToProto(record: ToolCallRecord): ToolCall {
  return {
    turnId: record.turnId,
    step: record.step,
    toolCallId: record.toolCallId,
    toolName: record.toolName,
    argsJson: record.argsJson,
    effect: toolEffectToProto(record.effect),
    approvalRequestId: record.approvalRequestId,
    agent: record.agent ?? '',
    thread: record.thread ?? '',
    depth: record.depth ?? 0,
  };
}

/**
 * Proto `ToolCall` to a record.
 *
 * @throws AppError `invalid_argument` when the effect is unspecified.
 */
export function toolCallFromProto(call: ToolCall, field = 'tool_call'): ToolCallRecord {
  return {
    turnId: call.turnId,
    step: call.step,
    toolCallId: call.toolCallId,
    toolName: call.toolName,
    argsJson: call.argsJson,
    effect: toolEffectFromProto(call.effect, `${field}.effect`),
    approvalRequestId: call.approvalRequestId,
    ...(call.agent === '' ? {} : { agent: call.agent }),
    ...lineageFromProto(call),
  };
}

/** An agent handoff record to proto `AgentHandoff`. */
export function agentHandoffToProto(record: AgentHandoffRecord): AgentHandoff {
  return { ...record };
}

/** Proto `AgentHandoff` to a record. */
export function agentHandoffFromProto(handoff: AgentHandoff): AgentHandoffRecord {
  return {
    turnId: handoff.turnId,
    step: handoff.step,
    toolCallId: handoff.toolCallId,
    fromAgent: handoff.fromAgent,
    toAgent: handoff.toAgent,
    reason: handoff.reason,
  };
}

/** A tool result record to proto `ToolResult`. */
export function toolResultToProto(record: ToolResultRecord): ToolResult {
  return { ...record, thread: record.thread ?? '', delegate: record.delegate ?? '' };
}

/** Proto `ToolResult` to a record. */
export function toolResultFromProto(result: ToolResult): ToolResultRecord {
  return {
    turnId: result.turnId,
    toolCallId: result.toolCallId,
    content: result.content,
    isError: result.isError,
    denied: result.denied,
    ...(result.thread === '' ? {} : { thread: result.thread }),
    ...(result.delegate === '' ? {} : { delegate: result.delegate }),
  };
}

/** A step's delegation lineage: nothing at the top (docs/turns.md, "Delegation"). */
function lineageFromProto(step: { readonly thread: string; readonly depth: number }): {
  thread?: string;
  depth?: number;
} {
  return step.thread === '' ? {} : { thread: step.thread, depth: step.depth };
}

/**
 * A step to proto `Step`, numbered `sequence` within the call (0 in `start`), to be acked
 * before the turn goes on (`commitWithResult` is set by the caller that carries it).
 */
export function turnStepToProto(step: TurnStep, sequence: number): Step {
  const commitWithResult = false;
  switch (step.kind) {
    case 'model_call':
      return {
        sequence,
        step: { $case: 'modelCall', value: modelCallToProto(step.record) },
        commitWithResult,
      };
    case 'tool_call':
      return {
        sequence,
        step: { $case: 'toolCall', value: toolCallToProto(step.record) },
        commitWithResult,
      };
    case 'tool_result':
      return {
        sequence,
        step: { $case: 'toolResult', value: toolResultToProto(step.record) },
        commitWithResult,
      };
    case 'agent_config':
      return {
        sequence,
        step: { $case: 'agentConfig', value: agentConfigToProto(step.record) },
        commitWithResult,
      };
    case 'agent_handoff':
      return {
        sequence,
        step: { $case: 'agentHandoff', value: agentHandoffToProto(step.record) },
        commitWithResult,
      };
    default: {
      const never: never = step;
      return never;
    }
  }
}

/**
 * Proto `Step` to a committed step (the sequence number is dropped).
 *
 * @throws AppError `invalid_argument` when the oneof is empty or a record is malformed.
 */
export function turnStepFromProto(step: Step, field = 'step'): TurnStep {
  const value = step.step;
  switch (value?.$case) {
    case 'modelCall':
      return { kind: 'model_call', record: modelCallFromProto(value.value, `${field}.model_call`) };
    case 'toolCall':
      return { kind: 'tool_call', record: toolCallFromProto(value.value, `${field}.tool_call`) };
    case 'toolResult':
      return { kind: 'tool_result', record: toolResultFromProto(value.value) };
    case 'agentConfig':
      return { kind: 'agent_config', record: agentConfigFromProto(value.value) };
    case 'agentHandoff':
      return { kind: 'agent_handoff', record: agentHandoffFromProto(value.value) };
    default:
      throw invalidField(
        field,
        'step has no model_call, tool_call, tool_result, agent_config or agent_handoff',
      );
  }
}
