/**
 * A keyed work queue in the manner of client-go's: a key waits at most once in the queue,
 * is handed to one worker at a time (per-key serialization), and if it is added again while
 * a worker holds it, it is queued again when that worker is done. Failed keys come back
 * after an exponential backoff; timed requeues keep only the soonest timer per key.
 */

/** Options of {@link WorkQueue}. */
export interface WorkQueueOptions {
  /** First retry delay after a failure. @default 100 */
  readonly baseDelayMs?: number;
  /** Longest retry delay. @default 60_000 */
  readonly maxDelayMs?: number;
}

// setTimeout holds a signed 32-bit count of milliseconds (~24.8 days).
const MAX_TIMER_MS = 2 ** 31 - 1;

/** The work queue. */
export class WorkQueue {
  private readonly queue: string[] = [];
  private readonly dirty = new Set<string>();
  private readonly processing = new Set<string>();
  private readonly failures = new Map<string, number>();
  private readonly timers = new Map<string, { at: number; timer: NodeJS.Timeout }>();
  private readonly waiters: ((key: string | undefined) => void)[] = [];
  private shuttingDown = false;
  private readonly baseDelayMs: number;
  private readonly maxDelayMs: number;

  constructor(options: WorkQueueOptions = {}) {
    this.baseDelayMs = options.baseDelayMs ?? 100;
    this.maxDelayMs = options.maxDelayMs ?? 60_000;
  }

  /** Queues `key` unless it already waits. */
  add(key: string): void {
    if (this.shuttingDown || this.dirty.has(key)) return;
    this.dirty.add(key);
    if (this.processing.has(key)) return;
    const waiter = this.waiters.shift();
    if (waiter !== undefined) {
      this.dirty.delete(key);
      this.processing.add(key);
      waiter(key);
    } else {
      this.queue.push(key);
    }
  }

  /** Queues `key` after `delayMs`; an earlier pending timer for the key wins. */
  addAfter(key: string, delayMs: number): void {
    if (this.shuttingDown) return;
    if (delayMs <= 0) {
      this.add(key);
      return;
    }
    const at = Date.now() + delayMs;
    const existing = this.timers.get(key);
    if (existing !== undefined && existing.at <= at) return;
    if (existing !== undefined) clearTimeout(existing.timer);
    const timer = setTimeout(
      () => {
        this.timers.delete(key);
        this.add(key);
      },
      Math.min(delayMs, MAX_TIMER_MS),
    );
    timer.unref();
    this.timers.set(key, { at, timer });
  }

  /** Queues `key` after its backoff: base × 2^(failures so far), capped. */
  addRateLimited(key: string): number {
    const failures = this.failures.get(key) ?? 0;
    this.failures.set(key, failures + 1);
    const delay = Math.min(this.maxDelayMs, this.baseDelayMs * 2 ** Math.min(failures, 30));
    this.addAfter(key, delay);
    return delay;
  }

  /** Clears `key`'s failure count (after a successful pass). */
  forget(key: string): void {
    this.failures.delete(key);
  }

  /** The next key to work on, or undefined once the queue shuts down. */
  get(): Promise<string | undefined> {
    if (this.shuttingDown) return Promise.resolve(undefined);
    const key = this.queue.shift();
    if (key !== undefined) {
      this.dirty.delete(key);
      this.processing.add(key);
      return Promise.resolve(key);
    }
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  /** Marks `key` done; if it was added meanwhile, it is queued again. */
  done(key: string): void {
    this.processing.delete(key);
    if (this.dirty.has(key)) {
      this.dirty.delete(key);
      this.add(key);
    }
  }

  /** Number of keys waiting (not counting timers or keys in progress). */
  get length(): number {
    return this.queue.length;
  }

  /** Stops handing out keys, clears timers and wakes idle workers with undefined. Idempotent. */
  shutDown(): void {
    this.shuttingDown = true;
    for (const { timer } of this.timers.values()) clearTimeout(timer);
    this.timers.clear();
    this.queue.length = 0;
    for (const waiter of this.waiters.splice(0)) waiter(undefined);
  }
}
