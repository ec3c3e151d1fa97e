import { describe, expect, it } from '@jest/globals';
import {
  encodePayload,
  payloadCodecs,
  type EventKind,
  type EventPayloads,
} from '../../common/event-kinds';
import type { JournalEntry } from '../../common/state-journal';
import { foldJournal } from './journal-view';
import type { JournalView } from './journal-view-types';
import { committedHistory } from './turn-projections';
import { estimatedTokens, historyWindowStart } from './history-window';

/** A journal of complete turns (and what else a test adds), each event its own entry. */
class Journal {
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
const sized = (tokens: number): string => 'x'.repeat((tokens - 4) * 4);

describe('estimatedTokens', () => {
  it('counts UTF-8 bytes / 4, rounded up, plus the message framing', () => {
    expect(estimatedTokens('')).toBe(4);
    expect(estimatedTokens('abcd')).toBe(5);
    expect(estimatedTokens('abcde')).toBe(6);
    // Three bytes a character: 6 bytes.
    expect(estimatedTokens('€€')).toBe(6);
  });
});

describe('historyWindowStart', () => {
  const j = new Journal();
  const positions = ['a', 'b', 'c', 'd'].map((id) => j.turn(id, sized(50), sized(50)));
  const next = j.entries.length;

  it('is 0 when every earlier turn fits: the dispatch records nothing', () => {
    expect(historyWindowStart(j.view(), next, 400)).toBe(0);
    expect(historyWindowStart(j.view(), next, 10_000)).toBe(0);
  });

  it('starts at the oldest of the newest turns that fit', () => {
    // 100 tokens a turn.
    expect(historyWindowStart(j.view(), next, 399)).toBe(positions[1]);
    expect(historyWindowStart(j.view(), next, 200)).toBe(positions[2]);
    expect(historyWindowStart(j.view(), next, 199)).toBe(positions[3]);
  });

  it('is the turn itself when not even the newest earlier turn fits: an empty history', () => {
    expect(historyWindowStart(j.view(), next, 99)).toBe(next);
  });

  it('counts only turns before the message, and only complete dispatched ones', () => {
    expect(historyWindowStart(j.view(), positions[2] ?? -1, 200)).toBe(0);
    expect(historyWindowStart(j.view(), positions[2] ?? -1, 199)).toBe(positions[1]);
    const k = new Journal();
    const first = k.turn('a', sized(50), sized(50));
    // Paused on a question, never complete: not in history, costs nothing.
    const paused = k.add('message_received', {
      turnId: 'p',
      idempotencyKey: 'p',
      text: sized(900),
    });
    k.add('turn_dispatched', { turnId: 'p', attempt: 1, messagePosition: paused });
    k.add('question_request', { turnId: 'p', requestId: 'q', toolCallId: 'c', question: '?' });
    k.add('question_response', { turnId: 'p', requestId: 'q', answer: 'no' });
    const last = k.turn('b', sized(50), sized(50));
    expect(historyWindowStart(k.view(), k.entries.length, 200)).toBe(0);
    expect(historyWindowStart(k.view(), k.entries.length, 199)).toBe(last);
    expect(first).toBe(0);
  });
});

describe('committedHistory', () => {
  const texts = (view: JournalView, turnId: string): string[] => {
    const turn = view.turnsById.get(turnId);
    if (turn === undefined) throw new Error(`test: no turn ${turnId}`);
    return committedHistory(view, turn).map((m) =>
      m.content.map((b) => (b.block?.$case === 'text' ? b.block.value : '')).join(''),
    );
  };

  it('gives the window the turn latest dispatch recorded, oldest first', () => {
    const j = new Journal();
    j.turn('a', 'qa', 'ra');
    const b = j.turn('b', 'qb', 'rb');
    j.turn('c', 'qc', 'rc');
    j.turn('d', 'qd', 'rd', b);
    expect(texts(j.view(), 'd')).toEqual(['qb', 'rb', 'qc', 'rc']);
    // Its first attempt had another window; the latest dispatch is what the harness gets.
    j.add('turn_dispatched', { turnId: 'd', attempt: 2, messagePosition: 9, historyFrom: 0 });
    expect(texts(j.view(), 'd')).toEqual(['qa', 'ra', 'qb', 'rb', 'qc', 'rc']);
  });

  it('an empty window: the dispatch names the turn itself', () => {
    const j = new Journal();
    j.turn('a', 'qa', 'ra');
    j.turn('b', 'qb', 'rb', 3);
    expect(texts(j.view(), 'b')).toEqual([]);
  });
});
