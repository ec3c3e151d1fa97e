import { describe, expect, it } from '@jest/globals';

import { payloadCodecs, type EventKind, type EventPayloads } from '../../common/event-kinds';
import type { JournalEntry } from '../../common/state-journal';
import { ERASED_TEXT } from './erased-entries';
import type { JournalView } from './journal-view-types';
import { applyEntries, foldJournal } from './journal-view';
import { committedHistory, transcriptTurns, turnReplyOf } from './turn-projections';
import { turnState } from './turn-state';

/*
 * The journal view of erased entries (erased-entries.ts; docs/turns.md, "Erased entries"):
 * real payloads, encoded with the codecs; the erasure is written as the state plane writes
 * it: each erased entry replaced by an excised marker, then a batch of `excision` records
 * marked erased and a signed_root.
 */

function encoded<K extends EventKind>(kind: K, payload: Partial<EventPayloads[K]>): Uint8Array {
  const codec = payloadCodecs[kind];
  return codec.encode(codec.fromPartial(payload)).finish();
}

const root = (leafCount: number): Uint8Array =>
  encoded('signed_root', {
    leafCount,
    root: Buffer.alloc(32, leafCount),
    keyId: 'k',
    signature: Buffer.alloc(64, 1),
  });

/** A journal of batches, each closed by a signed_root. */
function journal(...batches: [EventKind, Uint8Array][][]): JournalEntry[] {
  const entries: JournalEntry[] = [];
  for (const batch of batches) {
    for (const [kind, payload] of batch) entries.push({ position: entries.length, kind, payload });
    entries.push({ position: entries.length, kind: 'signed_root', payload: root(entries.length) });
  }
  return entries;
}

const T1 = 't1';
const attribution = { caller: 'web:ada', participants: ['web:ada'], persona: 'p', session: '' };
const original = journal(
  [
    [
      'message_received',
      encoded('message_received', {
        turnId: T1,
        idempotencyKey: 'k1',
        text: 'my number is 555-0100',
        attribution,
        receivedAtMs: 1_000,
      }),
    ],
    [
      'turn_dispatched',
      encoded('turn_dispatched', { turnId: T1, attempt: 1, leaseHolder: 'r', fencingToken: 1 }),
    ],
  ], // 0, 1, root 2
  [
    [
      'tool_call',
      encoded('tool_call', {
        turnId: T1,
        step: 1,
        toolCallId: 'c1',
        toolName: 'lookup',
        argsJson: '{"q":"555-0100"}',
      }),
    ],
    [
      'tool_result',
      encoded('tool_result', { turnId: T1, toolCallId: 'c1', content: 'Ada, 555-0100' }),
    ],
    [
      'question_request',
      encoded('question_request', {
        turnId: T1,
        requestId: 'q1',
        toolCallId: 'c2',
        question: 'which Ada?',
      }),
    ],
  ], // 3, 4, 5, root 6
  [
    [
      'question_response',
      encoded('question_response', {
        turnId: T1,
        requestId: 'q1',
        answer: 'the one at 555-0100',
        answeredBy: 'web:ada',
      }),
    ],
    [
      'turn_complete',
      encoded('turn_complete', {
        turnId: T1,
        text: 'Saved 555-0100 for Ada.',
        steps: 2,
        completedAtMs: 5_000,
      }),
    ],
  ], // 7, 8, root 9
  [
    [
      'message_received',
      encoded('message_received', {
        turnId: 't2',
        idempotencyKey: 'k2',
        text: 'thanks',
        attribution,
        receivedAtMs: 6_000,
      }),
    ],
    [
      'turn_dispatched',
      encoded('turn_dispatched', { turnId: 't2', attempt: 1, leaseHolder: 'r', fencingToken: 1 }),
    ],
    [
      'turn_complete',
      encoded('turn_complete', { turnId: 't2', text: 'You are welcome.', steps: 1 }),
    ],
  ], // 10, 11, 12, root 13
);

/** `entries` after an erasure of `positions`, as the state plane leaves the journal. */
function erased(entries: readonly JournalEntry[], positions: readonly number[]): JournalEntry[] {
  const out: JournalEntry[] = entries.map((e) =>
    positions.includes(e.position)
      ? {
          position: e.position,
          kind: '',
          payload: new Uint8Array(0),
          excised: true,
          leafDigest: new Uint8Array(32),
        }
      : e,
  );
  for (const position of positions) {
    const entry = entries[position]!;
    const turnId =
      (payloadCodecs[entry.kind as EventKind].decode(entry.payload) as { turnId?: string })
        .turnId ?? '';
    out.push({
      position: out.length,
      kind: 'excision',
      payload: encoded('excision', {
        position,
        leafDigest: Buffer.alloc(32),
        actor: 'web:admin',
        reason: 'erasure request',
        erased: true,
        erasedKind: entry.kind,
        turnId,
      }),
    });
  }
  out.push({ position: out.length, kind: 'signed_root', payload: root(out.length) });
  return out;
}

