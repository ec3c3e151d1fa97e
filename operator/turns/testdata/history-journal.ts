import {
  encodePayload,
  payloadCodecs,
  type EventKind,
  type EventPayloads,
} from '../../../common/event-kinds';
import type { JournalEntry } from '../../../common/state-journal';
import { foldJournal } from '../journal-view';
import type { JournalView } from '../journal-view-types';

/**
 * A journal of complete turns, and what else a test adds, each event its own entry: for the
 * tests of the history window and of summaries.
 */
export class HistoryJournal {
  readonly entries: JournalEntry[] = [];

  add<K extends EventKind>(kind: K, payload: Partial<EventPayloads[K]>): number {
    const position = this.entries.length;
    this.entries.push({
      position,
      kind,
      payload: encodePayload(kind, payloadCodecs[kind].fromPartial(payload)),
    });
    return position;
  }

  /** A complete turn: its message position. */
  turn(turnId: string, text: string, reply: string, historyFrom = 0): number {
    const position = this.add('message_received', { turnId, idempotencyKey: turnId, text });
    this.add('turn_dispatched', { turnId, attempt: 1, messagePosition: position, historyFrom });
    this.add('turn_complete', { turnId, text: reply, steps: 1 });
    return position;
  }

  view(): JournalView {
    return foldJournal(this.entries);
  }
}

/** Text of `tokens` estimated tokens as one history message (ASCII: 4 bytes a token). */
export const sized = (tokens: number): string => 'x'.repeat((tokens - 4) * 4);
