import { approvalArgsSha256 } from '../../common/approval-bytes';
import { AppError } from '../../common/errors';
import {
  decodePayload,
  isEventKind,
  type EventKind,
  type EventPayloads,
} from '../../common/event-kinds';
import type { JournalEntry } from '../../common/state-client';
import type {
  ApprovalExpired,
  ApprovalRequest,
  ApprovalResponse,
  Attribution,
  Handoff,
  MessageReceived,
  ModelCall,
  QuestionRequest,
  QuestionResponse,
  RequestCancelled,
  ToolCall,
  ToolResult,
  TurnAmbiguous,
  TurnComplete,
} from '../../proto/gen/polychrome/events/v1/events';
import type { HistoryMessage, Role, Step } from '../../proto/gen/polychrome/harness/v1/harness';
import {
  TurnStatus,
  type ApprovalCard,
  type QuestionCard,
  type TranscriptTurn,
  type TurnOutcome,
  type TurnReply,
} from './turn-service';

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
 * Turn state ({@link turnState}), in this order:
 * 1. A terminal marker (`turn_complete`, `turn_ambiguous`, `handoff`) settles the turn for
 *    good: `complete`, `ambiguous` (quarantined, never retried), `handoff`. A later
 *    terminal marker is ignored.
 * 2. No `turn_dispatched`: `received`. Batch one writes message and dispatch together, so
 *    only a damaged journal shows this; such a turn is no orphan and not in the transcript.
 * 3. After the latest dispatch there is a request with no answer after it (an
 *    `approval_response` / `question_response` with the same request id at a later
 *    position): `awaiting_approval` / `awaiting_answer`. An answer recorded before the
 *    request does not count, so a harness that rejected an answer and paused again with
 *    the same request id leaves the turn paused, not orphaned.
 * 4. Anything else: `orphan`, a dispatch with nothing settling or pausing it. The
 *    coordinator resumes a paused turn by appending the answer and a new `turn_dispatched`
 *    in one batch, so an answered, re-dispatched turn without an outcome is an orphan
 *    again (its new attempt crashed) and recovery picks it up.
 *
 * The committed-turn filter (docs/design.md "One turn, end to end", 6): history and transcript
 * hold only turns with at least one `turn_dispatched`; history holds complete turns only,
 * the transcript also paused (a card, never partial text), ambiguous and handed-off ones.
 */

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
  /** The first terminal marker, if any. */
  readonly terminal: TurnTerminal | undefined;
}

/** What is odd about an event the fold read past. */
export const AnomalyProblem = {
  /** A `message_received` reused an idempotency key; the first message keeps the key. */
  DuplicateIdempotencyKey: 'duplicate_idempotency_key',
  /** A `message_received` reused a turn id under another key; ignored. */
  DuplicateTurnId: 'duplicate_turn_id',
  /** A turn event names a turn no `message_received` opened; ignored. */
  UnknownTurn: 'unknown_turn',
  /** A second `ingress_directive` for a turn; the first one stands. */
  DuplicateDirective: 'duplicate_directive',
  /** A turn event after the turn's terminal marker: recorded (a second marker is not); the turn stays settled. */
  AfterTerminal: 'after_terminal',
} as const;
export type AnomalyProblem = (typeof AnomalyProblem)[keyof typeof AnomalyProblem];

/** An event that breaks a journal invariant (a writer bug) but leaves the journal readable. */
export interface JournalAnomaly {
  readonly position: number;
  readonly kind: EventKind;
  readonly turnId: string;
  readonly problem: AnomalyProblem;
  /** For logs: what is odd and what the fold did about it. */
  readonly message: string;
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
}

/** Where an `agent_config` is and its digest. */
export interface AgentConfigRef {
  readonly position: number;
  /** SHA-256 of its config_json, lowercase hex. */
  readonly sha256: string;
}

