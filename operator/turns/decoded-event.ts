/**
 * Checking and decoding one journal event for the fold (journal-view.ts): everything that
 * can make a read fail happens here, statelessly, so the fold itself never throws.
 */
import { rosterFromJson } from './agent-roster';
import { approvalArgsSha256 } from '../../common/approval-bytes';
import { AppError } from '../../common/errors';
import {
  decodePayload,
  isEventKind,
  type EventKind,
  type EventPayloads,
} from '../../common/event-kinds';
import { memoryEventOf } from '../../common/memory';
import type { JournalEntry } from '../../common/state-journal';
import { configToolsOf } from './agent-config-tools';
import { erasedAnswer, erasedMessage, erasureOf, type ErasedRef } from './erased-entries';
import type {
  ApprovalRequest,
  Attribution,
  TurnResolved,
} from '../../proto/gen/polychrome/events/v1/events';
import { paymentEvent } from './decoded-payment';
import { malformed, requireTurnId, turnEvent } from './decoded-turn-event';
import type { DecodedEvent, RecordKind, RequestKind } from './decoded-event-types';
import type {
  RecordedStep,
  TurnDirectiveRecord,
  TurnDispatch,
  TurnTerminal,
  TypedEvent,
} from './journal-view-types';

/**
 * Checks that `entry` sits at `head`, then decodes and interprets it; `erasures` are the
 * erasure records read ahead in the same read (erased-entries.ts).
 */
export function decodeEntry(
  entry: JournalEntry,
  head: number,
  erasures?: ReadonlyMap<number, ErasedRef>,
): DecodedEvent {
  const { position, kind } = entry;
  if (position !== head) {
    throw new AppError(
      'data_loss',
      `journal position ${position} (${kind}): expected position ${head}; positions must be dense from 0 (events are missing or repeated), read the journal again from 0`,
      { details: { expected: head, found: position, kind } },
    );
  }
  // Excised: only its leaf digest is left. Repaired, it folds as a gap; erased, it keeps
  // its turn's shape (erased-entries.ts).
  if (entry.excised === true) return erasedEntry(position, erasures?.get(position));
  if (!isEventKind(kind)) {
    throw new AppError(
      'data_loss',
      `journal position ${position}: unknown event kind ${JSON.stringify(kind)}; this reader cannot interpret the journal (written by a newer version?)`,
      { details: { position, kind } },
    );
  }
  return interpret(position, {
    kind,
    payload: decode(position, kind, entry.payload),
  } as TypedEvent);
}

/** A checked event folded from its typed payload (checks that can throw happen here too). */
export function interpret(position: number, event: TypedEvent): DecodedEvent {
  switch (event.kind) {
    case 'message_received': {
      const message = event.payload;
      requireTurnId(position, event.kind, message.turnId);
      return { type: 'message', position, message };
    }
    case 'signed_root': {
      const root = event.payload;
      return {
        type: 'root',
        root: { position, leafCount: root.leafCount, root: hex(root.root), keyId: root.keyId },
      };
    }
    case 'agent_config':
    case 'agent_roster':
    case 'summary':
      return contextEvent(position, event);
    case 'ingress_directive':
    case 'turn_dispatched':
    case 'model_call':
    case 'tool_call':
    case 'tool_result':
    case 'agent_handoff':
    case 'turn_complete':
    case 'turn_ambiguous':
    case 'handoff':
      return recordEvent(position, event);
    case 'turn_resolved':
      return resolvedEvent(position, event.payload);
    case 'approval_request':
    case 'approval_response':
    case 'question_request':
    case 'question_response':
    case 'request_cancelled':
    case 'approval_expired':
      return requestEvent(position, event);
    case 'rollback_accepted': {
      const { checkpointHead: head, checkpointRoot } = event.payload;
      return { type: 'rollback_accepted', lost: { head, root: hex(checkpointRoot) } };
    }
    case 'excision':
      return erasureEvent(event.payload);
    case 'memory_set':
    case 'memory_cleared':
      return { type: 'memory', event: memoryEventOf(position, event) };
    case 'payment_charge':
    case 'outbound_payment_receipt':
    case 'payment_sent':
    case 'payment_policy':
      return paymentEvent(position, event);
    case 'conversation_closed':
    case 'conversation_reopened':
    case 'key_rotated':
      // Not part of the view (decoded all the same, so that corruption fails the read).
      return { type: 'ignored' };
  }
}

