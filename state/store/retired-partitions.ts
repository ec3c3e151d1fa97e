/**
 * Retired partitions (docs/state-plane.md, "Retirement"): the stored form of a
 * retirement, open()'s read of them, and the one atomic batch that retires a partition
 * (every key of the partition deleted, the retirement put). The store keeps the table of
 * retirements (journal-partitions.ts) and compacts the freed range afterwards.
 */
import { AppError } from '../../common/errors';
import {
  Retirement,
  RetirePolicy as ProtoRetirePolicy,
} from '../../proto/gen/polychrome/state/v1/state';
import { CompactMmr } from '../journal/compact-mmr';
import type { Ed25519Signer } from '../journal/ed25519';
import { signRetirement } from '../journal/retirement-record';
import type { Sha256 } from '../journal/sha256';
import type { KvOp, KvStore } from './level-kv';
import type { PartitionState } from './recover-partition';
import { RetirePolicy, type PartitionRetirement } from './retirement-types';
import {
  ALL_RETIRED,
  partitionOfRetiredKey,
  partitionRange,
  RecordTag,
  retiredKey,
} from './store-keys';

const POLICY_TO_PROTO = {
  [RetirePolicy.Checkpoint]: ProtoRetirePolicy.RETIRE_POLICY_CHECKPOINT,
  [RetirePolicy.Delete]: ProtoRetirePolicy.RETIRE_POLICY_DELETE,
} as const;

/** The wire and stored form of a retirement (`polychrome.state.v1.Retirement`). */
export function retirementToProto(retirement: PartitionRetirement): Retirement {
  const { signed } = retirement;
  return {
    partition: retirement.partition,
    policy: POLICY_TO_PROTO[retirement.policy],
    retiredAtMs: retirement.retiredAtMs,
    actor: retirement.actor,
    reason: retirement.reason,
    head: signed?.head ?? 0,
    root: Buffer.from(signed?.root ?? new Uint8Array(0)),
    keyId: signed?.keyId ?? '',
    signature: Buffer.from(signed?.signature ?? new Uint8Array(0)),
  };
}

/**
 * Reads a stored retirement of `partition`.
 *
 * @throws AppError `data_loss` when it does not decode or names another partition.
 */
export function decodeRetirement(value: Uint8Array, partition: string): PartitionRetirement {
  let proto: Retirement;
  try {
    proto = Retirement.decode(value);
  } catch (cause) {
    throw damaged(partition, 'does not decode', cause);
  }
  if (proto.partition !== partition) throw damaged(partition, `names ${proto.partition}`);
  const base = {
    partition,
    retiredAtMs: proto.retiredAtMs,
    actor: proto.actor,
    reason: proto.reason,
  };
  if (proto.policy === ProtoRetirePolicy.RETIRE_POLICY_DELETE) {
    return { ...base, policy: RetirePolicy.Delete };
  }
  if (proto.policy !== ProtoRetirePolicy.RETIRE_POLICY_CHECKPOINT) {
    throw damaged(partition, `has policy ${String(proto.policy)}`);
  }
  return {
    ...base,
    policy: RetirePolicy.Checkpoint,
    signed: {
      partition,
      head: proto.head,
      root: new Uint8Array(proto.root),
      retiredAtMs: proto.retiredAtMs,
      keyId: proto.keyId,
      signature: new Uint8Array(proto.signature),
    },
  };
}

function damaged(partition: string, what: string, cause?: unknown): AppError {
  return new AppError(
    'data_loss',
    `${partition}: the stored retirement record ${what}; the partition stays retired, but its ` +
      'record cannot be read: restore it from a backup',
    { details: { partition }, ...(cause === undefined ? {} : { cause }) },
  );
}

/** Every retirement in the database, by partition; a damaged one as its error. */
export async function loadRetirements(
  kv: KvStore,
): Promise<Map<string, PartitionRetirement | AppError>> {
  const out = new Map<string, PartitionRetirement | AppError>();
  for await (const [key, value] of kv.entries(ALL_RETIRED)) {
    const partition = partitionOfRetiredKey(key);
    if (partition === undefined) continue;
    try {
      out.set(partition, decodeRetirement(value, partition));
    } catch (error) {
      out.set(partition, error instanceof AppError ? error : damaged(partition, 'is unreadable'));
    }
  }
  return out;
}

/** What a retirement needs from the store. */
export interface RetireParts {
  readonly kv: KvStore;
  readonly hash: Sha256;
  /** The key that signs a `checkpoint` record (the partition's own, when held). */
  readonly signer: Ed25519Signer;
}

/** What a retirement is, before it is signed. */
export interface RetireWrite {
  readonly policy: RetirePolicy;
  readonly actor: string;
  readonly reason: string;
  readonly retiredAtMs: number;
}

/**
 * Retires `partition` (its lock held; `state` its healthy state, `undefined` when it has
 * no events or was refused): in ONE atomic, synced batch, deletes every key of the
 * partition (events, MMR nodes, head record, fencing mark) and puts its retirement, with
 * a signed record of the final head and root under `checkpoint`. A crash leaves the
 * partition whole or retired, never between.
 *
 * @throws AppError `unavailable` when the write failed (nothing changed; retry).
 */
export async function writeRetirement(
  parts: RetireParts,
  partition: string,
  state: PartitionState | undefined,
  write: RetireWrite,
): Promise<{ retirement: PartitionRetirement; eventsRemoved: number }> {
  const { policy, actor, reason, retiredAtMs } = write;
  const retirement: PartitionRetirement =
    policy === RetirePolicy.Delete
      ? { partition, policy, retiredAtMs, actor, reason }
      : {
          partition,
          policy,
          retiredAtMs,
          actor,
          reason,
          signed: signRetirement(parts.hash, parts.signer, {
            partition,
            head: state?.head ?? 0,
            root: (state?.mmr ?? new CompactMmr(parts.hash)).root(),
            retiredAtMs,
          }),
        };
  const ops: KvOp[] = [];
  let eventsRemoved = 0;
  const eventTagAt = partitionRange(partition).gte.length;
  for await (const key of parts.kv.keys(partitionRange(partition))) {
    if (key[eventTagAt] === RecordTag.Event) eventsRemoved += 1;
    ops.push({ type: 'del', key });
  }
  const value = Retirement.encode(retirementToProto(retirement)).finish();
  ops.push({ type: 'put', key: retiredKey(partition), value });
  try {
    await parts.kv.write(ops, true);
  } catch (cause) {
    throw new AppError(
      'unavailable',
      `${partition}: the retirement could not be written; nothing changed: retry`,
      { details: { partition }, cause },
    );
  }
  return { retirement, eventsRemoved };
}

/**
 * The error of every call but retire on a retired partition: `failed_precondition` with
 * `details.reason` `retired`, naming when, by whom and under which policy.
 */
export function retiredError(retirement: PartitionRetirement | AppError): AppError {
  if (retirement instanceof AppError) return retirement;
  const { partition, policy, retiredAtMs, actor } = retirement;
  const when = new Date(retiredAtMs).toISOString();
  return new AppError(
    'failed_precondition',
    `${partition} was retired at ${when} by ${actor} (policy ${policy}): its conversation was ` +
      'deleted and its events removed; it takes and serves no events. ' +
      (policy === RetirePolicy.Checkpoint
        ? 'Its signed retirement record (GetRetirement, `polychrome state retirement`) checks an export taken before'
        : 'Nothing of it is kept but this tombstone'),
    { details: { partition, reason: 'retired', policy, retiredAtMs } },
  );
}
