/**
 * The public types of {@link JournalStore} (journal-store.ts): its options, limits, and
 * what its calls take and return. The modules the store delegates to share them.
 */
import { AppError } from '../../common/errors';
import type { Ed25519Signer, Ed25519Verifier } from '../journal/ed25519';
import type { InclusionProof } from '../journal/inclusion-proof';
import type { Sha256 } from '../journal/sha256';
import type {
  JournalCheckpoint,
  JournalEvent,
  SignatureCheck,
} from '../journal/verification-types';
import type { StoredSignedRoot } from './append-batch';
import type { GroupCommitStats } from './group-commit';
import type { KvStore } from './level-kv';

/** Size and count limits on appends. */
export interface JournalStoreLimits {
  /**
   * Largest payload of one event, in bytes.
   * @default 1048576 (1 MiB)
   */
  readonly maxPayloadBytes: number;
  /**
   * Most events one append may carry (the store adds a `signed_root`, and at times a
   * `key_rotated`, after them).
   * @default 1000
   */
  readonly maxBatchEvents: number;
  /**
   * Largest sum of payload bytes in one append.
   * @default 8388608 (8 MiB)
   */
  readonly maxBatchBytes: number;
  /**
   * Group commit stops adding appends to one durable write once it holds this many
   * bytes; a single larger append still goes, alone.
   * @default 16777216 (16 MiB)
   */
  readonly maxGroupBytes: number;
}

/** The defaults of {@link JournalStoreLimits}. */
export const DEFAULT_JOURNAL_STORE_LIMITS: JournalStoreLimits = Object.freeze({
  maxPayloadBytes: 1024 * 1024,
  maxBatchEvents: 1000,
  maxBatchBytes: 8 * 1024 * 1024,
  maxGroupBytes: 16 * 1024 * 1024,
});

/** Options for {@link JournalStore}. */
export interface JournalStoreOptions {
  /** Directory of the LevelDB database (on the state volume); created if missing. */
  readonly location: string;
  /** The active signing key: it signs every root the store writes from now on. */
  readonly signer: Ed25519Signer;
  /**
   * Earlier signing keys the store still holds. A partition whose last root was signed by
   * one of them is handed over to `signer` (a `key_rotated` event signed by the old key)
   * in its next batch. A partition signed by a key held nowhere refuses appends.
   * @default []
   */
  readonly previousSigners?: readonly Ed25519Signer[];
  /** Overrides of {@link DEFAULT_JOURNAL_STORE_LIMITS}. */
  readonly limits?: Partial<JournalStoreLimits>;
  /**
   * The key-value engine. Tests wrap the real one to count or fail writes.
   * @default createLevelKv(location)
   */
  readonly kv?: KvStore;
  /** @default nodeSha256 */
  readonly hash?: Sha256;
  /** Verifies signatures in {@link JournalStore.verify}. @default node:crypto */
  readonly verifier?: Ed25519Verifier;
}

/** One event to append; the store assigns its position. */
export interface AppendEvent {
  /** An event kind from common/event-kinds.ts, other than `signed_root` and `key_rotated`. */
  readonly kind: string;
  /** The encoded protobuf payload (opaque to the store). */
  readonly payload: Uint8Array;
}

/** Options of {@link JournalStore.append}. */
export interface AppendOptions {
  /**
   * Cancels the append while it waits for its partition's lock. Once its batch is handed
   * to the durable write it can no longer be cancelled, and the outcome is reported.
   */
  readonly signal?: AbortSignal;
  /**
   * The fencing token of the writer's lease on the conversation. The store keeps the
   * highest token it has accepted per partition (its fencing mark, durable in the same
   * write as the batch that raised it) and refuses a lower one with `fenced`: a newer
   * lease holder has written, so this writer must stop. Equal is accepted; higher raises
   * the mark. 0, what a writer without a lease sends, is the lowest token: accepted only
   * while the mark is 0.
   * @default 0
   */
  readonly fencingToken?: number;
  /**
   * The root of the partition's last signed root as the writer last saw it. When set and
   * `expectedHead` is the head, the append is refused (`failed_precondition`,
   * `details.reason` `root_mismatch`) unless the last signed root has exactly this root:
   * a journal of the same length with other content is not appended to.
   */
  readonly expectedRoot?: Uint8Array;
}

