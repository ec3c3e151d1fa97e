/**
 * When the control plane makes a summary, and of what (docs/turns.md, "Summaries"). Pure;
 * the summarizer (summarizer.ts) is its shell.
 *
 * A summary is made ahead of need, after a turn settles, never on a turn's path: when the
 * turns in history that the newest summary does not cover (and that summary itself) pass
 * three quarters of the history budget, a new summary takes in the oldest of them, all but
 * the newest that fit a quarter of the budget. So the window of a dispatch
 * (history-window.ts `nextHistory`) holds between a quarter and three quarters of the
 * budget in full turns, plus the summary, and a conversation makes one summary for about
 * every half budget of conversation, each request bounded by the budget.
 *
 * A summary extends the newest one (its request carries that text) and covers a prefix of
 * the conversation with no gap: it stops before the oldest turn that is not settled, so no
 * turn can complete later inside a range already summarized. Its request is bounded by the
 * budget too: with more to take in, it takes the oldest turns that fit, and the next
 * summaries catch up.
 */
import {
  summaryRequestSha256,
  type SummarizedTurn,
  type SummaryInput,
  type SummaryModel,
} from '../../common/model/summary-request';
import { estimatedTokens, historyReply } from './history-window';
import type { JournalView, SummaryRecord, TurnView } from './journal-view-types';

/** A summary to make. */
export interface SummaryTask {
  /** The summary it extends; absent when it summarizes from the start. */
  readonly previous: SummaryRecord | undefined;
  readonly fromPosition: number;
  readonly toPosition: number;
  readonly input: SummaryInput;
}

/** The share of the budget the uncovered history may reach before a summary is made. */
const SUMMARIZE_ABOVE = 3 / 4;
/** The share of the budget left out of a new summary: the newest turns, kept in full. */
const KEEP_IN_FULL = 1 / 4;

/** The summary to make now for a conversation with history budget `budgetTokens`, if any. */
export function planSummary(view: JournalView, budgetTokens: number): SummaryTask | undefined {
  const previous = newestSummary(view);
  const oldestOpen = view.openTurns[0]?.messagePosition ?? Number.POSITIVE_INFINITY;
  let total = previous === undefined ? 0 : estimatedTokens(previous.text);
  let kept = 0;
  let toPosition: number | undefined;
  for (const { turn, tokens } of uncovered(view, previous, Number.POSITIVE_INFINITY)) {
    total += tokens;
    if (kept <= budgetTokens * KEEP_IN_FULL) {
      kept += tokens;
      if (kept <= budgetTokens * KEEP_IN_FULL) continue;
    }
    // The newest turn past the quarter kept in full, before the oldest open turn.
    if (toPosition === undefined && turn.messagePosition < oldestOpen) {
      toPosition = turn.messagePosition;
    }
  }
  if (total <= budgetTokens * SUMMARIZE_ABOVE || toPosition === undefined) return undefined;
  return coverTo(view, previous, boundedTo(view, previous, toPosition, budgetTokens));
}

/**
 * Where a summary up to `toPosition` must stop so that its request stays within the budget:
 * the previous summary and the oldest turns that fit with it, at least one. A conversation
 * with more to summarize (summaries turned on late, or made again after an erasure) catches
 * up over several summaries, one after each settled turn.
 */
function boundedTo(
  view: JournalView,
  previous: SummaryRecord | undefined,
  toPosition: number,
  budgetTokens: number,
): number {
  const oldestFirst = [...uncovered(view, previous, toPosition)].reverse();
  let used = previous === undefined ? 0 : estimatedTokens(previous.text);
  let last = oldestFirst[0]?.turn.messagePosition ?? toPosition;
  for (const { turn, tokens } of oldestFirst) {
    used += tokens;
    if (used > budgetTokens) break;
    last = turn.messagePosition;
  }
  return last;
}

/**
 * True when `task`, planned from an older view, may still be committed after `view`: the
 * summary it extends is still the newest, and the turns it covers still read the same (none
 * erased since). Turns that completed meanwhile do not matter: they are after it.
 */
export function stillValid(view: JournalView, task: SummaryTask, model: SummaryModel): boolean {
  if (newestSummary(view)?.position !== task.previous?.position) return false;
  const again = coverTo(view, task.previous, task.toPosition);
  if (again === undefined || again.fromPosition !== task.fromPosition) return false;
  const digest = (t: SummaryTask): string =>
    Buffer.from(summaryRequestSha256(t.input, model)).toString('hex');
  return digest(again) === digest(task);
}

/** The summary that extends `previous` with every turn in history up to `toPosition`. */
function coverTo(
  view: JournalView,
  previous: SummaryRecord | undefined,
  toPosition: number,
): SummaryTask | undefined {
  const covered = [...uncovered(view, previous, toPosition)].reverse();
  const first = covered[0];
  if (first === undefined) return undefined;
  const turns: SummarizedTurn[] = covered.map(({ turn, reply }) => ({
    user: turn.text,
    assistant: reply,
  }));
  return {
    previous,
    fromPosition: previous?.fromPosition ?? first.turn.messagePosition,
    toPosition,
    input: previous === undefined ? { turns } : { previous: previous.text, turns },
  };
}

/** The turns in history after `previous` and up to `toPosition`, newest first. */
function* uncovered(
  view: JournalView,
  previous: SummaryRecord | undefined,
  toPosition: number,
): Generator<{ readonly turn: TurnView; readonly reply: string; readonly tokens: number }> {
  for (const turn of view.newestTurns()) {
    if (previous !== undefined && turn.messagePosition <= previous.toPosition) return;
    if (turn.messagePosition > toPosition) continue;
    const reply = historyReply(turn);
    if (reply === undefined) continue;
    yield { turn, reply, tokens: estimatedTokens(turn.text) + estimatedTokens(reply) };
  }
}

/** The newest summary that is not erased. */
export function newestSummary(view: JournalView): SummaryRecord | undefined {
  for (const summary of view.newestSummaries()) return summary;
  return undefined;
}
