/**
 * The resumer (docs/turns.md, "Resuming interrupted turns"): when this replica comes to
 * hold a conversation's Lease (it acquires it, at start or later, or takes it over from a
 * replica that died or was rolled), it looks whether the conversation has an interrupted
 * turn or a pending approval, and if so resumes it with no request (the coordinator's
 * `resume`, resume-turns.ts). It decides nothing itself: the status and the journal's head
 * say whether to look (`mayNeedResume`), the plan what to run (`planResume`).
 *
 * Looks run a few at a time (`concurrency`), one per conversation at a time; a look that
 * failed for a reason worth a retry (the state plane away, the resumed turn interrupted
 * again) is queued again after a growing delay, a few times. A conversation another
 * replica holds is left to it: only the holder resumes.
 */
import type { Logger } from 'pino';
import { isAppError, isRetryable } from '../../common/errors';
import { partitionOf } from '../../common/partition-name';
import type { Conversation } from '../api/v1alpha1/conversation-types';
import { mayNeedResume } from './plan-resume';
import type { ResumedOutcome, ResumedTurn } from './resume-turns';

export interface TurnResumerOptions {
  /** The coordinator's resume (it claims the conversation; only the holder gets it). */
  readonly resume: (uid: string, signal: AbortSignal) => Promise<ResumedTurn[]>;
  readonly conversations: { byUid(uid: string): Conversation | undefined };
  /** The state plane: only its journals' heads are read here. */
  readonly state: {
    head(partition: string, options: { signal: AbortSignal }): Promise<{ head: number }>;
  };
  readonly logger: Logger;
  /** Looks at once. @default 4 */
  readonly concurrency?: number;
  /** Tries of one conversation's look after failures worth a retry. @default 6 */
  readonly attempts?: number;
  /** First retry delay; doubles each time, at most 30 s. @default 1000 */
  readonly retryBaseMs?: number;
  /** Each resumed turn and how it ended (metrics). */
  readonly onResumed?: (outcome: ResumedOutcome) => void;
}

export class TurnResumer {
  private readonly queued: string[] = [];
  /** Conversations queued or being looked at, with the tries made so far. */
  private readonly pending = new Map<string, number>();
  private readonly timers = new Set<NodeJS.Timeout>();
  private readonly stopping = new AbortController();
  private running = 0;
  private readonly settledWaiters = new Set<() => void>();

  constructor(private readonly options: TurnResumerOptions) {}

  /** This replica came to hold `uid`'s Lease: look at it soon. */
  wake(uid: string): void {
    if (this.stopping.signal.aborted || this.pending.has(uid)) return;
    this.pending.set(uid, 0);
    this.queued.push(uid);
    this.pump();
  }

  /** Stops looking; looks in progress end with the coordinator's own shutdown. */
  close(): void {
    this.stopping.abort();
    for (const timer of this.timers) clearTimeout(timer);
    this.timers.clear();
    this.queued.length = 0;
  }

  /** Resolves when nothing is queued, waiting for a retry or being looked at (tests). */
  settled(): Promise<void> {
    if (this.pending.size === 0) return Promise.resolve();
    return new Promise((resolve) => this.settledWaiters.add(resolve));
  }

  private pump(): void {
    const limit = Math.max(1, this.options.concurrency ?? 4);
    while (this.running < limit && this.queued.length > 0) {
      const uid = this.queued.shift();
      if (uid === undefined) break;
      this.running += 1;
      void this.look(uid).finally(() => {
        this.running -= 1;
        this.pump();
      });
    }
  }

  private async look(uid: string): Promise<void> {
    const signal = this.stopping.signal;
    let retry = false;
    try {
      const conversation = this.options.conversations.byUid(uid);
      if (conversation === undefined) return;
      const { head } = await this.options.state.head(partitionOf(uid), { signal });
      if (!mayNeedResume(conversation, head)) return;
      const resumed = await this.options.resume(uid, signal);
      for (const turn of resumed) this.options.onResumed?.(turn.outcome);
      retry = resumed.at(-1)?.outcome === 'orphaned';
    } catch (error) {
      if (signal.aborted || heldElsewhere(error)) return;
      retry = isRetryable(error);
      this.options.logger.warn(
        { err: error, conversation: uid, retry },
        'looking for interrupted turns failed',
      );
    } finally {
      this.finish(uid, retry);
    }
  }

  private finish(uid: string, retry: boolean): void {
    const tries = (this.pending.get(uid) ?? 0) + 1;
    if (!retry || tries >= (this.options.attempts ?? 6) || this.stopping.signal.aborted) {
      this.pending.delete(uid);
      if (this.pending.size > 0) return;
      for (const wake of this.settledWaiters) wake();
      this.settledWaiters.clear();
      return;
    }
    this.pending.set(uid, tries);
    const delay = Math.min(30_000, (this.options.retryBaseMs ?? 1000) * 2 ** (tries - 1));
    const timer = setTimeout(() => {
      this.timers.delete(timer);
      this.queued.push(uid);
      this.pump();
    }, delay);
    timer.unref();
    this.timers.add(timer);
  }
}

/** The claim was refused because another replica holds the Lease (turn-claims.ts). */
function heldElsewhere(error: unknown): boolean {
  return isAppError(error) && error.code === 'unavailable' && error.details?.holder !== undefined;
}