/** Where a turn stands; see the rules at the top of this file. */
export const TurnState = {
  Received: 'received',
  Orphan: 'orphan',
  AwaitingApproval: 'awaiting_approval',
  AwaitingAnswer: 'awaiting_answer',
  Complete: 'complete',
  Ambiguous: 'ambiguous',
  Handoff: 'handoff',
} as const;
export type TurnState = (typeof TurnState)[keyof typeof TurnState];

/** The request a paused turn waits on. */
export type PendingRequest =
  | { readonly type: 'approval'; readonly position: number; readonly request: ApprovalRequest }
  | { readonly type: 'question'; readonly position: number; readonly request: QuestionRequest };

// harness.v1 `Role` values, spelled here so this module does not load the generated
// harness file (it pulls in @grpc/grpc-js); journal-view.test.ts pins them.
const ROLE_USER = 1 satisfies Role;
const ROLE_ASSISTANT = 2 satisfies Role;

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
  const base =
    view instanceof LazyView ? view : new LazyView(view.head, undefined, [], stateOf(view));
  return events.length === 0 ? base : new LazyView(head, base, events, undefined);
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
  const base =
    view instanceof LazyView ? view : new LazyView(view.head, undefined, [], stateOf(view));
  return decoded.length === 0 ? base : new LazyView(head, base, decoded, undefined);
}

// ---- reading turns ----

/** Where `turn` stands (rules at the top of this file). */
export function turnState(turn: TurnView): TurnState {
  switch (turn.terminal?.kind) {
    case 'turn_complete':
      return TurnState.Complete;
    case 'turn_ambiguous':
      return TurnState.Ambiguous;
    case 'handoff':
      return TurnState.Handoff;
    case undefined:
      break;
  }
  if (turn.dispatches.length === 0) return TurnState.Received;
  const pending = pendingRequest(turn);
  if (pending === undefined) return TurnState.Orphan;
  return pending.type === 'approval' ? TurnState.AwaitingApproval : TurnState.AwaitingAnswer;
}

/**
 * The request an unsettled turn waits on: one after its latest dispatch with no answer
 * (same request id) after it. Should one attempt have left two (a harness pauses once per
 * call), the later one.
 */
export function pendingRequest(turn: TurnView): PendingRequest | undefined {
  if (turn.terminal !== undefined) return undefined;
  const latest = turn.dispatches.at(-1);
  if (latest === undefined) return undefined;
  let pending: PendingRequest | undefined;
  for (const { position, request } of turn.approvalRequests) {
    if (position < latest.position) continue;
    if (isAnswered(request.requestId, position, turn.approvalResponses)) continue;
    if (pending === undefined || position > pending.position) {
      pending = { type: 'approval', position, request };
    }
  }
  for (const { position, request } of turn.questionRequests) {
    if (position < latest.position) continue;
    if (isAnswered(request.requestId, position, turn.questionResponses)) continue;
    if (pending === undefined || position > pending.position) {
      pending = { type: 'question', position, request };
    }
  }
  return pending;
}

function isAnswered(
  requestId: string,
  requestPosition: number,
  responses: readonly RecordedResponse<{ readonly requestId: string }>[],
): boolean {
  return responses.some((r) => r.response.requestId === requestId && r.position > requestPosition);
}

/** The attempt number of the turn's next dispatch: its highest attempt + 1 (1 when none). */
export function nextAttempt(turn: TurnView): number {
  let highest = 0;
  for (const dispatch of turn.dispatches) highest = Math.max(highest, dispatch.attempt);
  return highest + 1;
}

/**
 * The orphan to recover first: the one whose message came first. Paused, settled,
 * quarantined (ambiguous) and never-dispatched turns are never returned.
 */
export function oldestOrphan(view: JournalView): TurnView | undefined {
  return view.turns.find((turn) => turnState(turn) === TurnState.Orphan);
}

/** The turn waiting for an approval or an answer (the oldest, should there be several). */
export function pendingTurn(view: JournalView): TurnView | undefined {
  return view.turns.find((turn) => pendingRequest(turn) !== undefined);
}

