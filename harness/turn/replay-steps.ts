import { canonicalJson, isJsonObject } from '../../common/canonical-json';
import { AppError } from '../../common/errors';
import { payloadCodecs, type EventKind } from '../../common/event-kinds';
import type { Decoded } from './journal-turns';
import type { ModelResponse, OutputBlock } from '../../common/model/model-port';
import {
  agentHandoffFromProto,
  modelCallFromProto,
  toolCallFromProto,
  toolResultFromProto,
  turnStepToProto,
} from './step-codec';
import type { ModelCallRecord, TurnStep } from './turn-records';

/**
 * Recorded steps and the machine's steps in each other's terms, for replay: a recorded
 * event as the machine takes it back (a step, a model response), and a step the machine
 * commits as the event it would be (compared as canonical JSON).
 */

/** A recorded model call, tool call, tool result or handoff as the machine takes it back. */
export function stepOf(e: Decoded): TurnStep | undefined {
  switch (e.kind) {
    case 'model_call':
      return { kind: 'model_call', record: modelCallFromProto(e.payload) };
    case 'tool_call':
      return { kind: 'tool_call', record: toolCallFromProto(e.payload) };
    case 'tool_result':
      return { kind: 'tool_result', record: toolResultFromProto(e.payload) };
    case 'agent_handoff':
      return { kind: 'agent_handoff', record: agentHandoffFromProto(e.payload) };
    default:
      return undefined;
  }
}

export function responseOf(record: ModelCallRecord): ModelResponse {
  const content: OutputBlock[] = record.content.map((block): OutputBlock => {
    if (block.type === 'text') return block;
    let input: unknown;
    try {
      input = JSON.parse(block.argsJson);
    } catch {
      input = undefined;
    }
    // Arguments that are not an object cannot have been recorded by the machine; the
    // model_call comparison that follows reports the difference.
    return {
      type: 'tool_use',
      id: block.toolCallId,
      name: block.name,
      input: isJsonObject(input) ? input : {},
    };
  });
  return { model: record.model, content, stopReason: record.stopReason, usage: record.usage };
}

export function stepJson(step: TurnStep): { kind: EventKind; json: string } {
  const proto = turnStepToProto(step, 0).step;
  switch (proto?.$case) {
    case 'modelCall':
      return {
        kind: 'model_call',
        json: canonicalJson(payloadCodecs.model_call.toJSON(proto.value)),
      };
    case 'toolCall':
      return {
        kind: 'tool_call',
        json: canonicalJson(payloadCodecs.tool_call.toJSON(proto.value)),
      };
    case 'toolResult':
      return {
        kind: 'tool_result',
        json: canonicalJson(payloadCodecs.tool_result.toJSON(proto.value)),
      };
    case 'agentConfig':
      return {
        kind: 'agent_config',
        json: canonicalJson(payloadCodecs.agent_config.toJSON(proto.value)),
      };
    case 'agentHandoff':
      return {
        kind: 'agent_handoff',
        json: canonicalJson(payloadCodecs.agent_handoff.toJSON(proto.value)),
      };
    case undefined:
      throw new AppError('internal', 'replay: the machine committed an empty step');
  }
}
