/**
 * Interrupted turns (docs/turns.md, "Resuming interrupted turns"): which turn runs again,
 * with what dispatch, and whether a conversation is worth a look at all. Pure.
 *
 * One rule decides which turn is run again: the oldest orphan ({@link oldestOrphan}, a
 * dispatch with nothing settling or pausing it after). A posted message recovers it before
 * its own turn (plan-message.ts), and the control plane resumes it by itself when it comes
 * to hold the conversation (turn-resumer.ts): both take {@link recoveryOf}. A quarantined
 * turn is no orphan and is never run again by either; a turn whose attempts ran out runs
 * once more and settles as the settle plan says (plan-settle.ts).
 */
import type { Conversation } from '../api/v1alpha1/conversation-types';
import type { JournalView, TurnView } from './journal-view-types';
import { dispatchOf, rosterOfTurn, type ClaimedLease, type PlannedEvent } from './plan-common';
import { dueExpiry, type ApprovalDeadline } from './plan-expiry';
import { nextAttempt, oldestOrphan } from './turn-state';
import { nextHistory, type DeploymentHistory } from './history-window';

/** An orphan to run again: one `turn_dispatched` (`resumed`) under its original id. */
export interface Recovery {
  readonly turn: TurnView;
  /** The attempt the dispatch opens. */
  readonly attempt: number;
  readonly events: readonly PlannedEvent[];
}

/** What a recovery is planned from. */
export interface RecoveryInput extends DeploymentHistory {
  readonly view: JournalView;
  readonly conversation: Conversation;
  readonly lease: ClaimedLease;
  readonly nowMs: number;
}

/**
 * The orphan to run again first, if any, and its dispatch: attempt + 1, the original
 * message's position (the input is never appended twice), the original caller's
 * attribution, `resumed` set, and a fresh history window (history-window.ts).
 */
export function recoveryOf(input: RecoveryInput): Recovery | undefined {
  const { view, conversation, deploymentHistoryTokens } = input;
  const orphan = oldestOrphan(view);
  if (orphan === undefined) return undefined;
  const { turnId, messagePosition } = orphan;
  const history = nextHistory(view, conversation, messagePosition, deploymentHistoryTokens);
  const attempt = {
    turnId,
    attempt: nextAttempt(orphan),
    messagePosition,
    ...history,
    resumed: true,
    agentRosterSha256: rosterOfTurn(orphan),
  };
  return {
    turn: orphan,
    attempt: attempt.attempt,
    events: [dispatchOf(attempt, input.lease, orphan.attribution, input.nowMs)],
  };
}

export interface ResumeInput extends RecoveryInput {
  readonly approvalTtlMs: number;
}

/** What the control plane does by itself for a conversation it holds; repeated until `none`. */
export type ResumeStep =
  /** Nothing interrupted, nothing due. */
  | { readonly kind: 'none' }
  /** An approval's time ran out: commit its expiry and run the turn on (as plan-message.ts). */
  | { readonly kind: 'expire'; readonly due: ApprovalDeadline }
  /** Run an interrupted turn again. */
  | ({ readonly kind: 'recover' } & Recovery);

/**
 * The next thing to do for a conversation without any request: a due expiry first (the
 * order a posted message keeps too), then the oldest orphan, else nothing.
 */
export function planResume(input: ResumeInput): ResumeStep {
  const due = dueExpiry(input.view, input.nowMs, input.approvalTtlMs);
  if (due !== undefined) return { kind: 'expire', due };
  const recovery = recoveryOf(input);
  return recovery === undefined ? { kind: 'none' } : { kind: 'recover', ...recovery };
}

/**
 * Whether a conversation may hold an interrupted turn or a pending approval, from its
 * status and its journal's head (one cheap Head call), so that a replica taking many
 * conversations reads only those journals. True when the status names a turn in flight
 * or paused (`turns.current`, or an older writer's `currentTurn`), or when the journal
 * has grown past the checkpoint the status records: every batch that settles or pauses a
 * turn moves `status.journal.head` to its own end, so a dispatch that nothing settled
 * since lies beyond it. A status write that lagged its batch only costs one read. Never
 * for a conversation being deleted.
 */
export function mayNeedResume(conversation: Conversation, journalHead: number): boolean {
  // Being deleted: its sandbox goes, and it takes no turn (plan-message.ts refuses too).
  if (conversation.metadata.deletionTimestamp !== undefined) return false;
  const status = conversation.status;
  if (status?.turns?.current !== undefined) return true;
  if (status?.currentTurn !== undefined && status.currentTurn !== '') return true;
  return journalHead > (status?.journal?.head ?? 0);
}