/** The turn an idempotency key opened, if any. */
export function turnForKey(view: JournalView, idempotencyKey: string): TurnView | undefined {
  const turnId = view.turnIdsByKey.get(idempotencyKey);
  return turnId === undefined ? undefined : view.turnsById.get(turnId);
}

/**
 * The turn's committed steps as harness `Step`s for `TurnStart.recorded_steps`, in journal
 * order (sequence 0: the harness ignores it there).
 */
export function recordedSteps(turn: TurnView): Step[] {
  return turn.steps.map((step): Step => {
    switch (step.kind) {
      case 'model_call':
        return {
          sequence: 0,
          step: { $case: 'modelCall', value: step.payload },
          commitWithResult: false,
        };
      case 'tool_call':
        return {
          sequence: 0,
          step: { $case: 'toolCall', value: step.payload },
          commitWithResult: false,
        };
      case 'tool_result':
        return {
          sequence: 0,
          step: { $case: 'toolResult', value: step.payload },
          commitWithResult: false,
        };
    }
  });
}

/** Every approval answer of the turn, in journal order (`TurnStart.approval_answers`). */
export function approvalAnswers(turn: TurnView): ApprovalResponse[] {
  return turn.approvalResponses.map((r) => r.response);
}

/** Every question answer of the turn, in journal order (`TurnStart.question_answers`). */
export function questionAnswers(turn: TurnView): QuestionResponse[] {
  return turn.questionResponses.map((r) => r.response);
}

/**
 * The agent's history for `TurnStart.history`: for each complete turn that was dispatched
 * (the committed-turn filter), in order, the user's text and the final reply text. With
 * `beforeTurnId`, only turns whose message precedes that turn's (an id not in the view
 * limits nothing).
 */
export function committedHistory(view: JournalView, beforeTurnId?: string): HistoryMessage[] {
  const before =
    beforeTurnId === undefined
      ? Number.POSITIVE_INFINITY
      : (view.turnsById.get(beforeTurnId)?.messagePosition ?? Number.POSITIVE_INFINITY);
  const history: HistoryMessage[] = [];
  for (const turn of view.turns) {
    if (turn.messagePosition >= before) break;
    const terminal = turn.terminal;
    if (terminal?.kind !== 'turn_complete' || turn.dispatches.length === 0) continue;
    history.push(
      { role: ROLE_USER, content: [{ block: { $case: 'text', value: turn.text } }] },
      {
        role: ROLE_ASSISTANT,
        content: [{ block: { $case: 'text', value: terminal.payload.text } }],
      },
    );
  }
  return history;
}

/**
 * The transcript: complete, paused, ambiguous and handed-off turns that were dispatched,
 * oldest first. Orphans (in flight or crashed) and never-dispatched turns are absent.
 */
export function transcriptTurns(view: JournalView): TranscriptTurn[] {
  const out: TranscriptTurn[] = [];
  for (const turn of view.turns) {
    if (turn.dispatches.length === 0) continue;
    const outcome = outcomeOf(turn);
    if (outcome === undefined) continue;
    out.push({
      turnId: turn.turnId,
      position: turn.messagePosition,
      user: { text: turn.text, caller: turn.attribution.caller, receivedAtMs: turn.receivedAtMs },
      ...outcome,
    });
  }
  return out;
}

/**
 * The reply for a settled or paused turn (`undefined` for an orphan or a never-dispatched
 * turn); `requestedAt` is the position of its message.
 */
export function turnReplyOf(conversationId: string, turn: TurnView): TurnReply | undefined {
  const outcome = outcomeOf(turn);
  if (outcome === undefined) return undefined;
  return { conversationId, turnId: turn.turnId, requestedAt: turn.messagePosition, ...outcome };
}

/**
 * The card for an approval request: what the approver sees and the hash they bind. The
 * required approver is the request's, else the turn directive's, else empty (any admin).
 */
