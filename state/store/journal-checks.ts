/**
 * Checks the journal store's calls share (journal-store.ts and the modules it delegates
 * to): positions, cancellation, fencing, a partition with no events. Each throws an
 * AppError that names what was wrong and what to do.
 */
import { AppError } from '../../common/errors';
import { isU64 } from '../journal/u64';
import type { PartitionState } from './recover-partition';

/** @throws AppError `cancelled` when `signal` fired: `what` was not written. */
export function throwIfAborted(signal: AbortSignal | undefined, what: string): void {
  if (signal?.aborted === true) {
    throw new AppError('cancelled', `${what} was cancelled before it was written`, {
      cause: signal.reason,
    });
  }
}

/** @throws AppError `invalid_argument` unless `value` is a u64 (`details.field` is `what`). */
export function assertPosition(value: number, what: string, partition: string): void {
  if (!isU64(value)) {
    throw new AppError(
      'invalid_argument',
      `${partition}: ${what} must be a non-negative integer, got ${String(value)}`,
      { details: { partition, field: what } },
    );
  }
}

/**
 * Refuses a write whose fencing token is below the partition's mark (docs/state-plane.md,
 * "Fencing").
 *
 * @throws AppError `fenced` with `details.fencingToken` and `details.highestFencingToken`.
 */
export function assertNotFenced(
  partition: string,
  state: PartitionState | undefined,
  fencingToken: number,
  what: string,
): void {
  const fence = state?.fence ?? 0;
  if (fencingToken < fence) {
    throw new AppError(
      'fenced',
      `${partition}: the ${what} carries fencing token ${String(fencingToken)}, but token ` +
        `${String(fence)} has already written: this writer lost the conversation's lease; ` +
        'a newer holder has written. Stop writing for this conversation; nothing was written',
      { details: { partition, fencingToken, highestFencingToken: fence } },
    );
  }
}

/** The `not_found` error of a call that needs events on a partition that has none. */
export function noEvents(partition: string): AppError {
  return new AppError('not_found', `${partition} has no events`, { details: { partition } });
}

/** The `not_found` error of asking for the retirement of a partition that is not retired. */
export function notRetired(partition: string): AppError {
  return new AppError(
    'not_found',
    `${partition} is not retired (its conversation was not deleted, or was deleted under the ` +
      'keep policy): read it as usual',
    { details: { partition } },
  );
}
