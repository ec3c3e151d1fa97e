import { isEventKind, type EventKind, type EventPayloads } from '../../common/event-kinds';
import type { JournalEntry } from '../../common/state-client';
import * as ev from '../../proto/gen/polychrome/events/v1/events';

/** Decode plus the proto3 JSON form of one payload message (ts-proto's `MessageFns`). */
interface JsonPayloadCodec<T> {
  decode(input: Uint8Array): T;
  toJSON(message: T): unknown;
}

/**
 * Every kind's payload message, with its JSON form: the same table as
 * common/event-kinds.ts `payloadCodecs`, which does not expose `toJSON`. The mapped type
 * makes a kind added there without a row here a compile error.
 */
const jsonCodecs: { readonly [K in EventKind]: JsonPayloadCodec<EventPayloads[K]> } = {
  message_received: ev.MessageReceived,
  ingress_directive: ev.IngressDirective,
  turn_dispatched: ev.TurnDispatched,
  model_call: ev.ModelCall,
  tool_call: ev.ToolCall,
  tool_result: ev.ToolResult,
  approval_request: ev.ApprovalRequest,
  approval_response: ev.ApprovalResponse,
  question_request: ev.QuestionRequest,
  question_response: ev.QuestionResponse,
  handoff: ev.Handoff,
  turn_complete: ev.TurnComplete,
  turn_ambiguous: ev.TurnAmbiguous,
  payment_charge: ev.PaymentCharge,
  outbound_payment_receipt: ev.OutboundPaymentReceipt,
  memory_set: ev.MemorySet,
  memory_cleared: ev.MemoryCleared,
  conversation_closed: ev.ConversationClosed,
  conversation_reopened: ev.ConversationReopened,
  key_rotated: ev.KeyRotated,
  signed_root: ev.SignedRoot,
};

function payloadJson<K extends EventKind>(kind: K, bytes: Uint8Array): unknown {
  const codec: JsonPayloadCodec<EventPayloads[K]> = jsonCodecs[kind];
  return codec.toJSON(codec.decode(bytes));
}

/** The `data` of a committed event on the stream. */
export interface EventData {
  readonly position: number;
  readonly kind: string;
  /**
   * The payload message in proto3 JSON (camelCase fields, bytes as base64, fields at their
   * default left out); `null` when the kind is unknown to this control plane or the bytes
   * do not decode, and then `payloadBase64` carries the raw bytes.
   */
  readonly payload: unknown;
  readonly payloadBase64?: string;
}

/** The stream form of a committed journal event. */
export function eventData(entry: JournalEntry): EventData {
  if (isEventKind(entry.kind)) {
    try {
      return {
        position: entry.position,
        kind: entry.kind,
        payload: payloadJson(entry.kind, entry.payload),
      };
    } catch {
      // Undecodable bytes: fall through to the raw form; a verifier still gets the event.
    }
  }
  return {
    position: entry.position,
    kind: entry.kind,
    payload: null,
    payloadBase64: Buffer.from(entry.payload).toString('base64'),
  };
}