export function approvalCardOf(turn: TurnView, request: ApprovalRequest): ApprovalCard {
  return {
    requestId: request.requestId,
    toolCallId: request.toolCallId,
    toolName: request.toolName,
    // Checked to be JSON when the event was applied.
    args: JSON.parse(request.argsJson),
    argsSha256: hex(request.argsSha256),
    reason: request.reason,
    requiredApprover:
      request.requiredApprover !== ''
        ? request.requiredApprover
        : (turn.directive?.requiredApprover ?? ''),
  };
}

function outcomeOf(turn: TurnView): TurnOutcome | undefined {
  const terminal = turn.terminal;
  switch (terminal?.kind) {
    case 'turn_complete':
      return {
        status: TurnStatus.Complete,
        reply: terminal.payload.text,
        fallback: terminal.payload.fallback,
      };
    case 'turn_ambiguous':
      return {
        status: TurnStatus.Ambiguous,
        ambiguous: { toolCallId: terminal.payload.toolCallId, reason: terminal.payload.reason },
      };
    case 'handoff':
      return {
        status: TurnStatus.Handoff,
        handoff: { targetAgent: terminal.payload.targetAgent, reason: terminal.payload.reason },
      };
    case undefined:
      break;
  }
  const pending = pendingRequest(turn);
  if (pending === undefined) return undefined;
  if (pending.type === 'approval') {
    return { status: TurnStatus.Paused, approval: approvalCardOf(turn, pending.request) };
  }
  const question: QuestionCard = {
    requestId: pending.request.requestId,
    question: pending.request.question,
  };
  return { status: TurnStatus.Paused, question };
}

// ---- decoding (stateless: everything that can throw happens here) ----

/** Kinds whose payload names a turn (`turn_id`), besides `message_received`. */
type TurnEventKind =
  | 'ingress_directive'
  | 'turn_dispatched'
  | 'model_call'
  | 'tool_call'
  | 'tool_result'
  | 'approval_request'
  | 'approval_response'
  | 'question_request'
  | 'question_response'
  | 'request_cancelled'
  | 'approval_expired'
  | 'handoff'
  | 'turn_complete'
  | 'turn_ambiguous';

/** One checked, decoded event, ready to fold into a state. */
type DecodedEvent =
  | { readonly type: 'message'; readonly position: number; readonly message: MessageReceived }
  | { readonly type: 'root'; readonly root: SignedRootRef }
  | { readonly type: 'config'; readonly config: AgentConfigRef }
  | {
      readonly type: 'turn';
      readonly position: number;
      readonly kind: TurnEventKind;
      readonly turnId: string;
      /** The turn's record with this event added. */
      readonly apply: (turn: TurnView) => TurnView;
    }
  | { readonly type: 'ignored' };

