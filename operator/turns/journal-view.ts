/**
 * A conversation's journal folded into what the turn coordinator and the API need: its
 * turns, each with its input, dispatches, committed steps, requests, answers and outcome.
 * Pure: no I/O, no clock.
 *
 * `foldJournal` reads a journal from position 0; `applyEntry` / `applyEntries` extend a
 * cached view with newly committed events. Both check and decode every event when called
 * (so they throw there) but build the turn records only when the new view is first read,
 * from the nearest view already read: extending a view event by event costs O(1) per
 * event, and reading a view costs O(turns) once. A view is never modified by extending it.
 *
 * Reading rules:
 * - Positions are dense from 0: each entry must sit at the head of the view it extends.
 * - Every kind is decoded with its codec (common/event-kinds.ts), even kinds the view does
 *   not keep (memory, payments, close/reopen, key rotation), so a corrupt or unknown event
 *   fails the read (`data_loss`, naming position and kind) instead of being skipped. A
 *   turn event must name its turn; an approval request's args_json must be JSON whose
 *   SHA-256 is its args_sha256 (a person approves what the card shows, and signs the hash).
 * - A turn is opened by its `message_received`; turns are listed in that event's order.
 *   The first message of an idempotency key keeps the key; a later one never replaces it.
 *   That, and events naming a turn no message opened, are kept readable as
 *   {@link JournalAnomaly}s rather than failing the read.
 * - `model_call`, `tool_call` and `tool_result` are the turn's steps, in journal order over
 *   all attempts: a resumed attempt reuses the earlier steps and appends only new ones.
 *
 * The parts: decoded-event.ts (checking and decoding each event, where a read can fail),
 * lazy-view.ts (the fold, built on first read, and its anomalies), turn-state.ts (where a
 * turn stands, by common/turn-standing.ts, and what it waits on), turn-projections.ts (what
 * the harness and the API are given). This file is the one import of them.
 */
import type { EventKind, EventPayloads } from '../../common/event-kinds';
import type { JournalEntry } from '../../common/state-journal';
import type { StandingFold } from '../../common/turn-standing';
import type {
  ApprovalExpired,
  ApprovalRequest,
  ApprovalResponse,
  Attribution,
  Handoff,
  ModelCall,
  QuestionRequest,
  QuestionResponse,
  RequestCancelled,
  ToolCall,
  ToolResult,
  TurnAmbiguous,
  TurnComplete,
  TurnResolved,
} from '../../proto/gen/polychrome/events/v1/events';
import { decodeEntry, interpret, type DecodedEvent } from './decoded-event';
import { emptyState, LazyView, stateOf, type JournalAnomaly } from './lazy-view';

export { AnomalyProblem, type JournalAnomaly } from './lazy-view';
export {
  nextAttempt,
  oldestOrphan,
  pendingRequest,
  pendingTurn,
  turnForKey,
  turnState,
  TurnState,
  type PendingRequest,
} from './turn-state';
export {
  approvalAnswers,
  approvalCardOf,
  committedHistory,
  conversationSummary,
  questionAnswers,
  recordedSteps,
  transcriptTurns,
  turnReplyOf,
} from './turn-projections';

/** Where the last `signed_root` is and what it says. */
export interface SignedRootRef {
  readonly position: number;
  /** Number of leaves the root covers: positions [0, leafCount). */
  readonly leafCount: number;
  /** The MMR root, lowercase hex. */
  readonly root: string;
  readonly keyId: string;
}

/** A turn's `ingress_directive` (the first one; later ones are anomalies). */
export interface TurnDirectiveRecord {
  readonly position: number;
  /** Lower step budget; 0 means none. */
  readonly maxSteps: number;
  /** Identity that must answer approvals; empty means any admin. */
  readonly requiredApprover: string;
}

/** One `turn_dispatched` of a turn. */
export interface TurnDispatch {
  readonly attempt: number;
  readonly position: number;
  readonly leaseHolder: string;
  readonly fencingToken: number;
  readonly attribution: Attribution;
  readonly dispatchedAtMs: number;
}

/** A committed step of a turn (any attempt). */
export type RecordedStep =
  | { readonly kind: 'model_call'; readonly position: number; readonly payload: ModelCall }
  | { readonly kind: 'tool_call'; readonly position: number; readonly payload: ToolCall }
  | { readonly kind: 'tool_result'; readonly position: number; readonly payload: ToolResult };

/** A request event and where it sits. */
export interface RecordedRequest<T> {
  readonly position: number;
  readonly request: T;
}

/** An answer event and where it sits. */
export interface RecordedResponse<T> {
  readonly position: number;
  readonly response: T;
}

/** The marker that settled a turn. */
export type TurnTerminal =
  | { readonly kind: 'turn_complete'; readonly position: number; readonly payload: TurnComplete }
  | { readonly kind: 'turn_ambiguous'; readonly position: number; readonly payload: TurnAmbiguous }
  | { readonly kind: 'handoff'; readonly position: number; readonly payload: Handoff };