function snapshot(view: JournalView): unknown {
  return structuredClone({
    head: view.head,
    turns: view.turns,
    turnIdsByKey: [...view.turnIdsByKey],
    anomalies: view.anomalies,
  });
}

const CONTENT = [0, 3, 4, 5, 7, 8];

describe('a journal view with erased entries', () => {
  it('keeps the turn, its order and its standing, and holds none of the erased content', () => {
    const view = foldJournal(erased(original, CONTENT));
    expect(view.anomalies).toEqual([]);
    expect(view.turns.map((t) => [t.turnId, t.messagePosition])).toEqual([
      [T1, 0],
      ['t2', 10],
    ]);
    const turn = view.turnsById.get(T1)!;
    expect(turnState(turn)).toBe('complete');
    expect(turn.erasedPositions).toEqual(CONTENT);
    expect(turn.text).toBe('');
    expect(turn.attribution.caller).toBe('');
    expect(turn.steps).toEqual([]);
    expect(turn.questionRequests).toEqual([]);
    expect(turn.questionResponses).toEqual([]);
    expect(turn.terminal).toMatchObject({
      kind: 'turn_complete',
      position: 8,
      payload: { text: '' },
    });
    expect(JSON.stringify(snapshot(view))).not.toContain('555-0100');
    // The erased message keeps no idempotency key; the other turn's stays.
    expect([...view.turnIdsByKey]).toEqual([['k2', 't2']]);
  });

  it('shows an erased message and answer as erased, and leaves the turn out of the history', () => {
    const view = foldJournal(erased(original, [0, 8]));
    const transcript = transcriptTurns(view);
    expect(transcript[0]).toMatchObject({
      turnId: T1,
      user: { text: ERASED_TEXT },
      reply: ERASED_TEXT,
    });
    expect(transcript[1]).toMatchObject({ user: { text: 'thanks' }, reply: 'You are welcome.' });
    expect(turnReplyOf('c', view.turnsById.get(T1)!)).toMatchObject({
      status: 'complete',
      reply: ERASED_TEXT,
    });
    // The history of a turn whose message came next, dispatched with no window.
    const next = { ...view.turnsById.get(T1)!, messagePosition: view.head, dispatches: [] };
    const history = committedHistory(view, next);
    expect(history).toHaveLength(2);
    expect(JSON.stringify(history)).toContain('thanks');
    expect(JSON.stringify(history)).not.toContain('555-0100');
  });

  it('leaves a gap for an erased step: the turn keeps its other steps', () => {
    const turn = foldJournal(erased(original, [4])).turnsById.get(T1)!;
    expect(turn.steps.map((s) => s.position)).toEqual([3]);
    expect(turn.text).toBe('my number is 555-0100');
    expect(turnState(turn)).toBe('complete');
  });

  it.each([
    ['every content entry', CONTENT],
    ['the message alone', [0]],
    ['the answer alone', [8]],
    ['a tool result', [4]],
  ])('gives the same view extended across an erasure of %s as a fresh fold', (_name, positions) => {
    const after = erased(original, positions);
    const fresh = foldJournal(after);
    // A view folded before the erasure held the content; the records amend it.
    const before = foldJournal(original);
    const extended = applyEntries(before, after.slice(original.length));
    expect(snapshot(extended)).toEqual(snapshot(fresh));
    // And a view folded before the erasure up to 3, then brought up to the erased journal's
    // head in one read (as journal-views.ts refreshes), as well.
    const partial = foldJournal(original.slice(0, 3));
    expect(snapshot(applyEntries(partial, after.slice(3)))).toEqual(snapshot(fresh));
  });

  it('still folds a repair excision as a gap', () => {
    const repaired = original.map((e) =>
      e.position === 4 ? { position: 4, kind: '', payload: new Uint8Array(0), excised: true } : e,
    );
    const turn = foldJournal(repaired).turnsById.get(T1)!;
    expect(turn.steps.map((s) => s.position)).toEqual([3]);
    expect(turn.erasedPositions).toBeUndefined();
  });
});