function decodeEntry(entry: JournalEntry, head: number): DecodedEvent {
  const { position, kind } = entry;
  if (position !== head) {
    throw new AppError(
      'data_loss',
      `journal position ${position} (${kind}): expected position ${head}; positions must be dense from 0 (events are missing or repeated), read the journal again from 0`,
      { details: { expected: head, found: position, kind } },
    );
  }
  // Excised by the state plane's repair: only its leaf digest is left, so it folds as a gap.
  if (entry.excised === true) return { type: 'ignored' };
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
function interpret(position: number, event: TypedEvent): DecodedEvent {
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
    case 'ingress_directive': {
      const d = event.payload;
      const directive: TurnDirectiveRecord = {
        position,
        maxSteps: d.maxSteps,
        requiredApprover: d.requiredApprover,
      };
      return turnEvent(position, event.kind, d.turnId, (turn) => ({ ...turn, directive }));
    }
    case 'turn_dispatched': {
      const d = event.payload;
      const dispatch: TurnDispatch = {
        attempt: d.attempt,
        position,
        leaseHolder: d.leaseHolder,
        fencingToken: d.fencingToken,
        attribution: attributionOf(d.attribution),
        dispatchedAtMs: d.dispatchedAtMs,
      };
      return turnEvent(position, event.kind, d.turnId, (turn) => ({
        ...turn,
        dispatches: [...turn.dispatches, dispatch],
      }));
    }
    case 'model_call': {
      const payload = event.payload;
      return stepEvent(payload.turnId, { kind: event.kind, position, payload });
    }
    case 'tool_call': {
      const payload = event.payload;
      return stepEvent(payload.turnId, { kind: event.kind, position, payload });
    }
    case 'tool_result': {
      const payload = event.payload;
      return stepEvent(payload.turnId, { kind: event.kind, position, payload });
    }
    case 'approval_request': {
      const request = event.payload;
      checkApprovalRequest(position, request);
      return turnEvent(position, event.kind, request.turnId, (turn) => ({
        ...turn,
        approvalRequests: [...turn.approvalRequests, { position, request }],
      }));
    }
    case 'approval_response': {
      const response = event.payload;
      return turnEvent(position, event.kind, response.turnId, (turn) => ({
        ...turn,
        approvalResponses: [...turn.approvalResponses, { position, response }],
      }));
    }
    case 'question_request': {
      const request = event.payload;
      return turnEvent(position, event.kind, request.turnId, (turn) => ({
        ...turn,
        questionRequests: [...turn.questionRequests, { position, request }],
      }));
    }
    case 'question_response': {
      const response = event.payload;
      return turnEvent(position, event.kind, response.turnId, (turn) => ({
        ...turn,
        questionResponses: [...turn.questionResponses, { position, response }],
      }));
    }
    case 'request_cancelled': {
      const response = event.payload;
      return turnEvent(position, event.kind, response.turnId, (turn) => ({
        ...turn,
        cancellations: [...turn.cancellations, { position, response }],
      }));
    }
    case 'approval_expired': {
      const response = event.payload;
      return turnEvent(position, event.kind, response.turnId, (turn) => ({
        ...turn,
        expiries: [...turn.expiries, { position, response }],
      }));
    }
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
    case 'agent_config': {
      const config = event.payload;
      return { type: 'config', config: { position, sha256: hex(config.sha256) } };
    }
    case 'payment_charge':
    case 'outbound_payment_receipt':
    case 'memory_set':
    case 'memory_cleared':
    case 'conversation_closed':
    case 'conversation_reopened':
    case 'key_rotated':
    case 'excision':
      // Not part of the view (decoded all the same, so that corruption fails the read).
      return { type: 'ignored' };
  }
}

function turnEvent(
  position: number,
  kind: TurnEventKind,
  turnId: string,
  apply: (turn: TurnView) => TurnView,
): DecodedEvent {
  requireTurnId(position, kind, turnId);
  return { type: 'turn', position, kind, turnId, apply };
}

function stepEvent(turnId: string, step: RecordedStep): DecodedEvent {
  return turnEvent(step.position, step.kind, turnId, (turn) => ({
    ...turn,
    steps: [...turn.steps, step],
  }));
}

