/**
 * The control plane's summaries and replay's check of them agree (docs/replay.md,
 * "Summaries"): a conversation run by the real turn machine (machine-journal.ts) is given,
 * after each turn, whatever summary the control plane's own plan makes (summary-plan.ts
 * over its own journal view, as the summarizer commits it), and each dispatch the history
 * and summary the control plane's own rule picks (history-window.ts `nextHistory`), with
 * erasures in between. Replay must then find every summary and every turn ok. The two sides
 * live in different planes and share no code but the request bytes, so this is where a
 * difference in the rule would show.
 */
import { describe, expect, it } from '@jest/globals';
import { decodePayload } from '../../common/event-kinds';
import { summaryRequestSha256 } from '../../common/model/summary-request';
import { requestIds } from '../../common/request-ids';
import { nodeEd25519Verifier } from '../../harness/crypto/node-ed25519';
import { replayJournal } from '../../harness/turn/replay';
import type { Conversation } from '../../operator/api/v1alpha1/conversation-types';
import { nextHistory } from '../../operator/turns/history-window';
import { foldJournal } from '../../operator/turns/journal-view';
import { planSummary } from '../../operator/turns/summary-plan';
import { MachineJournal, SUMMARY_MODEL } from './machine-journal';

/** A conversation whose agent sets no budget: the deployment's applies. */
const conversation = { spec: {} } as Conversation;
const BUDGET = 600;

/** One turn under the control plane's rule, then the summary its plan makes, if any. */
function step(j: MachineJournal, text: string): { summary?: number } {
  const before = foldJournal(j.journalEntries());
  const plan = nextHistory(before, conversation, j.entries.length, BUDGET);
  j.turn(text, plan);
  const view = foldJournal(j.journalEntries());
  const task = planSummary(view, BUDGET);
  if (task === undefined) return {};
  const summary = j.recordSummary({
    fromPosition: task.fromPosition,
    toPosition: task.toPosition,
    previousPosition: task.previous?.position ?? 0,
    requestSha256: summaryRequestSha256(task.input, SUMMARY_MODEL),
    text: `summary up to ${String(task.toPosition)}: ${task.input.turns.map((t) => t.user.slice(0, 12)).join('; ')}`,
  });
  return { summary };
}

function message(i: number): string {
  return `message ${String(i)}: ${'about the weather in Lyon and elsewhere, '.repeat(1 + (i % 4))}`;
}

describe('summaries the control plane makes, replayed', () => {
  it('every summary follows from its turns and every turn given one replays, across erasures', () => {
    const j = new MachineJournal();
    const summaries: number[] = [];
    let erased = -1;
    for (let i = 0; i < 40; i++) {
      const made = step(j, message(i));
      if (made.summary !== undefined) summaries.push(made.summary);
      if (i === 14) {
        // The answer of the turn just settled: it leaves history, and no summary covers it.
        j.erase(
          j.entries.findLastIndex((e) => e.kind === 'turn_complete'),
          `turn-${String(i + 1)}`,
        );
      }
      if (i >= 25 && erased === -1 && made.summary === undefined) {
        // The newest summary, which the turn just run was given: the next one extends the
        // one before it.
        erased = summaries.at(-1) ?? -1;
        j.erase(erased);
      }
    }
    const result = replayJournal(j.entries, { ids: requestIds, verifier: nodeEd25519Verifier });
    expect(result.summaries.length).toBeGreaterThanOrEqual(4);
    expect(result.summaries.some((s) => s.previousPosition !== 0)).toBe(true);
    expect(result.summaries.map((s) => s.position)).toEqual(summaries);
    expect(result.summaries.filter((s) => s.status !== 'ok')).toEqual([
      expect.objectContaining({ position: erased, status: 'erased' }),
    ]);
    // The summary after the erased one extends the one before it.
    const after = result.summaries.find((s) => s.position > erased);
    const before = result.summaries.filter((s) => s.position < erased).at(-1);
    expect(after?.previousPosition).toBe(before?.position);
    // The turn whose answer was erased is inside a later summary's range, and not among its turns.
    const erasedTurn = j.entries.findIndex(
      (e) =>
        e.kind === 'message_received' &&
        decodePayload('message_received', e.payload).turnId === 'turn-15',
    );
    const spanning = result.summaries.find(
      (s) => s.status === 'ok' && s.fromPosition < erasedTurn && s.toPosition > erasedTurn,
    );
    expect(spanning?.turns).not.toContain(erasedTurn);
    // Turns were given summaries; those given the erased one cannot be checked, and say so.
    const given = j.entries.filter(
      (e) =>
        e.kind === 'turn_dispatched' &&
        decodePayload('turn_dispatched', e.payload).summaryPosition !== 0,
    );
    expect(given.length).toBeGreaterThan(10);
    const unchecked = result.turns
      .flatMap((t) => t.unchecked ?? [])
      .filter((u) => u.what.includes('summary'));
    expect(unchecked.length).toBeGreaterThan(0);
    for (const u of unchecked) {
      expect(u.erasedPosition).toBe(erased);
      expect(u.what).toBe(
        `the attempt was given the summary at position ${String(erased)}, erased since: its requests cannot be checked`,
      );
    }
    // Every turn replays, the one whose answer was erased too: its erased entry is listed as
    // not checkable (docs/replay.md, "Erased entries").
    expect(result.turns.filter((t) => !t.ok).map((t) => t.turnId)).toEqual([]);
    expect(result.ok).toBe(true);
  });
});
