import { describe, expect, it } from '@jest/globals';
import type { Conversation } from '../api/v1alpha1/conversation-types';
import { nextHistory } from './history-window';
import { planSummary, stillValid, type SummaryTask } from './summary-plan';
import { summaryEvent } from './summarizer';
import { HistoryJournal, sized } from './testdata/history-journal';

const MODEL = { model: 'claude-test', maxTokens: 256 };
const conversation = (historyTokens: number): Conversation =>
  ({
    metadata: { uid: 'u', name: 'c', namespace: 'n' },
    spec: { agent: { historyTokens } },
  }) as unknown as Conversation;

/** `n` complete turns of 100 estimated tokens each (50 the message, 50 the reply). */
function journalOf(n: number): { journal: HistoryJournal; positions: number[] } {
  const journal = new HistoryJournal();
  const positions = Array.from({ length: n }, (_, i) =>
    journal.turn(`t${i}`, `${i}:${sized(50).slice(3)}`, sized(50)),
  );
  return { journal, positions };
}

/** Commits `task` as the control plane would, with `text`. */
function commit(journal: HistoryJournal, task: SummaryTask, text: string): number {
  const usage = { inputTokens: 1, outputTokens: 1 };
  const event = summaryEvent(task, MODEL, text, { usage }, 0);
  if (event.kind !== 'summary') throw new Error('expected a summary event');
  return journal.add('summary', event.payload);
}

describe('planSummary', () => {
  it('makes none while the history fits three quarters of the budget', () => {
    const { journal } = journalOf(7);
    expect(planSummary(journal.view(), 1000)).toBeUndefined();
  });

  it('past three quarters, covers all but the newest turns that fit a quarter, oldest first', () => {
    const { journal, positions } = journalOf(8);
    const task = planSummary(journal.view(), 1000);
    // 800 > 750: the newest two (200 tokens) stay in full, the third from last tips the quarter.
    expect(task).toMatchObject({
      previous: undefined,
      fromPosition: positions[0],
      toPosition: positions[5],
    });
    expect(task?.input.previous).toBeUndefined();
    expect(task?.input.turns.map((t) => t.user.split(':')[0])).toEqual([
      '0',
      '1',
      '2',
      '3',
      '4',
      '5',
    ]);
  });

  it('extends the newest summary: its text is the previous one, only later turns are added', () => {
    const { journal, positions } = journalOf(8);
    const first = planSummary(journal.view(), 1000);
    if (first === undefined) throw new Error('expected a summary');
    const at = commit(journal, first, 'S1');
    expect(planSummary(journal.view(), 1000)).toBeUndefined();
    for (let i = 8; i < 14; i++) journal.turn(`t${i}`, `${i}:${sized(50).slice(3)}`, sized(50));
    const second = planSummary(journal.view(), 1000);
    expect(second).toMatchObject({ fromPosition: positions[0], previous: { position: at } });
    expect(second?.input.previous).toBe('S1');
    expect(second?.input.turns.map((t) => t.user.split(':')[0])).toEqual([
      '6',
      '7',
      '8',
      '9',
      '10',
      '11',
    ]);
  });

  it('keeps its own request within the budget: with more to take in, the oldest that fit', () => {
    const { journal, positions } = journalOf(30);
    // 3,000 tokens of history for a budget of 1,000: the first summary takes t0..t9.
    const first = planSummary(journal.view(), 1000);
    expect(first?.toPosition).toBe(positions[9]);
    if (first === undefined) throw new Error('expected a summary');
    commit(journal, first, sized(100));
    // Then 100 for the previous summary and nine more turns, and so on until it catches up.
    const second = planSummary(journal.view(), 1000);
    expect(second?.toPosition).toBe(positions[18]);
  });

  it('takes a turn larger than the budget on its own rather than none', () => {
    const journal = new HistoryJournal();
    const big = journal.turn('big', sized(2000), sized(2000));
    for (let i = 0; i < 3; i++) journal.turn(`t${i}`, sized(50), sized(50));
    expect(planSummary(journal.view(), 1000)?.toPosition).toBe(big);
  });

  it('stops before the oldest turn that is not settled', () => {
    const { journal, positions } = journalOf(3);
    const open = journal.add('message_received', {
      turnId: 'open',
      idempotencyKey: 'open',
      text: sized(50),
    });
    journal.add('turn_dispatched', { turnId: 'open', attempt: 1, messagePosition: open });
    for (let i = 3; i < 9; i++) journal.turn(`t${i}`, `${i}:${sized(50).slice(3)}`, sized(50));
    const task = planSummary(journal.view(), 1000);
    expect(task?.toPosition).toBe(positions[2]);
  });

  it('leaves out turns whose message or answer was erased', () => {
    const { journal, positions } = journalOf(8);
    const erasedAt = positions[1] ?? -1;
    journal.entries[erasedAt] = {
      ...journal.entries[erasedAt]!,
      excised: true,
      payload: new Uint8Array(),
    };
    journal.add('excision', {
      position: erasedAt,
      erased: true,
      erasedKind: 'message_received',
      turnId: 't1',
    });
    const task = planSummary(journal.view(), 700);
    expect(task?.input.turns.map((t) => t.user.split(':')[0])).not.toContain('1');
    expect(task?.input.turns.length).toBeGreaterThan(0);
  });
});