/** Everything the journal says about one turn. Records are immutable: a new event makes a new one. */
export interface TurnView {
  readonly turnId: string;
  readonly idempotencyKey: string;
  readonly text: string;
  readonly attribution: Attribution;
  readonly receivedAtMs: number;
  /** Position of its `message_received` (the API's `requestedAt`). */
  readonly messagePosition: number;
  readonly directive: TurnDirectiveRecord | undefined;
  /** In journal order. */
  readonly dispatches: readonly TurnDispatch[];
  /** `model_call` / `tool_call` / `tool_result` in journal order, over all attempts. */
  readonly steps: readonly RecordedStep[];
  readonly approvalRequests: readonly RecordedRequest<ApprovalRequest>[];
  readonly approvalResponses: readonly RecordedResponse<ApprovalResponse>[];
  readonly questionRequests: readonly RecordedRequest<QuestionRequest>[];
  readonly questionResponses: readonly RecordedResponse<QuestionResponse>[];
  /** `request_cancelled` (an admin cancelled a pending request; a `turn_complete` follows). */
  readonly cancellations: readonly RecordedResponse<RequestCancelled>[];
  /** `approval_expired` (the signed denial it comes with is in `approvalResponses`). */
  readonly expiries: readonly RecordedResponse<ApprovalExpired>[];
  /**
   * The first terminal marker, if any; after a `turn_resolved`, the first one after it
   * (a resolution ends the quarantine: the turn is an orphan again).
   */
  readonly terminal: TurnTerminal | undefined;
  /** `turn_resolved`: an admin settled a quarantine of this turn, in journal order. */
  readonly resolutions: readonly RecordedResponse<TurnResolved>[];
  /**
   * Where the turn stands by the one rule (common/turn-standing.ts), folded over the events
   * the view applied to it; turn-state.ts reads it.
   */
  readonly standingFold: StandingFold;
}

/** The fold of events [0, head) of one conversation's journal. */
export interface JournalView {
  /** The next position: events [0, head) were applied. */
  readonly head: number;
  readonly lastSignedRoot: SignedRootRef | undefined;
  /** In order of their `message_received` position. */
  readonly turns: readonly TurnView[];
  /** Idempotency key to turn id; the first message of a key wins. */
  readonly turnIdsByKey: ReadonlyMap<string, string>;
  readonly turnsById: ReadonlyMap<string, TurnView>;
  /** In journal order. */
  readonly anomalies: readonly JournalAnomaly[];
  /** The newest `agent_config` (docs/replay.md); absent when the journal has none. */
  readonly newestAgentConfig?: AgentConfigRef;
  /** The checkpoints of every `rollback_accepted`, in journal order. */
  readonly acceptedLosses: readonly LostCheckpoint[];
}

/** A checkpoint an admin accepted as lost (a `rollback_accepted`). */
export interface LostCheckpoint {
  /** `status.journal.head` as it was. */
  readonly head: number;
  /** The signed root that ended it, lowercase hex. */
  readonly root: string;
}

/** Where an `agent_config` is and its digest. */
export interface AgentConfigRef {
  readonly position: number;
  /** SHA-256 of its config_json, lowercase hex. */
  readonly sha256: string;
}

// ---- building views ----

/** The view of an empty journal. */
export function emptyView(): JournalView {
  return new LazyView(0, undefined, [], emptyState());
}

/**
 * Folds a journal from position 0.
 *
 * @throws AppError `data_loss` when positions are not dense from 0, or an event has an
 *   unknown kind, an undecodable payload or a malformed turn payload (the message names
 *   the position and kind).
 */
export function foldJournal(entries: Iterable<JournalEntry>): JournalView {
  return applyEntries(emptyView(), entries);
}

/**
 * The view with one more event; `view` is not modified.
 *
 * @throws AppError `data_loss` when `entry.position` is not `view.head` (the message names
 *   both), or as {@link foldJournal}.
 */
export function applyEntry(view: JournalView, entry: JournalEntry): JournalView {
  return applyEntries(view, [entry]);
}

/**
 * The view with several more events (a committed batch, or a read from `view.head`), in
 * order; `view` is not modified, and if any entry is rejected no view is returned.
 *
 * @throws AppError as {@link applyEntry}.
 */
export function applyEntries(view: JournalView, entries: Iterable<JournalEntry>): JournalView {
  const events: DecodedEvent[] = [];
  let head = view.head;
  for (const entry of entries) {
    events.push(decodeEntry(entry, head));
    head += 1;
  }
  return extend(view, head, events);
}

/** One event as its typed payload: what a writer committed, before encoding. */
export type TypedEvent = {
  readonly [K in EventKind]: { readonly kind: K; readonly payload: EventPayloads[K] };
}[EventKind];

/**
 * The view with events this writer has just committed at `view.head`, from their typed
 * payloads: the same fold as {@link applyEntries} without decoding what was just encoded.
 * The payloads must be the ones encoded (`fromPartial` of the planned event), so the view
 * equals a fresh fold of the journal.
 *
 * @throws AppError as {@link applyEntry} for a malformed turn payload.
 */
export function applyEvents(view: JournalView, events: Iterable<TypedEvent>): JournalView {
  const decoded: DecodedEvent[] = [];
  let head = view.head;
  for (const event of events) {
    decoded.push(interpret(head, event));
    head += 1;
  }
  return extend(view, head, decoded);
}

/** `view` with `events` after it, up to `head`, folded when first read. */
function extend(view: JournalView, head: number, events: readonly DecodedEvent[]): JournalView {
  const base =
    view instanceof LazyView ? view : new LazyView(view.head, undefined, [], stateOf(view));
  return events.length === 0 ? base : new LazyView(head, base, events, undefined);
}