/**
 * What a turn is given besides its own events: the newest agent configuration's digest, or a
 * `summary` (its text and what it covers).
 */
function contextEvent(
  position: number,
  event: Extract<TypedEvent, { readonly kind: 'agent_config' | 'agent_roster' | 'summary' }>,
): DecodedEvent {
  if (event.kind === 'agent_roster') {
    const { rosterJson, sha256 } = event.payload;
    return { type: 'roster', roster: { position, ...rosterFromJson(rosterJson, hex(sha256)) } };
  }
  if (event.kind === 'agent_config') {
    const { agent, toolNames } = configToolsOf(event.payload.configJson);
    return {
      type: 'config',
      config: { position, sha256: hex(event.payload.sha256), agent, toolNames },
    };
  }
  const { fromPosition, toPosition, previousPosition, text } = event.payload;
  return {
    type: 'summary',
    summary: { position, fromPosition, toPosition, previousPosition, text },
  };
}

/** A repair's `excision` is not part of the view; an erasure's amends the turn it names. */
function erasureEvent(payload: EventPayloads['excision']): DecodedEvent {
  const erased = erasureOf(payload);
  return erased === undefined ? { type: 'ignored' } : { type: 'erasure', erased };
}

/** An excised entry: a gap, unless an erasure record says it opened or settled a turn. */
function erasedEntry(position: number, erased: ErasedRef | undefined): DecodedEvent {
  if (erased === undefined || erased.turnId === '') return { type: 'ignored' };
  if (erased.kind === 'message_received') {
    return { type: 'message', position, message: erasedMessage(erased.turnId), erased: true };
  }
  if (erased.kind === 'turn_complete') {
    return interpret(position, { kind: 'turn_complete', payload: erasedAnswer(erased.turnId) });
  }
  return { type: 'ignored' };
}

/** An admin's `turn_resolved`: the fold applies it only to a quarantined turn (lazy-view.ts), whose quarantine ends. */
function resolvedEvent(position: number, response: TurnResolved): DecodedEvent {
  return turnEvent(position, 'turn_resolved', response.turnId, response, (turn) => ({
    ...turn,
    terminal: undefined,
    resolutions: [...turn.resolutions, { position, response }],
  }));
}

/** A turn's directive, dispatch, step or terminal marker. */
function recordEvent(
  position: number,
  event: Extract<TypedEvent, { readonly kind: RecordKind }>,
): DecodedEvent {
  switch (event.kind) {
    case 'ingress_directive': {
      const d = event.payload;
      const directive: TurnDirectiveRecord = {
        position,
        maxSteps: d.maxSteps,
        requiredApprover: d.requiredApprover,
      };
      return turnEvent(position, event.kind, d.turnId, d, (turn) => ({ ...turn, directive }));
    }
    case 'turn_dispatched': {
      const d = event.payload;
      const dispatch: TurnDispatch = {
        attempt: d.attempt,
        position,
        leaseHolder: d.leaseHolder,
        fencingToken: d.fencingToken,
        attribution: recordedAttribution(d.attribution),
        dispatchedAtMs: d.dispatchedAtMs,
        historyFrom: d.historyFrom,
        summaryPosition: d.summaryPosition,
        agentRosterSha256: hex(d.agentRosterSha256),
      };
      return turnEvent(position, event.kind, d.turnId, d, (turn) => ({
        ...turn,
        dispatches: [...turn.dispatches, dispatch],
      }));
    }
    case 'model_call':
    case 'tool_call':
    case 'tool_result':
    case 'agent_handoff':
      return stepEvent(event.payload.turnId, { ...event, position });
    case 'turn_complete': {
      const payload = event.payload;
      return terminalEvent(payload.turnId, { kind: event.kind, position, payload });
    }
    case 'turn_ambiguous': {
      const payload = event.payload;
      return terminalEvent(payload.turnId, { kind: event.kind, position, payload });
    }
    case 'handoff': {
      const payload = event.payload;
      return terminalEvent(payload.turnId, { kind: event.kind, position, payload });
    }
  }
}

