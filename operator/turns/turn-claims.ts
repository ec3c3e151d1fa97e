/**
 * Claiming a conversation for one piece of turn work (docs/turns.md "One message", 2): a
 * per-conversation promise chain serializes callers in this replica (a caller that
 * disconnects while waiting leaves the queue), then the conversation's Lease gives one
 * writer across replicas.
 */
import { AppError } from '../../common/errors';
import { JournalFencedError } from '../../common/state-call-errors';
import type { Conversation } from '../api/v1alpha1/conversation-types';
import type { LeaseHandle, LeaseSource } from '../lease/lease-source';
import { isLeaseHandle } from '../lease/lease-source';

export interface TurnClaimsOptions {
  readonly leases: LeaseSource;
  readonly nowMs: () => number;
  /** Aborted on shutdown: no new claim starts. */
  readonly stopping: AbortSignal;
}

export class TurnClaims {
  private readonly locks = new Map<string, Promise<unknown>>();
  /** Waiters of {@link idle}, woken when the last lock goes. */
  private readonly idleWaiters = new Set<() => void>();

  constructor(private readonly options: TurnClaimsOptions) {}

  /** Whether work of the conversation runs or waits in this replica. */
  isBusy(uid: string): boolean {
    return this.locks.has(uid);
  }

  /** Resolves once no work runs or waits in this replica, or after `timeoutMs`. */
  async idle(timeoutMs: number): Promise<void> {
    if (this.locks.size === 0) return;
    let wake = (): void => undefined;
    const woken = new Promise<void>((resolve) => (wake = resolve));
    this.idleWaiters.add(wake);
    const timer = setTimeout(wake, timeoutMs);
    await woken;
    clearTimeout(timer);
    this.idleWaiters.delete(wake);
  }

  /**
   * Runs `work` holding this replica's lock and the conversation's lease. When the journal
   * fences `work` with a mark above the lease's token while the Lease still names this
   * replica (the Lease started over: deleted, or new after an upgrade), the lease is moved
   * past the mark ({@link LeaseSource.advancePast}) and `work` runs once more under it, as a
   * client's retry with the same idempotency key would; nothing of the fenced attempt was
   * written.
   *
   * @throws AppError `cancelled` when `signal` aborts while waiting; `unavailable` when
   *   this replica is shutting down, or another replica holds the lease (details:
   *   `holder`, `retryAfterMs`, and `forwardTo`: the holder, for the API to forward to).
   */
  async run<T>(
    conversation: Conversation,
    signal: AbortSignal,
    work: (lease: LeaseHandle) => Promise<T>,
  ): Promise<T> {
    const uid = conversation.metadata.uid ?? '';
    const previous = this.locks.get(uid) ?? Promise.resolve();
    let release = (): void => undefined;
    const mine = new Promise<void>((resolve) => {
      release = resolve;
    });
    const chained = previous.then(() => mine);
    this.locks.set(uid, chained);
    try {
      await waitOrAbort(previous, signal);
      if (this.options.stopping.aborted) {
        throw new AppError('unavailable', 'this replica is shutting down; retry on another', {
          details: { retryAfterMs: 1000 },
        });
      }
      const lease = await this.options.leases.tryAcquire({
        namespace: conversation.metadata.namespace ?? '',
        name: conversation.metadata.name ?? '',
        uid,
      });
      if (!isLeaseHandle(lease)) {
        // forwardTo names the holder; the API finds its Pod in the control plane's own
        // namespace, never in anything the Lease's namespace can write.
        throw new AppError(
          'unavailable',
          `replica ${lease.holder} holds conversation ${uid}; retry (the same idempotency key is safe)`,
          {
            details: {
              holder: lease.holder,
              retryAfterMs: Math.max(0, lease.retryAtMs - this.options.nowMs()),
              forwardTo: lease.holder,
            },
          },
        );
      }
      try {
        return await work(lease);
      } catch (err: unknown) {
        const highest = fencedAbove(err, lease.fencingToken);
        const advanced =
          highest === undefined
            ? undefined
            : await this.options.leases.advancePast?.(lease, highest);
        if (advanced === undefined) throw err;
        return await work(advanced);
      }
    } finally {
      release();
      if (this.locks.get(uid) === chained) this.locks.delete(uid);
      if (this.locks.size === 0) for (const wake of this.idleWaiters) wake();
    }
  }
}

/**
 * The journal's fencing mark when `err` (or an error it wraps) is the state plane's
 * refusal of a token below it, and the mark is above `token`; else undefined.
 */
function fencedAbove(err: unknown, token: number): number | undefined {
  for (let e: unknown = err, depth = 0; e instanceof Error && depth < 8; depth++) {
    if (e instanceof JournalFencedError) {
      const highest = e.highestFencingToken;
      return highest !== undefined && highest > token ? highest : undefined;
    }
    e = e.cause;
  }
  return undefined;
}

async function waitOrAbort(promise: Promise<unknown>, signal: AbortSignal): Promise<void> {
  if (signal.aborted) throw new AppError('cancelled', 'the request was cancelled');
  await new Promise<void>((resolve, reject) => {
    const onAbort = (): void =>
      reject(
        new AppError('cancelled', 'the request was cancelled while it waited for the conversation'),
      );
    signal.addEventListener('abort', onAbort, { once: true });
    const settle = (): void => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    };
    promise.then(settle, settle);
  });
}
