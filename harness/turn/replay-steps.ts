import { canonicalJson, isJsonObject } from '../../common/canonical-json';
import { AppError } from '../../common/errors';
import {
  encodePayload,
  payloadCodecs,
  type EventKind,
  type EventPayloads,
} from '../../common/event-kinds';
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

/** A step as the event it is journaled as: its kind, its payload bytes and its proto3 JSON. */
export interface StepEvent {
  readonly kind: EventKind;
  payload(): Uint8Array;
  json(): unknown;
}

/** A step the machine commits as the event it is journaled as. */
export function stepEvent(step: TurnStep): StepEvent {
  const proto = turnStepToProto(step, 0).step;
  switch (proto?.$case) {
    case 'modelCall':
      return event('model_call', proto.value);
    case 'toolCall':
      return event('tool_call', proto.value);
    case 'toolResult':
      return event('tool_result', proto.value);
    case 'agentConfig':
      return event('agent_config', proto.value);
    case 'agentHandoff':
      return event('agent_handoff', proto.value);
    case undefined:
      throw new AppError('internal', 'replay: the machine committed an empty step');
  }
}

function event<K extends EventKind>(kind: K, message: EventPayloads[K]): StepEvent {
  return {
    kind,
    payload: () => encodePayload(kind, message),
    json: () => payloadCodecs[kind].toJSON(message),
  };
}

/** A step the machine commits as the event it would be, compared as canonical JSON. */
export function stepJson(step: TurnStep): { kind: EventKind; json: string } {
  const event = stepEvent(step);
  return { kind: event.kind, json: canonicalJson(event.json()) };
}
