/**
 * The history window (docs/turns.md, "The history window"): which earlier turns a
 * dispatched attempt is given. Pure.
 *
 * The budget is in estimated tokens. Newest first, the complete turns that were dispatched
 * (the committed-turn filter, turn-projections.ts) are taken while they fit; the window
 * starts at the oldest one taken. Every `turn_dispatched` records the start it was given
 * (`history_from`), so what the harness received, and what replay rebuilds, is read from
 * the journal, never recomputed: a later change of budget or of this rule changes later
 * dispatches only. When every earlier turn fits, the start is 0 ("everything"), and the
 * event's bytes are those of a journal written before windows.
 *
 * Tokens are estimated, not counted (the model's tokenizer is the provider's): a message
 * costs its UTF-8 bytes / 4, rounded up, plus 4 for its role and framing. That
 * overestimates English text, and is exact enough to keep a request within a bound.
 */
import { isAnswerErased, isMessageErased } from './erased-entries';
import type { JournalView, TurnView } from './journal-view-types';
import type { Conversation } from '../api/v1alpha1/conversation-types';

/** The framing one history message costs beyond its text. */
const MESSAGE_OVERHEAD_TOKENS = 4;

/** A history message's estimated tokens: UTF-8 bytes / 4, rounded up, plus its framing. */
export function estimatedTokens(text: string): number {
  return Math.ceil(Buffer.byteLength(text, 'utf8') / 4) + MESSAGE_OVERHEAD_TOKENS;
}

/**
 * The reply a turn put into history, or `undefined` when it is not in history at all: not
 * complete, never dispatched, or its message or answer erased (erased-entries.ts: an erased
 * message or answer takes its turn out of the agent's history).
 */
export function historyReply(turn: TurnView): string | undefined {
  const terminal = turn.terminal;
  if (terminal?.kind !== 'turn_complete' || turn.dispatches.length === 0) return undefined;
  if (isMessageErased(turn) || isAnswerErased(turn)) return undefined;
  return terminal.payload.text;
}

/** What a plan that dispatches is told of the deployment. */
export interface DeploymentHistory {
  /** The history budget where the agent sets none (POLYCHROME_HISTORY_TOKENS). */
  readonly deploymentHistoryTokens: number;
}

/** The conversation's history budget: its agent's, else the deployment's. */
export function historyBudgetOf(conversation: Conversation, deploymentTokens: number): number {
  return conversation.spec.agent?.historyTokens ?? deploymentTokens;
}

/**
 * Where the history of the next attempt of the turn whose message is at `messagePosition`
 * starts, under the conversation's budget ({@link historyWindowStart}).
 */
export function nextHistoryFrom(
  view: JournalView,
  conversation: Conversation,
  messagePosition: number,
  deploymentTokens: number,
): number {
  const budget = historyBudgetOf(conversation, deploymentTokens);
  return historyWindowStart(view, messagePosition, budget);
}

/**
 * Where the history of an attempt of the turn whose message is at `messagePosition`
 * starts: the message position of the oldest turn in the window, 0 when every earlier
 * turn fits, or `messagePosition` itself when not even the newest one does (an empty
 * history). Reads only the window and the turns after it.
 */
export function historyWindowStart(
  view: JournalView,
  messagePosition: number,
  budgetTokens: number,
): number {
  let used = 0;
  let start = messagePosition;
  for (const earlier of view.newestTurns()) {
    if (earlier.messagePosition >= messagePosition) continue;
    const reply = historyReply(earlier);
    if (reply === undefined) continue;
    used += estimatedTokens(earlier.text) + estimatedTokens(reply);
    if (used > budgetTokens) return start;
    start = earlier.messagePosition;
  }
  return 0;
}
