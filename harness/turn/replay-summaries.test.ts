/**
 * Replay of journals with summaries (docs/replay.md, "Summaries"): the turns are run by the
 * real turn machine (test/support/machine-journal.ts), each summary's digest is made by the
 * control plane's own function over the turns the test names.
 */
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from '@jest/globals';
import { decodePayload, encodePayload } from '../../common/event-kinds';
import { isAppError } from '../../common/errors';
import { requestIds } from '../../common/request-ids';
import { MachineJournal } from '../../test/support/machine-journal';
import { nodeEd25519Signer, nodeEd25519Verifier } from '../crypto/node-ed25519';
import type { ReplayEntry } from './journal-turns';
import { replayJournal } from './replay';
import type { JournalReplay } from './replay-verdict';
import { ScriptedProvider } from '../model/scripted-provider';
import { builtinToolRunner } from '../tools/builtin-tools';
import { liveWhatIf } from './live';
import { systemWithSummary } from './summary-context';
import { whatIf } from './what-if';

/**
 * Six turns: a summary of the first two, a turn given it, a summary extending it with the
 * next two, a turn given that one.
 */
function journal() {
  const j = new MachineJournal();
  const t1 = j.turn('my name is Ada');
  const t2 = j.turn('I live in Lyon');
  const t3 = j.turn('I like tea');
  const s1 = j.summary({ turns: [t1, t2], text: 'The user is Ada, from Lyon.' });
  const t4 = j.turn('what is my name?', { historyFrom: t3, summaryPosition: s1 });
  const t5 = j.turn('and my city?', { historyFrom: t3, summaryPosition: s1 });
  const s2 = j.summary({
    previousPosition: s1,
    turns: [t3, t4],
    text: 'The user is Ada, from Lyon; she likes tea.',
  });
  const t6 = j.turn('what do I drink?', { historyFrom: t5, summaryPosition: s2 });
  return { j, t1, t2, t3, t4, t5, t6, s1, s2 };
}

function replay(entries: readonly ReplayEntry[]): JournalReplay {
  return replayJournal(entries, { ids: requestIds, verifier: nodeEd25519Verifier });
}

/** `entries` with the `summary` at `position` changed by `edit`. */
function withSummary(
  entries: readonly ReplayEntry[],
  position: number,
  edit: (s: ReturnType<typeof decodePayload<'summary'>>) => void,
): ReplayEntry[] {
  return entries.map((entry) => {
    if (entry.position !== position) return entry;
    const payload = decodePayload('summary', entry.payload);
    edit(payload);
    return { ...entry, payload: encodePayload('summary', payload) };
  });
}