describe('stillValid', () => {
  it('holds when only newer turns came, not when the summary it extends or a covered turn changed', () => {
    const { journal, positions } = journalOf(8);
    const task = planSummary(journal.view(), 1000);
    if (task === undefined) throw new Error('expected a summary');
    journal.turn('t8', `8:${sized(50).slice(3)}`, sized(50));
    expect(stillValid(journal.view(), task, MODEL)).toBe(true);
    const erased = journal.view();
    const at = positions[2] ?? -1;
    journal.add('excision', {
      position: at,
      erased: true,
      erasedKind: 'message_received',
      turnId: 't2',
    });
    expect(stillValid(journal.view(), task, MODEL)).toBe(false);
    expect(stillValid(erased, task, MODEL)).toBe(true);
  });

  it('fails once another summary was committed', () => {
    const { journal } = journalOf(8);
    const task = planSummary(journal.view(), 1000);
    if (task === undefined) throw new Error('expected a summary');
    commit(journal, task, 'S1');
    expect(stillValid(journal.view(), task, MODEL)).toBe(false);
  });
});

describe('nextHistory with summaries', () => {
  it('all of the history and no summary while it fits', () => {
    const { journal } = journalOf(5);
    const next = journal.entries.length;
    expect(nextHistory(journal.view(), conversation(1000), next, 0)).toEqual({
      historyFrom: 0,
      summaryPosition: 0,
    });
  });

  it('the plain window when there is no summary yet (a turn never waits for one)', () => {
    const { journal, positions } = journalOf(12);
    const next = journal.entries.length;
    expect(nextHistory(journal.view(), conversation(1000), next, 0)).toEqual({
      historyFrom: positions[2],
      summaryPosition: 0,
    });
  });

  it('the newest summary and the turns after it that fit the rest of the budget', () => {
    const { journal, positions } = journalOf(8);
    const task = planSummary(journal.view(), 1000);
    if (task === undefined) throw new Error('expected a summary');
    const at = commit(journal, task, sized(100));
    for (let i = 8; i < 12; i++) journal.turn(`t${i}`, `${i}:${sized(50).slice(3)}`, sized(50));
    const next = journal.entries.length;
    // After the summary (to t5): t6..t11, 600 tokens, and the summary's 100 fit 1000.
    expect(nextHistory(journal.view(), conversation(1000), next, 0)).toEqual({
      historyFrom: (positions[5] ?? 0) + 1,
      summaryPosition: at,
    });
    // With 500, the summary's 100 leave 400: t8..t11.
    expect(nextHistory(journal.view(), conversation(500), next, 0)).toEqual({
      historyFrom: journal.view().turnsById.get('t8')?.messagePosition,
      summaryPosition: at,
    });
  });

  it('an erased summary is not given; an older one that is not erased is', () => {
    const { journal } = journalOf(8);
    const first = planSummary(journal.view(), 1000);
    if (first === undefined) throw new Error('expected a summary');
    const older = commit(journal, first, 'S1');
    for (let i = 8; i < 14; i++) journal.turn(`t${i}`, `${i}:${sized(50).slice(3)}`, sized(50));
    const second = planSummary(journal.view(), 1000);
    if (second === undefined) throw new Error('expected a second summary');
    const newer = commit(journal, second, 'S2');
    const next = journal.entries.length;
    expect(nextHistory(journal.view(), conversation(1000), next, 0).summaryPosition).toBe(newer);
    journal.add('excision', { position: newer, erased: true, erasedKind: 'summary', turnId: '' });
    expect(nextHistory(journal.view(), conversation(1000), next, 0).summaryPosition).toBe(older);
  });
});