/** What an acknowledged (durable) append wrote. */
export interface AppendResult {
  readonly partition: string;
  /** Position of the first caller event: always the `expectedHead` passed in. */
  readonly firstPosition: number;
  /** The new head (next position); the event at head − 1 is `signedRoot`. */
  readonly head: number;
  readonly signedRoot: StoredSignedRoot;
  /** Set when this batch handed the partition over to the active key. */
  readonly keyRotation?: {
    readonly position: number;
    readonly oldKeyId: string;
    readonly newKeyId: string;
  };
}

/** A partition's head as of the last acknowledged batch. */
export interface PartitionHead {
  readonly partition: string;
  /** Next position; 0 for a partition with no events. */
  readonly head: number;
  /** The closing root of the last batch; `undefined` when the partition has no events. */
  readonly signedRoot: StoredSignedRoot | undefined;
}

/** One partition as {@link JournalStore.listPartitions} reports it. */
export interface PartitionInfo {
  readonly partition: string;
  /** `refused`: open() found damage; appends and reads fail, verify and export work. */
  readonly status: 'ok' | 'refused';
  /** The head, for `ok` partitions. */
  readonly head?: number;
  /** Why the partition was refused. */
  readonly problem?: string;
}

/** What {@link JournalStore.open} found. */
export interface OpenReport {
  readonly partitions: number;
  /** Partitions whose never-acknowledged tail was deleted. */
  readonly droppedTails: readonly {
    readonly partition: string;
    readonly events: number;
    readonly nodes: number;
  }[];
  /** Partitions refused for damage (`data_loss`), with the reason. */
  readonly refused: readonly { readonly partition: string; readonly problem: string }[];
}

/** An inclusion proof of one event against a signed root, ready to send. */
export interface EventProof {
  readonly event: JournalEvent;
  /** The event's leaf digest, computed from the stored event. */
  readonly leaf: Uint8Array;
  readonly proof: InclusionProof;
  /** The signed root the proof leads to (its `leafCount` is `proof.leafCount`). */
  readonly signedRoot: StoredSignedRoot;
}

/** Options of {@link JournalStore.verify}. */
export interface VerifyOptions {
  /**
   * Raw ed25519 public keys trusted at position 0. Default: the store's own key whose id
   * the partition's head record names as the signer of its first root.
   */
  readonly trustedPublicKeys?: readonly Uint8Array[];
  /**
   * Checks signatures, e.g. on a worker pool (state/verify-pool.ts); results in the order
   * of `checks`. Called once per chunk of checks while the events are still being read, so
   * a pool verifies alongside the replay. Default: the store's verifier, on this thread.
   */
  readonly checkSignatures?: (checks: readonly SignatureCheck[]) => Promise<readonly boolean[]>;
  /**
   * A trusted checkpoint from outside the journal (e.g. the Conversation's status): the
   * result fails with `rolled_back` when the journal is shorter or differs. None by default.
   */
  readonly checkpoint?: JournalCheckpoint;
  readonly signal?: AbortSignal;
}

/** Options of {@link JournalStore.repair}. */
export interface RepairOptions {
  /** Who asks, as the caller authenticated them; recorded in each `excision` event. */
  readonly actor: string;
  /** Why; recorded in each `excision` event. */
  readonly reason: string;
  /** Find and report the unreadable entries, check the repair would verify, write nothing. */
  readonly dryRun?: boolean;
  /** As for {@link AppendOptions.fencingToken}: a repair is a write and is fenced like one. */
  readonly fencingToken?: number;
  readonly signal?: AbortSignal;
  /** Clock for the `excised_at_ms` field. @default Date.now */
  readonly now?: () => number;
}

/** An entry repair found unreadable. */
export interface UnreadableEntry {
  readonly position: number;
  /** The leaf digest the excision keeps: the stored MMR leaf node, which roots were signed over. */
  readonly leaf: Uint8Array;
  /** Why it is unreadable. */
  readonly problem: string;
}

