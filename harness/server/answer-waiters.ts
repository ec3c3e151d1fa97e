import { AppError } from '../../common/errors';

/**
 * The harness's waits for the control plane's answers on a turn's call (turn-call.ts): a
 * step's ack, a trusted tool's result, a charge, a relayed model answer. Each wait is one
 * entry in a map keyed by what it waits for, settled by the answer, a timeout or a cancel,
 * and removed either way.
 */

/** One wait, as its map holds it. */
export interface Waiter<T> {
  resolve(value: T): void;
  reject(error: AppError): void;
}

/**
 * Waits in `waiters` under `key` until the answer comes; rejects with `onTimeout()` when
 * `signal` times out, and with `cancelled` when it aborts otherwise.
 */
export function waitForAnswer<K, T>(
  waiters: Map<K, Waiter<T>>,
  key: K,
  signal: AbortSignal,
  onTimeout: () => AppError,
  turnId: string,
): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const onAbort = (): void => {
      waiters.delete(key);
      reject(
        signal.reason instanceof DOMException && signal.reason.name === 'TimeoutError'
          ? onTimeout()
          : new AppError('cancelled', `turn ${turnId}: the wait was cancelled`),
      );
    };
    if (signal.aborted) {
      onAbort();
      return;
    }
    signal.addEventListener('abort', onAbort, { once: true });
    waiters.set(key, {
      resolve: (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      reject: (error) => {
        signal.removeEventListener('abort', onAbort);
        reject(error);
      },
    });
  });
}
