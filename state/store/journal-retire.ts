/**
 * Retirement of a deleted conversation's partition (docs/state-plane.md, "Retirement"):
 * checks the request, refuses what cannot be retired, and writes the one atomic batch
 * (retired-partitions.ts). The store applies the result to its table and compacts.
 */
import { AppError } from '../../common/errors';
import { assertPartitionName } from '../../common/partition-name';
import type { CommitListeners } from './commit-listeners';
import { assertNotFenced, assertPosition, notRetired } from './journal-checks';
import type { StoreLifecycle } from './store-lifecycle';
import { partitionRange } from './store-keys';
import type { SigningKeyring } from './journal-keyring';
import type { PartitionTable } from './journal-partitions';
import type { KvStore } from './level-kv';
import { writeRetirement, type RetireWrite } from './retired-partitions';
import {
  RetirePolicy,
  type PartitionRetirement,
  type RetireOptions,
  type RetireResult,
} from './retirement-types';
import type { Sha256 } from '../journal/sha256';

const MAX_ACTOR_CHARS = 256;
const MAX_REASON_CHARS = 1024;

/** A retirement's options, checked. */
export interface RetireRequest extends RetireWrite {
  readonly fencingToken: number;
}

function assertText(value: unknown, field: string, max: number, partition: string): string {
  if (typeof value !== 'string' || value.trim() === '' || value.length > max) {
    throw new AppError(
      'invalid_argument',
      `${partition}: a retirement needs ${field}: a non-empty text of at most ${String(max)} ` +
        'characters (it is kept in the retirement record)',
      { details: { partition, field } },
    );
  }
  return value;
}

/**
 * Checks `options` of a retirement of `partition`.
 *
 * @throws AppError `invalid_argument` for a policy other than `checkpoint` or `delete`,
 *   an empty or overlong actor or reason, or a bad fencing token.
 */
export function retireRequestOf(partition: string, options: RetireOptions): RetireRequest {
  const policies: readonly string[] = Object.values(RetirePolicy);
  if (!policies.includes(options.policy)) {
    throw new AppError(
      'invalid_argument',
      `${partition}: a retirement needs a policy, ${policies.join(' or ')}; got ` +
        `${JSON.stringify(String(options.policy))} (keep means: do not retire)`,
      { details: { partition, field: 'policy' } },
    );
  }
  const fencingToken = options.fencingToken ?? 0;
  assertPosition(fencingToken, 'fencing token', partition);
  return {
    policy: options.policy,
    actor: assertText(options.actor, 'an actor', MAX_ACTOR_CHARS, partition),
    reason: assertText(options.reason, 'a reason', MAX_REASON_CHARS, partition),
    fencingToken,
    retiredAtMs: (options.now ?? Date.now)(),
  };
}

/** What a retirement reads and writes with: the store's parts. */
export interface RetireContext {
  readonly kv: KvStore;
  readonly hash: Sha256;
  readonly keyring: SigningKeyring;
  readonly table: PartitionTable;
  readonly life: StoreLifecycle;
  readonly listeners: CommitListeners;
}

/**
 * Retires `partition`: under its append lock, deletes all its records in one atomic
 * durable batch, keeping its retirement (`checkpoint`: a signed record of the final head
 * and root), and moves the store's table; then compacts the freed key range so the space
 * is reclaimed. Every later call on the partition but this one fails with
 * `failed_precondition`; follow reads of it end. Retiring it again changes nothing, says
 * so, and compacts again.
 *
 * @throws AppError `invalid_argument` as {@link retireRequestOf} and for a bad name; as
 *   {@link retireLocked}; `unavailable` when the store is not open.
 */
export async function retirePartition(
  context: RetireContext,
  partition: string,
  options: RetireOptions,
): Promise<RetireResult> {
  context.life.assertOpen();
  assertPartitionName(partition);
  const request = retireRequestOf(partition, options);
  const range = partitionRange(partition);
  const { result, retired } = await context.life.locked(partition, async () => {
    // LevelDB's compactRange never rewrites a table at the deepest level it finds for the
    // range: records and the deletes of them written into the same table there (a memtable
    // flushed in one piece, e.g. in a young database) would stay on disk. Flushing the
    // records first puts the deletes in a table above them, which the compaction after the
    // write merges down into theirs, dropping both.
    if (context.table.retirement(partition) === undefined) await context.kv.compactRange(range);
    const outcome = await retireLocked(context, partition, request);
    if (outcome.retired !== undefined) context.table.retire(partition, outcome.retired);
    return outcome;
  });
  // A follower wakes, reads, and ends with the retired error.
  if (retired !== undefined) context.listeners.notify(partition, Number.MAX_SAFE_INTEGER);
  await context.kv.compactRange(range);
  return result;
}

/**
 * The retirement of `partition`.
 *
 * @throws AppError `invalid_argument` for a bad name; `not_found` when it is not retired;
 *   `data_loss` when its record is unreadable; `unavailable` when the store is not open.
 */
export function retirementOf(
  life: StoreLifecycle,
  table: PartitionTable,
  partition: string,
): PartitionRetirement {
  life.assertOpen();
  assertPartitionName(partition);
  const found = table.retirement(partition);
  if (found instanceof AppError) throw found;
  if (found === undefined) throw notRetired(partition);
  return found;
}

/** A retirement's outcome; `retired` is set when the store must record a new retirement. */
export interface RetireOutcome {
  readonly result: RetireResult;
  readonly retired?: PartitionRetirement;
}

/**
 * Retires `partition` (its lock held), or reports the retirement it already has.
 *
 * @throws AppError `fenced` as for an append; `data_loss` for a `checkpoint` of a partition
 *   open() refused (its final root cannot be trusted), or an unreadable earlier
 *   retirement; `unavailable` when the write failed.
 */
export async function retireLocked(
  context: RetireContext,
  partition: string,
  request: RetireRequest,
): Promise<RetireOutcome> {
  const earlier = context.table.retirement(partition);
  if (earlier instanceof AppError) throw earlier;
  if (earlier !== undefined) {
    return {
      result: {
        retirement: earlier,
        retiredNow: false,
        eventsRemoved: 0,
        message:
          `${partition} was already retired at ${new Date(earlier.retiredAtMs).toISOString()} ` +
          `(policy ${earlier.policy}); nothing changed`,
      },
    };
  }
  const { state, refused } = context.table.beforeRetirement(partition);
  assertNotFenced(partition, state, request.fencingToken, 'retirement');
  if (refused !== undefined && request.policy === RetirePolicy.Checkpoint) {
    throw new AppError(
      'data_loss',
      `${partition} is damaged (${refused.message}), so no final root can be signed for it: ` +
        'restore it from a backup, or retire it with policy delete; nothing changed',
      { details: { partition }, cause: refused },
    );
  }
  const { keyring } = context;
  const signer =
    (state === undefined ? undefined : keyring.get(state.lastRoot.keyId)) ?? keyring.active;
  const written = await writeRetirement(
    { kv: context.kv, hash: context.hash, signer },
    partition,
    state,
    request,
  );
  const head = state?.head ?? 0;
  return {
    retired: written.retirement,
    result: {
      ...written,
      retiredNow: true,
      message:
        `${partition} retired (policy ${request.policy}): ${String(written.eventsRemoved)} events removed` +
        (request.policy === RetirePolicy.Checkpoint
          ? `; a record of its final head ${String(head)} and root, signed by key ` +
            `${written.retirement.signed?.keyId ?? ''}, is kept`
          : '; nothing of it is kept but a tombstone'),
    },
  };
}
