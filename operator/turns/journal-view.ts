/**
 * A conversation's journal folded into what the turn coordinator and the API need: its
 * turns, each with its input, dispatches, committed steps, requests, answers and outcome.
 * Pure: no I/O, no clock.
 *
 * `foldJournal` reads a journal from position 0; `applyEntry` / `applyEntries` extend a
 * cached view with newly committed events. Both check and decode every event when called
 * (so they throw there) but build the turn records only when the new view is first read,
 * from the nearest view already read. The contents are persistent maps (lazy-view.ts):
 * extending a view by k events costs O(k log turns) when it is read, whatever the
 * conversation's length. A view is never modified by extending it.
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
 * the harness and the API are given); journal-view-types.ts holds the types they share.
 */
import type { JournalEntry } from '../../common/state-journal';
import { decodeEntry, interpret } from './decoded-event';
import type { DecodedEvent } from './decoded-event-types';
import { AppError } from '../../common/errors';
import { erasuresIn } from './erased-entries';
import { LazyView } from './lazy-view';
import { emptyState } from './view-state';
import type { JournalView, TypedEvent } from './journal-view-types';

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
  const read = [...entries];
  const erasures = erasuresIn(read);
  for (const entry of read) {
    events.push(decodeEntry(entry, head, erasures));
    head += 1;
  }
  return extend(view, head, events);
}

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
  if (!(view instanceof LazyView)) {
    throw new AppError('internal', 'journal view: only a view this module built can be extended');
  }
  return events.length === 0 ? view : new LazyView(head, view, events, undefined);
}