/** An approval or question request, its answer, its cancel or its expiry. */
function requestEvent(
  position: number,
  event: Extract<TypedEvent, { readonly kind: RequestKind }>,
): DecodedEvent {
  switch (event.kind) {
    case 'approval_request': {
      const request = event.payload;
      checkApprovalRequest(position, request);
      return turnEvent(position, event.kind, request.turnId, request, (turn) => ({
        ...turn,
        approvalRequests: [...turn.approvalRequests, { position, request }],
      }));
    }
    case 'approval_response': {
      const response = event.payload;
      return turnEvent(position, event.kind, response.turnId, response, (turn) => ({
        ...turn,
        approvalResponses: [...turn.approvalResponses, { position, response }],
      }));
    }
    case 'question_request': {
      const request = event.payload;
      return turnEvent(position, event.kind, request.turnId, request, (turn) => ({
        ...turn,
        questionRequests: [...turn.questionRequests, { position, request }],
      }));
    }
    case 'question_response': {
      const response = event.payload;
      return turnEvent(position, event.kind, response.turnId, response, (turn) => ({
        ...turn,
        questionResponses: [...turn.questionResponses, { position, response }],
      }));
    }
    case 'request_cancelled': {
      const response = event.payload;
      return turnEvent(position, event.kind, response.turnId, response, (turn) => ({
        ...turn,
        cancellations: [...turn.cancellations, { position, response }],
      }));
    }
    case 'approval_expired': {
      const response = event.payload;
      return turnEvent(position, event.kind, response.turnId, response, (turn) => ({
        ...turn,
        expiries: [...turn.expiries, { position, response }],
      }));
    }
  }
}

function stepEvent(turnId: string, step: RecordedStep): DecodedEvent {
  return turnEvent(step.position, step.kind, turnId, step.payload, (turn) => ({
    ...turn,
    steps: [...turn.steps, step],
  }));
}

function terminalEvent(turnId: string, terminal: TurnTerminal): DecodedEvent {
  return turnEvent(terminal.position, terminal.kind, turnId, terminal.payload, (turn) => ({
    ...turn,
    terminal,
  }));
}

/**
 * A person approves what the card shows and signs the recorded hash, so the two must
 * agree: args_json must be JSON and args_sha256 the SHA-256 of its UTF-8 bytes.
 */
function checkApprovalRequest(position: number, request: ApprovalRequest): void {
  const kind = 'approval_request';
  try {
    JSON.parse(request.argsJson);
  } catch (cause) {
    throw malformed(position, kind, `args_json of request ${request.requestId} is not JSON`, cause);
  }
  if (hex(request.argsSha256) !== hex(approvalArgsSha256(request.argsJson))) {
    throw malformed(
      position,
      kind,
      `args_sha256 of request ${request.requestId} is not the SHA-256 of its args_json`,
    );
  }
}

function decode<K extends EventKind>(
  position: number,
  kind: K,
  bytes: Uint8Array,
): EventPayloads[K] {
  try {
    return decodePayload(kind, bytes);
  } catch (cause) {
    throw malformed(position, kind, 'the payload does not decode', cause);
  }
}

/** Lowercase hex of `bytes`. */
export function hex(bytes: Uint8Array): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('hex');
}

/** A recorded attribution with every field set (absent as empty). */
export function recordedAttribution(attribution: Attribution | undefined): Attribution {
  return {
    caller: attribution?.caller ?? '',
    participants: [...(attribution?.participants ?? [])],
    persona: attribution?.persona ?? '',
    session: attribution?.session ?? '',
  };
}