describe('replay of a journal with summaries', () => {
  it('replays every turn in full, given the summary its dispatch names, and checks each summary', () => {
    const { j, t1, t3, t4, s1, s2 } = journal();
    const result = replay(j.entries);
    expect(result.divergence).toBeUndefined();
    expect(result.ok).toBe(true);
    expect(result.turns.map((t) => [t.mode, t.ok])).toEqual(Array(6).fill(['full', true]));
    expect(result.summaries).toEqual([
      {
        position: s1,
        status: 'ok',
        fromPosition: t1,
        toPosition: j.entries.findIndex((e, i) => i > t1 && e.kind === 'message_received'),
        previousPosition: 0,
        turns: [t1, expect.any(Number)],
      },
      {
        position: s2,
        status: 'ok',
        fromPosition: t1,
        toPosition: t4,
        previousPosition: s1,
        turns: [t3, t4],
      },
    ]);
  });

  it('gives an attempt the summary text: a changed text no longer makes the recorded request', () => {
    const { j, s1, s2 } = journal();
    const result = replay(withSummary(j.entries, s1, (s) => (s.text = 'The user is Bob.')));
    expect(result.ok).toBe(false);
    // The first turn given the summary diverges at its first model call.
    expect(result.divergence).toMatchObject({ turnId: 'turn-4', step: 1 });
    expect(result.divergence?.expected).toContain('request_sha256');
    // The summary itself still follows from its turns; the one that carries its text does not.
    expect(result.summaries.map((s) => [s.position, s.status])).toEqual([
      [s1, 'ok'],
      [s2, 'diverged'],
    ]);
    expect(result.summaries[1]?.problem).toContain(
      'its request does not follow from the turns it covers',
    );
  });

  it('finds a summary whose covered turns do not give its request digest, naming its position', () => {
    const { j, t1, s1 } = journal();
    // It claims to cover only the first turn: the request of that turn alone is another one.
    const result = replay(withSummary(j.entries, s1, (s) => (s.toPosition = t1)));
    expect(result.ok).toBe(false);
    expect(result.divergence).toBeUndefined();
    const verdict = result.summaries[0];
    expect(verdict).toMatchObject({ position: s1, status: 'diverged', turns: [t1] });
    expect(verdict?.problem).toContain('its request does not follow from the turns it covers');
    expect(verdict?.problem).toContain(`the turns at ${String(t1)} `);
  });

  it('finds a to_position past the last turn it covers, though the request is the same', () => {
    const { j, t2, s1 } = journal();
    const result = replay(withSummary(j.entries, s1, (s) => (s.toPosition = t2 + 1)));
    expect(result.ok).toBe(false);
    expect(result.summaries[0]).toMatchObject({ position: s1, status: 'diverged' });
    expect(result.summaries[0]?.problem).toBe(
      `to_position ${String(t2 + 1)} should be ${String(t2)}, the message position of the last turn it covers`,
    );
  });

  it('finds a changed request digest, model or max_tokens', () => {
    const { j, s1 } = journal();
    for (const edit of [
      (s: { requestSha256: Buffer }) => (s.requestSha256 = Buffer.alloc(32, 1)),
      (s: { model: string }) => (s.model = 'another-model'),
      (s: { maxTokens: number }) => (s.maxTokens = 10),
    ]) {
      const result = replay(withSummary(j.entries, s1, edit));
      expect(result.ok).toBe(false);
      expect(result.summaries[0]).toMatchObject({ position: s1, status: 'diverged' });
    }
  });

  it('finds a from_position or previous_position that does not follow', () => {
    const { j, t2, s1, s2 } = journal();
    const from = replay(withSummary(j.entries, s1, (s) => (s.fromPosition = t2)));
    expect(from.ok).toBe(false);
    expect(from.summaries[0]?.problem).toContain(`from_position ${String(t2)} should be 0`);
    const none = replay(withSummary(j.entries, s2, (s) => (s.previousPosition = 0)));
    expect(none.ok).toBe(false);
    expect(none.summaries[1]?.problem).toContain(
      `extends no summary (previous_position 0), but the summary at position ${String(s1)}`,
    );
    const notOne = replay(withSummary(j.entries, s2, (s) => (s.previousPosition = t2)));
    expect(notOne.summaries[1]?.problem).toContain(
      `previous_position ${String(t2)} is not a summary`,
    );
  });

  it('finds a dispatch naming a summary the journal does not hold', () => {
    const j = new MachineJournal();
    j.turn('hello');
    j.turn('again', { summaryPosition: 1 });
    const result = replay(j.entries);
    expect(result.ok).toBe(false);
    expect(result.divergence).toMatchObject({ turnId: 'turn-2', step: 0 });
    expect(result.divergence?.expected).toContain('a summary at position 1');
  });

  it('skips an erased summary and reports the attempts given it as not checkable', () => {
    const { j, s1, s2 } = journal();
    j.erase(s1);
    const result = replay(j.entries);
    expect(result.ok).toBe(true);
    expect(result.summaries.map((s) => [s.position, s.status])).toEqual([
      [s1, 'erased'],
      [s2, 'unchecked'],
    ]);
    expect(result.summaries[1]?.problem).toBe(
      `cannot be checked: the summary it extends, at position ${String(s1)}, was erased`,
    );
    const given = result.turns.filter((t) => t.unchecked !== undefined);
    const erasedSummary = `the attempt was given the summary at position ${String(s1)}, erased since: its requests cannot be checked`;
    expect(
      given.map((t) => [t.turnId, t.ok, t.unchecked?.[0]?.erasedPosition, t.unchecked?.[0]?.what]),
    ).toEqual([
      ['turn-4', true, s1, erasedSummary],
      ['turn-5', true, s1, erasedSummary],
    ]);
    expect(result.turns.find((t) => t.turnId === 'turn-6')?.unchecked).toBeUndefined();
  });

  it('cannot check a summary whose covered answer was erased after it, and does not fail it', () => {
    const { j, t2, s1 } = journal();
    const answer = j.entries.findIndex((e, i) => i > t2 && e.kind === 'turn_complete');
    j.erase(answer, 'turn-2');
    const result = replay(j.entries);
    expect(result.summaries[0]).toMatchObject({ position: s1, status: 'unchecked' });
    expect(result.summaries[0]?.problem).toBe(
      `cannot be checked: the answer of the turn at position ${String(t2)}, which it covers, was erased since`,
    );
  });

  it('leaves out of a summary a turn erased before it', () => {
    const j = new MachineJournal();
    const t1 = j.turn('secret');
    const t2 = j.turn('public');
    j.erase(t1, 'turn-1');
    const s = j.summary({ turns: [t2], text: 'public' });
    const result = replay(j.entries);
    expect(result.summaries).toEqual([
      expect.objectContaining({ position: s, status: 'ok', turns: [t2], fromPosition: t2 }),
    ]);
  });
});

