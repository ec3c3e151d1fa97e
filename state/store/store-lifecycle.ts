/**
 * The journal store's lifecycle (new → opening → open → closing → closed), its
 * per-partition locks and the work in flight under them, which close() waits for. The
 * store (journal-store.ts) holds one and asks it before every call.
 */
import { AppError } from '../../common/errors';
import { throwIfAborted } from './journal-checks';
import { KeyedMutex } from './keyed-mutex';

const Phase = {
  New: 'new',
  Opening: 'opening',
  Open: 'open',
  /** Reopening the database after a storage failure (journal-store.ts, recoverStorage). */
  Recovering: 'recovering',
  Closing: 'closing',
  Closed: 'closed',
} as const;
type Phase = (typeof Phase)[keyof typeof Phase];

export class StoreLifecycle {
  private phase: Phase = Phase.New;
  private readonly mutex = new KeyedMutex();
  private readonly inFlight = new Set<Promise<unknown>>();

  /** What open() fails with once close() was called; `undefined` before. */
  closedError(): AppError | undefined {
    if (this.phase !== Phase.Closing && this.phase !== Phase.Closed) return undefined;
    return new AppError(
      'failed_precondition',
      'the journal store was closed; create a new one to reopen it',
    );
  }

  /** Marks the store opening. */
  startOpening(): void {
    this.phase = Phase.Opening;
  }

  /** The open finished: `ok`, open (unless close() was called meanwhile: it wins), else closed. */
  finishOpening(ok: boolean): void {
    if (!ok) this.phase = Phase.Closed;
    else if (this.phase === Phase.Opening) this.phase = Phase.Open;
  }

  /**
   * Marks the store reopening its database: calls are refused until
   * {@link StoreLifecycle.finishRecovering}, then waits for the work in flight to settle.
   */
  async startRecovering(): Promise<void> {
    this.phase = Phase.Recovering;
    await Promise.allSettled([...this.inFlight]);
  }

  /** The reopen is over (done or failed): calls are taken again unless close() came. */
  finishRecovering(): void {
    if (this.phase === Phase.Recovering) this.phase = Phase.Open;
  }

  /** @throws AppError `unavailable` unless the store is open. */
  assertOpen(): void {
    if (this.phase === Phase.Recovering) {
      throw new AppError(
        'unavailable',
        'the journal store is reopening its database after a storage failure; retry in a moment',
      );
    }
    if (this.phase !== Phase.Open) {
      throw new AppError(
        'unavailable',
        this.phase === Phase.New || this.phase === Phase.Opening
          ? 'the journal store is not open yet; call open() first'
          : 'the journal store is closed',
      );
    }
  }

  /**
   * Runs `work` under `partition`'s lock, once `abort` (when given) has not fired and the
   * store is still open; close() waits for it.
   */
  locked<T>(
    partition: string,
    work: () => Promise<T>,
    abort?: { readonly signal: AbortSignal | undefined; readonly what: string },
  ): Promise<T> {
    const run = this.mutex.run(partition, async () => {
      if (abort !== undefined) throwIfAborted(abort.signal, abort.what);
      this.assertOpen();
      return work();
    });
    this.inFlight.add(run);
    const done = (): void => {
      this.inFlight.delete(run);
    };
    run.then(done, done);
    return run;
  }

  /**
   * Marks the store closing (no call is taken any more), then waits for `opening` and the
   * work in flight to settle.
   *
   * @returns whether the database was ever opened (so it must be closed).
   */
  async startClosing(opening: Promise<unknown> | undefined): Promise<boolean> {
    const wasOpened = this.phase !== Phase.New;
    this.phase = Phase.Closing;
    await opening?.catch(() => undefined);
    await Promise.allSettled([...this.inFlight]);
    return wasOpened;
  }

  /** Marks the store closed. */
  finishClosing(): void {
    this.phase = Phase.Closed;
  }
}