function terminalEvent(turnId: string, terminal: TurnTerminal): DecodedEvent {
  return turnEvent(terminal.position, terminal.kind, turnId, (turn) => ({ ...turn, terminal }));
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

function requireTurnId(position: number, kind: EventKind, turnId: string): void {
  if (turnId === '') throw malformed(position, kind, 'the payload names no turn (empty turn_id)');
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

function malformed(position: number, kind: EventKind, what: string, cause?: unknown): AppError {
  return new AppError(
    'data_loss',
    `journal position ${position} (${kind}): ${what}; the journal cannot be read past it`,
    { details: { position, kind }, ...(cause === undefined ? {} : { cause }) },
  );
}

function hex(bytes: Uint8Array): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('hex');
}

function attributionOf(attribution: Attribution | undefined): Attribution {
  return {
    caller: attribution?.caller ?? '',
    participants: [...(attribution?.participants ?? [])],
    persona: attribution?.persona ?? '',
  };
}

// ---- folding (never throws: decoding checked everything) ----

/** The materialized contents of a view. Never modified once a view holds it. */
interface ViewState {
  readonly lastSignedRoot: SignedRootRef | undefined;
  readonly turns: readonly TurnView[];
  readonly turnIdsByKey: ReadonlyMap<string, string>;
  readonly turnsById: ReadonlyMap<string, TurnView>;
  readonly anomalies: readonly JournalAnomaly[];
  readonly newestAgentConfig?: AgentConfigRef;
}

function emptyState(): ViewState {
  return {
    lastSignedRoot: undefined,
    turns: [],
    turnIdsByKey: new Map(),
    turnsById: new Map(),
    anomalies: [],
  };
}

function stateOf(view: JournalView): ViewState {
  return {
    lastSignedRoot: view.lastSignedRoot,
    turns: view.turns,
    turnIdsByKey: view.turnIdsByKey,
    turnsById: view.turnsById,
    anomalies: view.anomalies,
    ...(view.newestAgentConfig === undefined ? {} : { newestAgentConfig: view.newestAgentConfig }),
  };
}

/**
 * A view: either materialized (`state`) or a base view plus the decoded events after it,
 * folded on first read. Reading folds from the nearest materialized ancestor, then drops
 * the link to it, so a long chain of unread views costs one fold.
 */
class LazyView implements JournalView {
  readonly head: number;
  #base: LazyView | undefined;
  #events: readonly DecodedEvent[];
  #state: ViewState | undefined;

  constructor(
    head: number,
    base: LazyView | undefined,
    events: readonly DecodedEvent[],
    state: ViewState | undefined,
  ) {
    this.head = head;
    this.#base = base;
    this.#events = events;
    this.#state = state;
  }

  get lastSignedRoot(): SignedRootRef | undefined {
    return this.#resolve().lastSignedRoot;
  }

  get turns(): readonly TurnView[] {
    return this.#resolve().turns;
  }

  get turnIdsByKey(): ReadonlyMap<string, string> {
    return this.#resolve().turnIdsByKey;
  }

  get turnsById(): ReadonlyMap<string, TurnView> {
    return this.#resolve().turnsById;
  }

  get anomalies(): readonly JournalAnomaly[] {
    return this.#resolve().anomalies;
  }

  get newestAgentConfig(): AgentConfigRef | undefined {
    return this.#resolve().newestAgentConfig;
  }

  #resolve(): ViewState {
    if (this.#state !== undefined) return this.#state;
    const chain: LazyView[] = [this];
    let base = this.#base;
    while (base !== undefined && base.#state === undefined) {
      chain.push(base);
      base = base.#base;
    }
    const state = base === undefined ? undefined : base.#state;
    if (state === undefined) throw new AppError('internal', 'journal view: a view has no base');
    const builder = new StateBuilder(state);
    for (const view of chain.reverse()) {
      for (const event of view.#events) builder.apply(event);
    }
    const built = builder.build();
    this.#state = built;
    this.#base = undefined;
    this.#events = [];
    return built;
  }
}

/** A working copy of a state: copies the containers once, replaces (never edits) turn records. */
class StateBuilder {
  private lastSignedRoot: SignedRootRef | undefined;
  private readonly turns: TurnView[];
  private readonly turnIdsByKey: Map<string, string>;
  private readonly turnsById: Map<string, TurnView>;
  private readonly anomalies: JournalAnomaly[];
  private newestAgentConfig: AgentConfigRef | undefined;

  constructor(state: ViewState) {
    this.newestAgentConfig = state.newestAgentConfig;
    this.lastSignedRoot = state.lastSignedRoot;
    this.turns = [...state.turns];
    this.turnIdsByKey = new Map(state.turnIdsByKey);
    this.turnsById = new Map(state.turnsById);
    this.anomalies = [...state.anomalies];
  }

  build(): ViewState {
    return {
      lastSignedRoot: this.lastSignedRoot,
      turns: this.turns,
      turnIdsByKey: this.turnIdsByKey,
      turnsById: this.turnsById,
      anomalies: this.anomalies,
      ...(this.newestAgentConfig === undefined
        ? {}
        : { newestAgentConfig: this.newestAgentConfig }),
    };
  }

  apply(event: DecodedEvent): void {
    switch (event.type) {
      case 'message':
        return this.message(event.position, event.message);
      case 'root':
        this.lastSignedRoot = event.root;
        return;
      case 'config':
        this.newestAgentConfig = event.config;
        return;
      case 'turn':
        return this.turnEvent(event.position, event.kind, event.turnId, event.apply);
      case 'ignored':
        return;
    }
  }

  private message(position: number, message: MessageReceived): void {
    const kind = 'message_received';
    const firstTurnId = this.turnIdsByKey.get(message.idempotencyKey);
    if (firstTurnId !== undefined) {
      this.anomaly(
        position,
        kind,
        message.turnId,
        AnomalyProblem.DuplicateIdempotencyKey,
        `idempotency key ${JSON.stringify(message.idempotencyKey)} already opened turn ${firstTurnId}; the first message keeps the key`,
      );
    }
    if (this.turnsById.has(message.turnId)) {
      if (firstTurnId === undefined) {
        this.anomaly(
          position,
          kind,
          message.turnId,
          AnomalyProblem.DuplicateTurnId,
          `turn ${message.turnId} was already opened by another message; this one is ignored`,
        );
      }
      return;
    }
    const turn: TurnView = {
      turnId: message.turnId,
      idempotencyKey: message.idempotencyKey,
      text: message.text,
      attribution: attributionOf(message.attribution),
      receivedAtMs: message.receivedAtMs,
      messagePosition: position,
      directive: undefined,
      dispatches: [],
      steps: [],
      approvalRequests: [],
      approvalResponses: [],
      questionRequests: [],
      questionResponses: [],
      cancellations: [],
      expiries: [],
      terminal: undefined,
    };
    this.turns.push(turn);
    this.turnsById.set(turn.turnId, turn);
    if (firstTurnId === undefined) this.turnIdsByKey.set(message.idempotencyKey, turn.turnId);
  }

  private turnEvent(
    position: number,
    kind: TurnEventKind,
    turnId: string,
    apply: (turn: TurnView) => TurnView,
  ): void {
    const turn = this.turnsById.get(turnId);
    if (turn === undefined) {
      this.anomaly(
        position,
        kind,
        turnId,
        AnomalyProblem.UnknownTurn,
        `no message_received opened turn ${turnId}; the event is ignored`,
      );
      return;
    }
    if (turn.terminal !== undefined) {
      const terminal = kind === 'turn_complete' || kind === 'turn_ambiguous' || kind === 'handoff';
      this.anomaly(
        position,
        kind,
        turnId,
        AnomalyProblem.AfterTerminal,
        `turn ${turnId} was settled by ${turn.terminal.kind} at position ${turn.terminal.position}; ${terminal ? 'this marker is ignored' : 'the event is recorded, the turn stays settled'}`,
      );
      if (terminal) return;
    }
    if (kind === 'ingress_directive' && turn.directive !== undefined) {
      this.anomaly(
        position,
        kind,
        turnId,
        AnomalyProblem.DuplicateDirective,
        `turn ${turnId} already has the directive at position ${turn.directive.position}; it stands`,
      );
      return;
    }
    this.replace(apply(turn));
  }

  private replace(turn: TurnView): void {
    this.turnsById.set(turn.turnId, turn);
    // Turns are sorted by message position.
    let low = 0;
    let high = this.turns.length - 1;
    while (low <= high) {
      const mid = (low + high) >>> 1;
      const at = this.turns[mid]?.messagePosition ?? Number.NaN;
      if (at === turn.messagePosition) {
        this.turns[mid] = turn;
        return;
      }
      if (at < turn.messagePosition) low = mid + 1;
      else high = mid - 1;
    }
    throw new AppError('internal', `journal view: turn ${turn.turnId} is not in the turn list`);
  }

  private anomaly(
    position: number,
    kind: EventKind,
    turnId: string,
    problem: AnomalyProblem,
    message: string,
  ): void {
    this.anomalies.push({ position, kind, turnId, problem, message });
  }
}
