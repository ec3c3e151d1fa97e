import * as ev from '../proto/gen/polychrome/events/v1/events';

/**
 * The journal's event kinds (docs/design.md, "One turn, end to end") and the protobuf message
 * each payload decodes as. The kind string is part of the leaf digest: never rename one.
 */
export const EventKind = {
  MessageReceived: 'message_received',
  IngressDirective: 'ingress_directive',
  TurnDispatched: 'turn_dispatched',
  ModelCall: 'model_call',
  ToolCall: 'tool_call',
  ToolResult: 'tool_result',
  ApprovalRequest: 'approval_request',
  ApprovalResponse: 'approval_response',
  QuestionRequest: 'question_request',
  QuestionResponse: 'question_response',
  RequestCancelled: 'request_cancelled',
  ApprovalExpired: 'approval_expired',
  Handoff: 'handoff',
  TurnComplete: 'turn_complete',
  TurnAmbiguous: 'turn_ambiguous',
  /** An admin settled a quarantined turn (docs/turns.md, "Resolving a quarantined turn"). */
  TurnResolved: 'turn_resolved',
  PaymentCharge: 'payment_charge',
  OutboundPaymentReceipt: 'outbound_payment_receipt',
  /** An approved payment is about to be sent (docs/payments.md, "Exactly once"). */
  PaymentSent: 'payment_sent',
  /** An admin linked a wallet and its spend limits, or unlinked it (docs/payments.md). */
  PaymentPolicy: 'payment_policy',
  /** The control plane's summary of earlier turns (docs/turns.md, "Summaries"). */
  Summary: 'summary',
  MemorySet: 'memory_set',
  MemoryCleared: 'memory_cleared',
  ConversationClosed: 'conversation_closed',
  ConversationReopened: 'conversation_reopened',
  KeyRotated: 'key_rotated',
  SignedRoot: 'signed_root',
  AgentConfig: 'agent_config',
  /** The control plane's agents for a turn, from the entry Agent (docs/turns.md, "Agents"). */
  AgentRoster: 'agent_roster',
  /** A step: the turn moved to another agent and goes on (docs/turns.md, "Handoffs"). */
  AgentHandoff: 'agent_handoff',
  /** Written by the state plane's repair only (docs/journal-format.md, "Excision"). */
  Excision: 'excision',
  /** An admin accepted a rolled-back journal (docs/turns.md, "A rolled-back journal"). */
  RollbackAccepted: 'rollback_accepted',
} as const;
export type EventKind = (typeof EventKind)[keyof typeof EventKind];

/** Encode and decode of one payload message (the subset of ts-proto's MessageFns we use). */
export interface PayloadCodec<T> {
  encode(message: T): { finish(): Uint8Array };
  decode(input: Uint8Array): T;
  fromPartial(object: Partial<T>): T;
  /** The proto3 JSON form (camelCase fields, bytes as base64, defaults left out). */
  toJSON(message: T): unknown;
}

/** Payload message type for each kind. */
export interface EventPayloads {
  message_received: ev.MessageReceived;
  ingress_directive: ev.IngressDirective;
  turn_dispatched: ev.TurnDispatched;
  model_call: ev.ModelCall;
  tool_call: ev.ToolCall;
  tool_result: ev.ToolResult;
  approval_request: ev.ApprovalRequest;
  approval_response: ev.ApprovalResponse;
  question_request: ev.QuestionRequest;
  question_response: ev.QuestionResponse;
  request_cancelled: ev.RequestCancelled;
  approval_expired: ev.ApprovalExpired;
  handoff: ev.Handoff;
  turn_complete: ev.TurnComplete;
  turn_ambiguous: ev.TurnAmbiguous;
  turn_resolved: ev.TurnResolved;
  payment_charge: ev.PaymentCharge;
  outbound_payment_receipt: ev.OutboundPaymentReceipt;
  payment_sent: ev.PaymentSent;
  payment_policy: ev.PaymentPolicy;
  summary: ev.Summary;
  memory_set: ev.MemorySet;
  memory_cleared: ev.MemoryCleared;
  conversation_closed: ev.ConversationClosed;
  conversation_reopened: ev.ConversationReopened;
  key_rotated: ev.KeyRotated;
  signed_root: ev.SignedRoot;
  agent_config: ev.AgentConfig;
  agent_roster: ev.AgentRoster;
  agent_handoff: ev.AgentHandoff;
  excision: ev.Excision;
  rollback_accepted: ev.RollbackAccepted;
}

export const payloadCodecs: { readonly [K in EventKind]: PayloadCodec<EventPayloads[K]> } = {
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
  request_cancelled: ev.RequestCancelled,
  approval_expired: ev.ApprovalExpired,
  handoff: ev.Handoff,
  turn_complete: ev.TurnComplete,
  turn_ambiguous: ev.TurnAmbiguous,
  turn_resolved: ev.TurnResolved,
  payment_charge: ev.PaymentCharge,
  outbound_payment_receipt: ev.OutboundPaymentReceipt,
  payment_sent: ev.PaymentSent,
  payment_policy: ev.PaymentPolicy,
  summary: ev.Summary,
  memory_set: ev.MemorySet,
  memory_cleared: ev.MemoryCleared,
  conversation_closed: ev.ConversationClosed,
  conversation_reopened: ev.ConversationReopened,
  key_rotated: ev.KeyRotated,
  signed_root: ev.SignedRoot,
  agent_config: ev.AgentConfig,
  agent_roster: ev.AgentRoster,
  agent_handoff: ev.AgentHandoff,
  excision: ev.Excision,
  rollback_accepted: ev.RollbackAccepted,
};

const kinds = new Set<string>(Object.values(EventKind));

/** True when `value` is a known event kind. */
export function isEventKind(value: unknown): value is EventKind {
  return typeof value === 'string' && kinds.has(value);
}

/** Encodes a payload for `kind`. */
export function encodePayload<K extends EventKind>(kind: K, payload: EventPayloads[K]): Uint8Array {
  return payloadCodecs[kind].encode(payload).finish();
}

/** Decodes the payload bytes of an event of `kind`. @throws when the bytes are not valid protobuf. */
export function decodePayload<K extends EventKind>(kind: K, bytes: Uint8Array): EventPayloads[K] {
  return payloadCodecs[kind].decode(bytes);
}
