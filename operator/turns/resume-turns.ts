/**
 * The shell that resumes a conversation's interrupted turns without any request
 * (docs/turns.md, "Resuming interrupted turns"; the plan is `planResume`): claim the
 * conversation as a turn does (this replica's lock, then its Lease, so only the holder
 * resumes and every append is fenced), read the view, arm the approval-expiry timer for
 * what it waits on, then commit and run what the plan finds, until nothing is left.
 */
import type { Logger } from 'pino';
import type { Conversation } from '../api/v1alpha1/conversation-types';
import type { ExpiryTimers } from './expiry-timers';
import type { JournalViews } from './journal-views';
import { planResume } from './plan-resume';
import type { TurnClaims } from './turn-claims';
import type { TurnRunner } from './turn-runner';
import type { TurnStatus } from './turn-service';

/** What the resume shell uses of the coordinator. */
export interface ResumeParts {
  readonly claims: TurnClaims;
  readonly runner: TurnRunner;
  readonly views: JournalViews;
  readonly expiries: ExpiryTimers;
  readonly logger: Logger;
  readonly nowMs: () => number;
  readonly approvalTtlMs: number;
  /** POLYCHROME_HISTORY_TOKENS (history-window.ts). */
  readonly historyTokens: number;
}

/** How one resumed turn ended: its reply's status, or `orphaned` when it was interrupted again. */
export type ResumedOutcome = TurnStatus | 'orphaned';

/** One interrupted turn run again, and how it ended. */
export interface ResumedTurn {
  readonly turnId: string;
  readonly attempt: number;
  readonly outcome: ResumedOutcome;
}

/**
 * Resumes `conversation`'s interrupted turns, oldest first, and commits a due approval
 * expiry, under its lease; returns the turns run again. A turn interrupted again (the
 * harness unreachable, the lease lost) ends the round: it is an orphan for the next claim
 * or the next holder, its attempts counted as always.
 *
 * @throws AppError `unavailable` when another replica holds the lease (it resumes them)
 *   or this one is shutting down; the view's errors (a rolled-back journal).
 */
export function resumeTurns(
  parts: ResumeParts,
  conversation: Conversation,
  signal: AbortSignal,
): Promise<ResumedTurn[]> {
  const uid = conversation.metadata.uid ?? '';
  const { runner, views } = parts;
  return parts.claims.run(conversation, signal, async (lease) => {
    let view = await runner.startView(conversation, lease, signal);
    // Rebuilds the approval-expiry timer after a restart or a take-over.
    parts.expiries.follow(uid, view);
    const resumed: ResumedTurn[] = [];
    for (;;) {
      const current = runner.fresh(conversation);
      const step = planResume({
        view,
        conversation: current,
        lease,
        nowMs: parts.nowMs(),
        approvalTtlMs: parts.approvalTtlMs,
        deploymentHistoryTokens: parts.historyTokens,
      });
      if (step.kind === 'none') return resumed;
      if (step.kind === 'expire') {
        await runner.expire(current, lease, step.due, view);
      } else {
        const { attempt } = step;
        const { turnId } = step.turn;
        parts.logger.info(
          { conversation: uid, turn: turnId, attempt },
          'resuming an interrupted turn; no request asked for it',
        );
        await runner.commit(uid, lease, step.events);
        try {
          const reply = await runner.drive(current, lease, turnId);
          resumed.push({ turnId, attempt, outcome: reply.status });
        } catch (error) {
          parts.logger.warn(
            { err: error, conversation: uid, turn: turnId, attempt },
            'the resumed turn was interrupted again; it stays an orphan',
          );
          resumed.push({ turnId, attempt, outcome: 'orphaned' });
          return resumed;
        }
      }
      view = views.cached(uid) ?? (await views.refresh(uid, signal));
    }
  });
}