/** What {@link JournalStore.repair} found and did. */
export interface RepairResult {
  readonly partition: string;
  readonly dryRun: boolean;
  /** Every unreadable entry, in position order (excised unless `dryRun`); empty: nothing to do. */
  readonly excised: readonly UnreadableEntry[];
  /** The head after the repair (unchanged for a dry run or a no-op). */
  readonly head: number;
  /** The closing root of the repair's batch, when it wrote one. */
  readonly signedRoot?: StoredSignedRoot;
  /** For people: what was found and done. */
  readonly message: string;
}

/** Options of {@link JournalStore.erase} (docs/state-plane.md, "Erasure"). */
export interface EraseOptions {
  /** The positions to erase: readable content entries below the head. */
  readonly positions: readonly number[];
  /** Who asks, as the caller authenticated them; recorded in each `excision` event. */
  readonly actor: string;
  /** Why; recorded in each `excision` event. */
  readonly reason: string;
  /** Check everything, write nothing. */
  readonly dryRun?: boolean;
  /** As for {@link AppendOptions.fencingToken}: an erasure is a write and is fenced like one. */
  readonly fencingToken?: number;
  readonly signal?: AbortSignal;
  /** Clock for the `excised_at_ms` field. @default Date.now */
  readonly now?: () => number;
}

/** An entry an erasure excised (or, for a dry run, would). */
export interface ErasedEntry {
  readonly position: number;
  /** The leaf digest the erasure keeps. */
  readonly leaf: Uint8Array;
  /** The kind the entry had. */
  readonly kind: string;
  /** The turn it belonged to; empty when its payload names none. */
  readonly turnId: string;
}

/** What {@link JournalStore.erase} did. */
export interface EraseResult {
  readonly partition: string;
  readonly dryRun: boolean;
  /** The entries erased (would be, for a dry run), in position order. */
  readonly erased: readonly ErasedEntry[];
  /** The head after the erasure (unchanged for a dry run). */
  readonly head: number;
  /** The closing root of the erasure's batch, when it wrote one. */
  readonly signedRoot?: StoredSignedRoot;
  /** For people: what was done. */
  readonly message: string;
}

/** Options of {@link JournalStore.clearMemory}: an append's. */
export interface ClearMemoryOptions {
  /** As for an append: the writer's lease token. @default 0 */
  readonly fencingToken?: number;
  /** As for an append: the last signed root the writer saw; unset, no check. */
  readonly expectedRoot?: Uint8Array;
  readonly signal?: AbortSignal;
  /** Clock for the `excised_at_ms` field. @default Date.now */
  readonly now?: () => number;
}

/** What a memory clear wrote: the append's result and the `memory_set` entries erased. */
export interface ClearMemoryResult extends AppendResult {
  readonly erased: readonly ErasedEntry[];
}

/** Options of {@link JournalStore.read} and {@link JournalStore.export}. */
export interface ReadOptions {
  readonly signal?: AbortSignal;
}

/**
 * Told that a batch of a partition is durable: `head` is the partition's new head (next
 * position). Called synchronously, after the write is on stable storage and the
 * in-memory head moved, before the append is acknowledged to its caller. It must be
 * cheap and must not throw (it runs inside the append's completion; an exception is
 * dropped so the durable append is still acknowledged): note the head and read the
 * events later, with {@link JournalStore.read}.
 */
export type CommitListener = (head: number) => void;

/** Counters for /metrics and tests. */
export interface JournalStoreStats extends GroupCommitStats {
  /** Acknowledged appends (including key rotations). */
  readonly appends: number;
  /** Events written by acknowledged appends, `signed_root` and `key_rotated` included. */
  readonly events: number;
  readonly partitions: number;
  readonly refusedPartitions: number;
}

/**
 * `DEFAULT_JOURNAL_STORE_LIMITS` with `overrides`.
 *
 * @throws AppError `invalid_argument` for a limit that is not a positive integer.
 */
export function resolveLimits(overrides: Partial<JournalStoreLimits> = {}): JournalStoreLimits {
  const limits = { ...DEFAULT_JOURNAL_STORE_LIMITS, ...overrides };
  for (const [name, value] of Object.entries(limits)) {
    if (!Number.isSafeInteger(value) || value <= 0) {
      throw new AppError(
        'invalid_argument',
        `journal store limit ${name} must be a positive integer, got ${String(value)}`,
        { details: { field: name } },
      );
    }
  }
  return limits;
}
