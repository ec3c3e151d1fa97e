/**
 * Reading a journal in order, abortably: what the hub's follows and catch-up reads share
 * (journal-hub.ts).
 */
import { AppError } from '../../common/errors';
import type { JournalEntry } from '../../common/state-journal';

/**
 * The next entry of a journal read at exactly `expected`: earlier positions are skipped
 * (a source resuming too early repeats events the reader has), a later one is a gap
 * (`unavailable`). `'ended'` when the source is done; undefined once `signal` aborted.
 */
export async function nextInOrder(
  iterator: AsyncIterator<JournalEntry>,
  expected: number,
  signal: AbortSignal,
  read: string,
): Promise<JournalEntry | 'ended' | undefined> {
  for (;;) {
    const result = await untilAborted(iterator.next(), signal);
    if (result === undefined) return undefined;
    if (result.done === true) return 'ended';
    const entry = result.value;
    if (entry.position < expected) continue;
    if (entry.position > expected) {
      throw new AppError(
        'unavailable',
        `the ${read} skipped from ${String(expected)} to ${String(entry.position)}`,
      );
    }
    return entry;
  }
}

/** `promise`'s value, or `undefined` as soon as `signal` aborts (the promise is left to settle). */
export function untilAborted<T>(promise: Promise<T>, signal: AbortSignal): Promise<T | undefined> {
  promise.catch(() => undefined);
  if (signal.aborted) return Promise.resolve(undefined);
  return new Promise<T | undefined>((resolve, reject) => {
    const onAbort = (): void => resolve(undefined);
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (error: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(error instanceof Error ? error : new Error(String(error)));
      },
    );
  });
}

/** Resolves after `ms`, or as soon as `signal` aborts. */
export function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) {
      resolve();
      return;
    }
    const done = (): void => {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener('abort', done, { once: true });
  });
}