describe('replay of the summary vectors (docs/journal-vectors.json, `summary`)', () => {
  it('finds that each pinned summary follows from the turns it covers', () => {
    const vectors = JSON.parse(
      readFileSync(join(__dirname, '..', '..', 'docs', 'journal-vectors.json'), 'utf8'),
    ) as { summary: { leaves: { position: number; kind: string; payloadHex: string }[] } };
    const entries = vectors.summary.leaves.map((l) => ({
      position: l.position,
      kind: l.kind,
      payload: new Uint8Array(Buffer.from(l.payloadHex, 'hex')),
    }));
    const result = replay(entries);
    expect(result.summaries).toEqual([
      {
        position: 4,
        status: 'ok',
        fromPosition: 0,
        toPosition: 0,
        previousPosition: 0,
        turns: [0],
      },
      {
        position: 10,
        status: 'ok',
        fromPosition: 0,
        toPosition: 6,
        previousPosition: 4,
        turns: [6],
      },
    ]);
    expect(result.ok).toBe(true);
  });
});

describe('what-if with a changed summary', () => {
  const options = () => ({
    ids: requestIds,
    verifier: nodeEd25519Verifier,
    resigner: nodeEd25519Signer(randomBytes(32)),
  });

  it('gives every attempt that used the summary the new text: the first one departs at its request', () => {
    const { j, s1, s2 } = journal();
    const report = whatIf(
      j.entries,
      { kind: 'summary', position: s1, text: 'The user is Bob, from Paris.' },
      options(),
    );
    expect(report.recorded.ok).toBe(true);
    expect(report.divergence).toMatchObject({ turnId: 'turn-4', step: 1 });
    expect(report.needsModel).toBe(true);
    expect(report.recordedAfter).toEqual([
      expect.objectContaining({ type: 'answer', text: 're: what is my name?' }),
    ]);
    // Both turns given it depart; those before it and the one given the next summary do not.
    expect(report.changed.turns.map((t) => t.ok)).toEqual([true, true, true, false, false, true]);
    // The summary that extends it no longer follows from it.
    expect(report.changed.summaries.map((s) => [s.position, s.status])).toEqual([
      [s1, 'ok'],
      [s2, 'diverged'],
    ]);
  });

  it('--live: the scratch run from the departure sends the model the new summary after the system prompt', async () => {
    const { j, s1 } = journal();
    const model = new ScriptedProvider({ replies: [{ text: 'You are Bob.' }] });
    const run = await liveWhatIf(
      j.entries,
      { kind: 'summary', position: s1, text: 'The user is Bob, from Paris.' },
      {
        ...options(),
        modelFor: () => model,
        tools: builtinToolRunner,
        runnable: new Set(),
        clock: { nowMs: () => 1_000 },
      },
    );
    expect(run.live).toMatchObject({
      turnId: 'turn-4',
      outcome: 'completed',
      text: 'You are Bob.',
    });
    expect(model.requests.map((r) => r.system)).toEqual([
      systemWithSummary('You are a test agent.', 'The user is Bob, from Paris.'),
    ]);
  });

  it('the same text alters nothing', () => {
    const { j, s1 } = journal();
    const report = whatIf(
      j.entries,
      { kind: 'summary', position: s1, text: 'The user is Ada, from Lyon.' },
      options(),
    );
    expect(report.divergence).toBeUndefined();
    expect(report.changed.ok).toBe(true);
  });

  it('refuses a position that is not a summary, naming the summaries', () => {
    const { j, t1, s1, s2 } = journal();
    let error: unknown;
    try {
      whatIf(j.entries, { kind: 'summary', position: t1, text: 'x' }, options());
    } catch (caught) {
      error = caught;
    }
    expect(isAppError(error) && error.code).toBe('invalid_argument');
    expect((error as Error).message).toContain(
      `the journal's summary positions are ${String(s1)}, ${String(s2)}`,
    );
  });
});
