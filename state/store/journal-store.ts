import { AppError, isAppError } from '../../common/errors';
import { decodePayload, encodePayload, EventKind, isEventKind } from '../../common/event-kinds';
import type { Ed25519Signer, Ed25519Verifier } from '../journal/ed25519';
import { bytesEqual, toHex } from '../journal/hex';
import {
  buildInclusionProof,
  inclusionProofPositions,
  verifyInclusion,
  type InclusionProof,
} from '../journal/inclusion-proof';
import { LeafHasher } from '../journal/leaf-digest';
import { leafNodePosition } from '../journal/mmr-layout';
import { createNodeEd25519Verifier } from '../journal/node-ed25519';
import { nodeSha256 } from '../journal/node-sha256';
import type { Sha256 } from '../journal/sha256';
import { keyIdOf } from '../journal/signed-root';
import { encodeU64, isU64 } from '../journal/u64';
import {
  StreamingJournalVerifier,
  VerifyFailureReason,
  type JournalCheckpoint,
  type JournalEvent,
  type JournalVerification,
  type SignatureCheck,
} from '../journal/verify-journal';
import {
  buildAppendBatch,
  storedSignedRootOf,
  type AppendBatch,
  type StoredSignedRoot,
} from './append-batch';
import { GroupCommitter, type GroupCommitStats } from './group-commit';
import { exportNdjson, exportRecords, type StoreExportRecord } from './journal-export';
import { decodeHeadRecord } from './head-record';
import { KeyedMutex } from './keyed-mutex';
import { createLevelKv, type KvOp, type KvStore } from './level-kv';
import { assertPartitionName, isPartitionName } from './partition-name';
import { recoverPartition, type PartitionState } from './recover-partition';
import {
  ALL_PARTITIONS,
  decodeEventValue,
  encodeExcisedValue,
  eventKey,
  FORMAT_KEY,
  headKey,
  nodeKey,
  partitionOfKey,
  partitionRange,
  positionOfKey,
  positionRange,
  RecordTag,
  STORE_FORMAT,
} from './store-keys';

export type { StoredSignedRoot } from './append-batch';

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

const Lifecycle = {
  New: 'new',
  Opening: 'opening',
  Open: 'open',
  Closing: 'closing',
  Closed: 'closed',
} as const;
type Lifecycle = (typeof Lifecycle)[keyof typeof Lifecycle];

const RESERVED_KINDS: ReadonlySet<string> = new Set([
  EventKind.SignedRoot,
  EventKind.KeyRotated,
  EventKind.Excision,
]);
const MAX_ACTOR_CHARS = 256;
const MAX_REASON_CHARS = 1024;
const RECOVERY_CONCURRENCY = 16;
const utf8 = new TextEncoder();

/**
 * `items` in batches, read ahead (for {@link JournalStore.verify}): a pump takes entries
 * from the store's iterator as they arrive, so LevelDB fetches the next ones on its own
 * thread while the caller works on a batch; a plain `for await` leaves this thread idle
 * at every fetch. A batch is what arrived since the previous one, about one LevelDB fetch,
 * so memory stays bounded. Leaving the loop early stops the pump and closes the iterator.
 */
async function* readAhead<T>(items: AsyncIterable<T>): AsyncGenerator<T[]> {
  let arrived: T[] = [];
  let done = false;
  let stop = false;
  let failure: { readonly error: unknown } | undefined;
  let wake: (() => void) | undefined;
  const pump = (async () => {
    try {
      for await (const item of items) {
        arrived.push(item);
        wake?.();
        if (stop) return;
      }
    } catch (error) {
      failure = { error };
    } finally {
      done = true;
      wake?.();
    }
  })();
  try {
    for (;;) {
      if (arrived.length === 0 && !done) await new Promise<void>((resolve) => (wake = resolve));
      // One macrotask turn: the pump takes the rest of what LevelDB fetched and asks for more.
      await new Promise((resolve) => setImmediate(resolve));
      if (failure !== undefined) throw failure.error;
      if (arrived.length === 0) return;
      const batch = arrived;
      arrived = [];
      yield batch;
    }
  } finally {
    stop = true;
    await pump;
  }
}

/**
 * Refuses an append whose writer saw another last signed root at this head
 * ({@link AppendOptions.expectedRoot}). An empty partition has no root to compare.
 */
function assertRootAsExpected(
  partition: string,
  state: PartitionState | undefined,
  expectedRoot: Uint8Array | undefined,
): void {
  if (expectedRoot === undefined || expectedRoot.length === 0 || state === undefined) return;
  if (bytesEqual(state.lastRoot.root, expectedRoot)) return;
  throw new AppError(
    'failed_precondition',
    `${partition}: the journal's last signed root at head ${String(state.head)} is ` +
      `${toHex(state.lastRoot.root)}, not the ${toHex(expectedRoot)} the writer last saw: this journal ` +
      'has the same length but other content (was the state volume restored from another copy?); ' +
      'read it again and reconcile before appending',
    {
      details: {
        partition,
        reason: 'root_mismatch',
        head: state.head,
        root: toHex(state.lastRoot.root),
        expectedRoot: toHex(expectedRoot),
      },
    },
  );
}

function throwIfAborted(signal: AbortSignal | undefined, what: string): void {
  if (signal?.aborted === true) {
    throw new AppError('cancelled', `${what} was cancelled before it was written`, {
      cause: signal.reason,
    });
  }
}

function assertPosition(value: number, what: string, partition: string): void {
  if (!isU64(value)) {
    throw new AppError(
      'invalid_argument',
      `${partition}: ${what} must be a non-negative integer, got ${String(value)}`,
      { details: { partition, field: what } },
    );
  }
}

/** Thrown by a dry run's check, once it passed, so that nothing is written. */
class DryRunDone extends Error {}

/**
 * Refuses a write whose fencing token is below the partition's mark (docs/state-plane.md,
 * "Fencing").
 *
 * @throws AppError `fenced` with `details.fencingToken` and `details.highestFencingToken`.
 */
function assertNotFenced(
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

function assertText(value: unknown, field: string, max: number, partition: string): string {
  if (typeof value !== 'string' || value.trim() === '' || value.length > max) {
    throw new AppError(
      'invalid_argument',
      `${partition}: a repair needs ${field}: a non-empty text of at most ${String(max)} characters ` +
        '(it is recorded in the signed excision event)',
      { details: { partition, field } },
    );
  }
  return value;
}

/**
 * Why a stored entry cannot be read, or `undefined` when it reads and hashes to `leaf`,
 * the leaf digest stored in the MMR when it was signed.
 */
function unreadable(
  leafHasher: LeafHasher,
  partition: string,
  position: number,
  value: Uint8Array,
  leaf: Uint8Array,
): string | undefined {
  let stored: { kind: string; payload: Uint8Array; excisedLeaf?: Uint8Array };
  try {
    stored = decodeEventValue(value, partition, position);
  } catch {
    return 'the stored record is damaged (truncated, or its kind is not UTF-8)';
  }
  if (stored.excisedLeaf !== undefined) return undefined;
  const { kind, payload } = stored;
  if (!isEventKind(kind))
    return `its kind ${JSON.stringify(kind.slice(0, 64))} is not a known kind`;
  try {
    decodePayload(kind, payload);
  } catch {
    return `its payload does not decode as ${kind}`;
  }
  if (!bytesEqual(leafHasher.digest(position, kind, payload), leaf)) {
    return 'its bytes no longer hash to the leaf digest that was signed';
  }
  return undefined;
}

/**
 * The state plane's durable journal store: many `conv-{id}` partitions in one LevelDB
 * database, each an append-only, signed journal (docs/design.md, "The journal";
 * docs/journal-format.md). A thin shell over the pure core in state/journal: the core
 * hashes, builds the MMR and signs; this class persists what the core's visitor reports,
 * serializes appends per partition, and shares fsyncs between partitions (group commit).
 *
 * Every append is one atomic `sync: true` LevelDB write holding the caller's events, the
 * MMR nodes, a closing `signed_root` and the head record; it is acknowledged only once
 * durable, and the in-memory frontier moves only then.
 *
 * Keys: one active signing key per store ({@link JournalStoreOptions.signer}). Rotating
 * makes a new key active for the whole store; each partition is handed over to it by a
 * `key_rotated` event (signed by the partition's previous key) placed at the end of that
 * partition's next batch, before its `signed_root` ("lazy" rotation), or at once with
 * {@link JournalStore.rotateKey}. Previous keys must stay loaded until every partition was
 * handed over.
 *
 * @example
 * import { createNodeEd25519Signer } from '../journal/node-ed25519';
 * async function demo(): Promise<void> {
 *   const store = new JournalStore({ location: 'journal-db', signer: createNodeEd25519Signer(new Uint8Array(32)) });
 *   await store.open();
 *   const { head } = await store.append('conv-1', 0, [{ kind: 'message_received', payload: new Uint8Array() }]);
 *   for await (const event of store.read('conv-1', 0, head)) void event;
 *   await store.close();
 * }
 */
export class JournalStore {
  private readonly kv: KvStore;
  private readonly hash: Sha256;
  private readonly verifier: Ed25519Verifier;
  private readonly limits: JournalStoreLimits;
  private readonly committer: GroupCommitter;
  private readonly mutex = new KeyedMutex();
  private readonly leafHasher: LeafHasher;
  private readonly kinds = new Map<string, Uint8Array>();
  private readonly keyring = new Map<string, Ed25519Signer>();
  private activeKeyId: string;
  private readonly partitions = new Map<string, PartitionState>();
  private readonly refused = new Map<string, AppError>();
  private readonly inFlight = new Set<Promise<unknown>>();
  /** Commit listeners by partition; a partition nobody follows has no entry. */
  private readonly commitListeners = new Map<string, Set<CommitListener>>();
  private lifecycle: Lifecycle = Lifecycle.New;
  private opening: Promise<OpenReport> | undefined;
  private closing: Promise<void> | undefined;
  private appends = 0;
  private events = 0;

  /**
   * Builds the store; nothing is read until {@link JournalStore.open}.
   *
   * @throws AppError `invalid_argument` for a limit that is not a positive integer.
   */
  constructor(private readonly options: JournalStoreOptions) {
    this.hash = options.hash ?? nodeSha256;
    this.verifier = options.verifier ?? createNodeEd25519Verifier();
    this.limits = { ...DEFAULT_JOURNAL_STORE_LIMITS, ...options.limits };
    for (const [name, value] of Object.entries(this.limits)) {
      if (!Number.isSafeInteger(value) || value <= 0) {
        throw new AppError(
          'invalid_argument',
          `journal store limit ${name} must be a positive integer, got ${String(value)}`,
          { details: { field: name } },
        );
      }
    }
    this.kv = options.kv ?? createLevelKv(options.location);
    this.committer = new GroupCommitter(this.kv, this.limits.maxGroupBytes);
    this.leafHasher = new LeafHasher(this.hash);
    for (const signer of options.previousSigners ?? []) {
      this.keyring.set(keyIdOf(this.hash, signer.publicKey), signer);
    }
    this.activeKeyId = keyIdOf(this.hash, options.signer.publicKey);
    this.keyring.set(this.activeKeyId, options.signer);
  }

  /**
   * Opens the database, checks the format marker, then checks every partition's tail
   * (see recover-partition.ts): a never-acknowledged tail is deleted; a damaged partition
   * is refused with `data_loss` while the others open. Calling it again returns the same
   * report.
   *
   * @throws AppError `unavailable` when the database cannot be opened (another process
   *   holds its lock, or the directory is unusable); `failed_precondition` when the
   *   directory holds something other than a journal store, or the store was closed.
   */
  open(): Promise<OpenReport> {
    if (this.lifecycle === Lifecycle.Closing || this.lifecycle === Lifecycle.Closed) {
      return Promise.reject(
        new AppError(
          'failed_precondition',
          'the journal store was closed; create a new one to reopen it',
        ),
      );
    }
    this.opening ??= this.doOpen();
    return this.opening;
  }

  private async doOpen(): Promise<OpenReport> {
    this.lifecycle = Lifecycle.Opening;
    try {
      await this.kv.open();
    } catch (cause) {
      this.lifecycle = Lifecycle.Closed;
      throw new AppError(
        'unavailable',
        `the journal database at ${this.options.location} cannot be opened; another process may ` +
          'hold its lock, or the volume is not writable',
        { cause },
      );
    }
    try {
      await this.checkFormat();
      const names = await this.discoverPartitions();
      const droppedTails: { partition: string; events: number; nodes: number }[] = [];
      for (let i = 0; i < names.length; i += RECOVERY_CONCURRENCY) {
        const chunk = names.slice(i, i + RECOVERY_CONCURRENCY);
        const outcomes = await Promise.all(
          chunk.map((name) =>
            isPartitionName(name)
              ? recoverPartition(this.kv, this.hash, name)
              : Promise.resolve(undefined),
          ),
        );
        chunk.forEach((name, j) => {
          const outcome = outcomes[j];
          if (outcome === undefined) {
            this.refused.set(
              name,
              new AppError(
                'data_loss',
                `the database holds records under ${JSON.stringify(name)}, which is not a partition name`,
              ),
            );
          } else if (outcome.status === 'refused') {
            this.refused.set(name, outcome.error);
          } else {
            this.partitions.set(name, outcome.state);
            if (outcome.droppedEvents + outcome.droppedNodes > 0) {
              droppedTails.push({
                partition: name,
                events: outcome.droppedEvents,
                nodes: outcome.droppedNodes,
              });
            }
          }
        });
      }
      // close() may have been called while opening: it wins.
      if (this.lifecycle === Lifecycle.Opening) this.lifecycle = Lifecycle.Open;
      return {
        partitions: this.partitions.size,
        droppedTails,
        refused: [...this.refused].map(([partition, error]) => ({
          partition,
          problem: error.message,
        })),
      };
    } catch (error) {
      this.lifecycle = Lifecycle.Closed;
      await this.kv.close().catch(() => undefined);
      throw error;
    }
  }

  private async checkFormat(): Promise<void> {
    const stored = await this.kv.get(FORMAT_KEY);
    if (stored !== undefined) {
      const format = Buffer.from(stored).toString('utf8');
      if (format === STORE_FORMAT) return;
      throw new AppError(
        'failed_precondition',
        `the database at ${this.options.location} is format ${JSON.stringify(format)}, not ` +
          `${STORE_FORMAT}; this state plane cannot read it`,
        { details: { format } },
      );
    }
    for await (const key of this.kv.keys({ limit: 1 })) {
      void key;
      throw new AppError(
        'failed_precondition',
        `the database at ${this.options.location} is not empty and has no journal-store format ` +
          'marker; point the state plane at its own volume',
      );
    }
    await this.kv.write([{ type: 'put', key: FORMAT_KEY, value: utf8.encode(STORE_FORMAT) }], true);
  }

  /** Every partition name with at least one record: one seek per partition. */
  private async discoverPartitions(): Promise<string[]> {
    const names: string[] = [];
    let bound: { gte: Uint8Array } | { gt: Uint8Array } = { gte: ALL_PARTITIONS.gte };
    for (;;) {
      let found: Uint8Array | undefined;
      for await (const key of this.kv.keys({ ...bound, lt: ALL_PARTITIONS.lt, limit: 1 }))
        found = key;
      if (found === undefined) return names;
      const name = partitionOfKey(found);
      if (name === undefined) {
        bound = { gt: found };
        continue;
      }
      names.push(name);
      bound = { gte: partitionRange(name).lt };
    }
  }

  /**
   * Stops taking calls, waits for appends in flight to be durable (or fail), then closes
   * the database. Idempotent; later calls return the same promise.
   */
  close(): Promise<void> {
    this.closing ??= this.doClose();
    return this.closing;
  }

  private async doClose(): Promise<void> {
    const wasOpen = this.lifecycle !== Lifecycle.New;
    this.lifecycle = Lifecycle.Closing;
    await this.opening?.catch(() => undefined);
    await Promise.allSettled([...this.inFlight]);
    await this.committer.whenIdle();
    if (wasOpen) await this.kv.close();
    this.lifecycle = Lifecycle.Closed;
  }

  private assertOpen(): void {
    if (this.lifecycle !== Lifecycle.Open) {
      throw new AppError(
        'unavailable',
        this.lifecycle === Lifecycle.New || this.lifecycle === Lifecycle.Opening
          ? 'the journal store is not open yet; call open() first'
          : 'the journal store is closed',
      );
    }
  }

  /** State of a partition that is not refused; `undefined` when it has no events. */
  private healthy(partition: string): PartitionState | undefined {
    const refused = this.refused.get(partition);
    if (refused !== undefined) throw refused;
    return this.partitions.get(partition);
  }

  private track<T>(work: Promise<T>): Promise<T> {
    this.inFlight.add(work);
    const done = (): void => {
      this.inFlight.delete(work);
    };
    work.then(done, done);
    return work;
  }

  private kindBytes = (kind: string): Uint8Array => {
    let bytes = this.kinds.get(kind);
    if (bytes === undefined) {
      bytes = utf8.encode(kind);
      this.kinds.set(kind, bytes);
    }
    return bytes;
  };

  /**
   * Appends `events` to `partition` if its head is still `expectedHead` (compare-and-swap),
   * closing the batch with a `signed_root` over every event before it, all in one atomic,
   * durable write. Resolves once the write is durable. A new partition starts with
   * `expectedHead` 0. Validation happens before anything is written: a rejected append
   * changes nothing.
   *
   * @throws AppError `invalid_argument` for a bad partition name, an empty or oversized
   *   batch, an unknown or reserved kind (`signed_root`, `key_rotated`), an oversized
   *   payload, or a negative head or fencing token; `fenced` when
   *   `options.fencingToken` is lower than the highest token the partition accepted
   *   (`details.fencingToken`, `details.highestFencingToken`; checked before the head);
   *   `conflict` when the head moved (`details.head` is the current head);
   *   `failed_precondition` when `expectedHead` is beyond the head (the caller saw a
   *   journal this store does not hold), when `options.expectedRoot` is not the last
   *   signed root's (`details.reason` `root_mismatch`), or the partition's signing key is
   *   no longer held; `data_loss` for a refused partition; `cancelled` when `signal`
   *   fired first; `unavailable` when the store is not open or the durable write failed
   *   (nothing was acknowledged; retry against the same head).
   */
  async append(
    partition: string,
    expectedHead: number,
    events: readonly AppendEvent[],
    options: AppendOptions = {},
  ): Promise<AppendResult> {
    this.assertOpen();
    assertPartitionName(partition);
    assertPosition(expectedHead, 'expected head', partition);
    const fencingToken = options.fencingToken ?? 0;
    assertPosition(fencingToken, 'fencing token', partition);
    this.validateEvents(partition, events);
    throwIfAborted(options.signal, `append to ${partition}`);
    return this.track(
      this.mutex.run(partition, async () => {
        throwIfAborted(options.signal, `append to ${partition}`);
        this.assertOpen();
        const state = this.healthy(partition);
        const head = state?.head ?? 0;
        // Before the head check: a stale writer must learn that it lost the lease, not
        // that it should read and retry at the new head (where the compare-and-swap alone
        // would let it through).
        assertNotFenced(partition, state, fencingToken, 'append');
        if (expectedHead < head) {
          throw new AppError(
            'conflict',
            `${partition}: the head moved: expected ${String(expectedHead)}, the head is ${String(head)}; ` +
              `read the events from ${String(expectedHead)} and retry against head ${String(head)}`,
            { details: { partition, expectedHead, head } },
          );
        }
        if (expectedHead > head) {
          throw new AppError(
            'failed_precondition',
            `${partition}: expected head ${String(expectedHead)} is beyond the journal's head ` +
              `${String(head)}: this store never held that position (was the state volume restored ` +
              'from an older backup?); read the head and reconcile before appending',
            { details: { partition, expectedHead, head } },
          );
        }
        assertRootAsExpected(partition, state, options.expectedRoot);
        return this.commit(partition, state, events, fencingToken);
      }),
    );
  }

  private validateEvents(partition: string, events: readonly AppendEvent[]): void {
    const bad = (message: string, details: Record<string, string | number> = {}): AppError =>
      new AppError('invalid_argument', `${partition}: ${message}`, {
        details: { partition, ...details },
      });
    if (events.length === 0) {
      throw bad('an append needs at least one event');
    }
    const { maxBatchEvents, maxPayloadBytes, maxBatchBytes } = this.limits;
    if (events.length > maxBatchEvents) {
      throw bad(
        `an append holds at most ${String(maxBatchEvents)} events, got ${String(events.length)}; split the batch`,
        {
          events: events.length,
          limit: maxBatchEvents,
        },
      );
    }
    let total = 0;
    events.forEach((event, index) => {
      if (!isEventKind(event.kind)) {
        throw bad(
          `event ${String(index)} has unknown kind ${JSON.stringify(String(event.kind).slice(0, 64))}; use a kind from common/event-kinds.ts`,
          {
            index,
          },
        );
      }
      if (RESERVED_KINDS.has(event.kind)) {
        throw bad(
          `event ${String(index)} is a ${event.kind}, which only the store writes (it closes every batch and records key rotations)`,
          {
            index,
            kind: event.kind,
          },
        );
      }
      if (!(event.payload instanceof Uint8Array)) {
        throw bad(`event ${String(index)} (${event.kind}) has no payload bytes`, { index });
      }
      if (event.payload.length > maxPayloadBytes) {
        throw bad(
          `event ${String(index)} (${event.kind}) has a payload of ${String(event.payload.length)} bytes; ` +
            `the limit is ${String(maxPayloadBytes)}: store large content elsewhere and journal a reference`,
          { index, bytes: event.payload.length, limit: maxPayloadBytes },
        );
      }
      total += event.payload.length;
    });
    if (total > maxBatchBytes) {
      throw bad(
        `an append holds at most ${String(maxBatchBytes)} payload bytes, got ${String(total)}; split the batch`,
        {
          bytes: total,
          limit: maxBatchBytes,
        },
      );
    }
  }

  /** Builds, writes durably and only then applies one batch; the partition lock is held. */
  private async commit(
    partition: string,
    state: PartitionState | undefined,
    events: readonly AppendEvent[],
    fencingToken?: number,
    extra?: {
      /** More writes for the same atomic batch (repair's excised markers). */
      readonly ops: readonly KvOp[];
      /** Runs on the built batch before it is written; throwing writes nothing. */
      readonly check: (batch: AppendBatch) => Promise<void>;
    },
  ): Promise<AppendResult> {
    const signer = this.keyring.get(this.activeKeyId);
    if (signer === undefined) throw new Error('unreachable: the active key is in the keyring');
    const fence = Math.max(state?.fence ?? 0, fencingToken ?? 0);
    let handOverFrom: Ed25519Signer | undefined;
    if (state !== undefined && state.lastRoot.keyId !== this.activeKeyId) {
      handOverFrom = this.keyring.get(state.lastRoot.keyId);
      if (handOverFrom === undefined) {
        throw new AppError(
          'failed_precondition',
          `${partition} was last signed by key ${state.lastRoot.keyId}, which this store does not hold, ` +
            `so it cannot be handed over to the active key ${this.activeKeyId}; load the old key as a ` +
            'previous signing key',
          { details: { partition, keyId: state.lastRoot.keyId, activeKeyId: this.activeKeyId } },
        );
      }
    }
    const batch = buildAppendBatch({
      partition,
      hash: this.hash,
      leafHasher: this.leafHasher,
      kindBytes: this.kindBytes,
      mmr: state?.mmr,
      head: state?.head ?? 0,
      genesisKeyId: state?.genesisKeyId ?? this.activeKeyId,
      events,
      signer,
      handOverFrom,
      ...(fence > (state?.fence ?? 0) ? { raiseFence: fence } : {}),
    });
    let bytes = batch.bytes;
    if (extra !== undefined) {
      await extra.check(batch);
      for (const op of extra.ops) {
        batch.ops.push(op);
        bytes += op.key.length + (op.type === 'put' ? op.value.length : 0);
      }
    }
    await this.committer.commit(batch.ops, bytes);
    // Durable: only now does the in-memory state move.
    const firstPosition = state?.head ?? 0;
    if (state === undefined) {
      this.partitions.set(partition, {
        head: batch.head,
        mmr: batch.mmr,
        genesisKeyId: this.activeKeyId,
        lastRoot: batch.signedRoot,
        fence,
      });
    } else {
      state.head = batch.head;
      state.mmr = batch.mmr;
      state.lastRoot = batch.signedRoot;
      state.fence = fence;
    }
    this.appends += 1;
    this.events += batch.head - firstPosition;
    this.notifyCommit(partition, batch.head);
    const rotation = batch.keyRotation;
    return {
      partition,
      firstPosition,
      head: batch.head,
      signedRoot: batch.signedRoot,
      ...(rotation === undefined
        ? {}
        : {
            keyRotation: {
              position: rotation.position,
              oldKeyId: rotation.oldKeyId,
              newKeyId: rotation.newKeyId,
            },
          }),
    };
  }

  private notifyCommit(partition: string, head: number): void {
    const listeners = this.commitListeners.get(partition);
    if (listeners === undefined) return;
    // A copy: a listener may unsubscribe itself or others while being told.
    for (const listener of [...listeners]) {
      try {
        listener(head);
      } catch {
        // The batch is durable and must be acknowledged; a broken listener cannot undo it.
      }
    }
  }

  /**
   * Calls `listener` with the new head after every durable batch of `partition` (appends
   * and key hand-overs alike), from now until the returned function is called. The
   * partition need not exist yet: its first batch is reported too. Subscribe before
   * reading to tail a partition without a gap: a batch committed while the read runs is
   * then reported, and a batch committed before it is within the read's head. Costs one
   * map lookup per batch of a partition nobody listens to.
   *
   * @returns unsubscribe; idempotent. Each call of `subscribe` is its own subscription,
   *   even with the same listener.
   * @throws AppError `invalid_argument` for a bad partition name; `unavailable` when the
   *   store is not open.
   */
  subscribe(partition: string, listener: CommitListener): () => void {
    this.assertOpen();
    assertPartitionName(partition);
    // A wrapper per subscription, so two subscriptions of one function stay two.
    const entry: CommitListener = (head) => listener(head);
    let listeners = this.commitListeners.get(partition);
    if (listeners === undefined) {
      listeners = new Set();
      this.commitListeners.set(partition, listeners);
    }
    listeners.add(entry);
    return () => {
      const current = this.commitListeners.get(partition);
      if (current === undefined || !current.delete(entry)) return;
      if (current.size === 0) this.commitListeners.delete(partition);
    };
  }

  /**
   * Commit listeners currently subscribed, to `partition` or (omitted) to any partition:
   * for metrics and for tests that check subscriptions are released.
   */
  commitListenerCount(partition?: string): number {
    if (partition !== undefined) return this.commitListeners.get(partition)?.size ?? 0;
    let total = 0;
    for (const listeners of this.commitListeners.values()) total += listeners.size;
    return total;
  }

  /**
   * Makes `signer` the store's active key: every root from now on is signed by it, and
   * each partition is handed over (`key_rotated` by its previous key) in its next batch.
   * The previous active key stays held for those hand-overs. Writes nothing itself.
   *
   * @throws AppError `unavailable` when the store is not open.
   */
  useSigningKey(signer: Ed25519Signer): void {
    this.assertOpen();
    const keyId = keyIdOf(this.hash, signer.publicKey);
    this.keyring.set(keyId, signer);
    this.activeKeyId = keyId;
  }

  /** Key id of the active signing key. */
  get signingKeyId(): string {
    return this.activeKeyId;
  }

  /**
   * Rotates to `newSigner` ({@link JournalStore.useSigningKey}, so for the whole store) and
   * hands `partition` over at once: one atomic batch of a `key_rotated` event signed by the
   * partition's previous key and a `signed_root` by the new key. The head moves by 2, so a
   * concurrent append against the old head gets a conflict. Returns `undefined` when the
   * partition is already signed by `newSigner` (nothing written).
   *
   * @throws AppError `not_found` when the partition has no events (its first batch will be
   *   signed by the active key anyway); `failed_precondition` when its current key is not
   *   held; `data_loss` for a refused partition; `unavailable` as for append.
   */
  async rotateKey(partition: string, newSigner: Ed25519Signer): Promise<AppendResult | undefined> {
    this.assertOpen();
    assertPartitionName(partition);
    return this.track(
      this.mutex.run(partition, async () => {
        this.assertOpen();
        const state = this.healthy(partition);
        if (state === undefined) {
          throw new AppError(
            'not_found',
            `${partition} has no events, so there is no key to rotate; its first batch is signed by the active key`,
            { details: { partition } },
          );
        }
        this.useSigningKey(newSigner);
        if (state.lastRoot.keyId === this.activeKeyId) return undefined;
        return this.commit(partition, state, []);
      }),
    );
  }

  /**
   * Makes a damaged partition readable again without breaking verification
   * (docs/journal-format.md, "Excision"). Finds every unreadable entry below the head: its
   * payload does not decode as the protobuf message its kind names, its kind is unknown,
   * its record is damaged or missing, or its bytes no longer hash to the leaf digest
   * stored in the MMR when it was signed. Unless `dryRun`, replaces each, in one atomic
   * durable batch, with an excised marker keeping that stored leaf digest (so every root
   * before and after still verifies), and appends one signed `excision` event per entry
   * (position, leaf digest, actor, reason, time, problem) and the closing `signed_root`.
   *
   * Before anything is written (and in a dry run too) the partition is replayed with the
   * excisions in place and the new batch after them; unless that verifies, nothing is
   * written: damage that excision cannot explain (a changed MMR node or root, a broken key
   * chain) needs a backup. A partition with nothing unreadable is left as it is.
   *
   * @throws AppError `invalid_argument` for a bad name, or an empty or overlong `actor` or
   *   `reason`; `not_found` for a partition with no events; `data_loss` for a partition
   *   open() refused (its tail is damaged: restore it from a backup), when a stored leaf
   *   digest is missing, or when the repaired journal would not verify; `fenced` as for
   *   append; `cancelled`; `unavailable` as for append.
   */
  async repair(partition: string, options: RepairOptions): Promise<RepairResult> {
    this.assertOpen();
    assertPartitionName(partition);
    const actor = assertText(options.actor, 'an actor', MAX_ACTOR_CHARS, partition);
    const reason = assertText(options.reason, 'a reason', MAX_REASON_CHARS, partition);
    const fencingToken = options.fencingToken ?? 0;
    assertPosition(fencingToken, 'fencing token', partition);
    const dryRun = options.dryRun ?? false;
    throwIfAborted(options.signal, `repair of ${partition}`);
    return this.track(
      this.mutex.run(partition, async () => {
        this.assertOpen();
        const state = this.healthy(partition);
        if (state === undefined) {
          throw new AppError('not_found', `${partition} has no events`, { details: { partition } });
        }
        assertNotFenced(partition, state, fencingToken, 'repair');
        const replayer = new StreamingJournalVerifier({
          hash: this.hash,
          trustedPublicKeys: await this.genesisTrust(partition, state),
          partition,
          checkSignatures: (checks) =>
            Promise.resolve(
              checks.map((c) => this.verifier.verify(c.publicKey, c.message, c.signature)),
            ),
        });
        const found = await this.findUnreadable(partition, state.head, replayer, options.signal);
        if (found.length === 0) {
          return {
            partition,
            dryRun,
            excised: [],
            head: state.head,
            message:
              `${partition}: nothing to repair: all ${String(state.head)} entries read and hash to ` +
              'their signed leaf digests; nothing was written',
          };
        }
        const excisedAtMs = (options.now ?? Date.now)();
        const events = found.map((entry) => ({
          kind: EventKind.Excision,
          payload: encodePayload(EventKind.Excision, {
            position: entry.position,
            leafDigest: Buffer.from(entry.leaf),
            actor,
            reason,
            excisedAtMs,
            problem: entry.problem,
          }),
        }));
        const markers: KvOp[] = found.map((entry) => ({
          type: 'put',
          key: eventKey(partition, entry.position),
          value: encodeExcisedValue(entry.leaf),
        }));
        const positions = found.map((e) => String(e.position)).join(', ');
        const check = async (batch: AppendBatch): Promise<void> => {
          // The batch's own events, as a verifier will read them after the stored ones.
          let position = state.head;
          for (const op of batch.ops) {
            if (op.type !== 'put' || !bytesEqual(op.key, eventKey(partition, position))) continue;
            replayer.add({ position, ...decodeEventValue(op.value, partition, position) });
            position += 1;
          }
          const outcome = await replayer.finish();
          if (outcome.failure !== undefined || outcome.unsealed.count > 0) {
            throw new AppError(
              'data_loss',
              `${partition}: excising ${positions} would not leave a journal that verifies` +
                (outcome.failure === undefined
                  ? ''
                  : ` (${outcome.failure.reason} at ${String(outcome.failure.position)}: ${outcome.failure.message})`) +
                '; the damage is not confined to entries (an MMR node, a root or the key chain changed): ' +
                'nothing was written; restore the partition from a backup',
              { details: { partition, positions } },
            );
          }
          if (dryRun) throw new DryRunDone();
        };
        let result: AppendResult;
        try {
          result = await this.commit(partition, state, events, fencingToken, {
            ops: markers,
            check,
          });
        } catch (error) {
          if (!(error instanceof DryRunDone)) throw error;
          return {
            partition,
            dryRun,
            excised: found,
            head: state.head,
            message:
              `${partition}: dry run: would excise ${String(found.length)} unreadable ` +
              `entr${found.length === 1 ? 'y' : 'ies'} (${positions}); the repaired journal would ` +
              'verify; nothing was written',
          };
        }
        return {
          partition,
          dryRun,
          excised: found,
          head: result.head,
          signedRoot: result.signedRoot,
          message:
            `${partition}: excised ${String(found.length)} unreadable entr${found.length === 1 ? 'y' : 'ies'} ` +
            `(${positions}), each recorded by a signed excision event; the head is now ${String(result.head)}`,
        };
      }),
    );
  }

  /**
   * Reads `[0, head)` with the stored leaf digests, feeding `replayer` (an unreadable entry
   * as excised), and returns the unreadable entries.
   */
  private async findUnreadable(
    partition: string,
    head: number,
    replayer: StreamingJournalVerifier,
    signal: AbortSignal | undefined,
  ): Promise<UnreadableEntry[]> {
    const found: UnreadableEntry[] = [];
    let expected = 0;
    const take = async (
      entries: readonly (readonly [number, Uint8Array | undefined])[],
    ): Promise<void> => {
      const leaves = await this.kv.getMany(
        entries.map(([position]) => nodeKey(partition, leafNodePosition(position))),
      );
      entries.forEach(([position, value], i) => {
        const leaf = leaves[i];
        if (leaf === undefined || leaf.length !== 32) {
          throw new AppError(
            'data_loss',
            `${partition}: the stored leaf digest of entry ${String(position)} is missing or damaged, ` +
              'so the entry cannot be excised; nothing was written; restore the partition from a backup',
            { details: { partition, position } },
          );
        }
        const problem =
          value === undefined
            ? 'the entry is missing from the store'
            : unreadable(this.leafHasher, partition, position, value, leaf);
        if (problem === undefined && value !== undefined) {
          replayer.add({ position, ...decodeEventValue(value, partition, position) });
          return;
        }
        found.push({ position, leaf, problem: problem ?? 'unreadable' });
        replayer.add({ position, kind: '', payload: new Uint8Array(0), excisedLeaf: leaf });
      });
    };
    const range = positionRange(partition, RecordTag.Event, 0, head);
    for await (const entries of readAhead(this.kv.entries(range))) {
      throwIfAborted(signal, `repair of ${partition}`);
      const batch: [number, Uint8Array | undefined][] = [];
      for (const [key, value] of entries) {
        const position = positionOfKey(key);
        for (; expected < position; expected++) batch.push([expected, undefined]);
        batch.push([position, value]);
        expected = position + 1;
      }
      await take(batch);
    }
    const missing: [number, undefined][] = [];
    for (; expected < head; expected++) missing.push([expected, undefined]);
    if (missing.length > 0) await take(missing);
    return found;
  }

  /**
   * The head of `partition` as of its last acknowledged batch (head 0 and no root for a
   * partition with no events).
   *
   * @throws AppError `invalid_argument` for a bad name; `data_loss` for a refused
   *   partition; `unavailable` when the store is not open.
   */
  head(partition: string): PartitionHead {
    this.assertOpen();
    assertPartitionName(partition);
    const state = this.healthy(partition);
    return { partition, head: state?.head ?? 0, signedRoot: state?.lastRoot };
  }

  /**
   * Streams the acknowledged events of `partition` at positions `[fromPosition,
   * fromPosition + limit)`, in order, stopping at the head as it was when iteration
   * started. Reads in small chunks from a LevelDB snapshot: memory stays bounded, and a
   * slow consumer is backpressure. Errors surface on the first `next()`.
   *
   * @throws AppError `invalid_argument` for a bad name or position; `failed_precondition`
   *   when `fromPosition` is beyond the head; `data_loss` for a refused partition or a
   *   missing or damaged event; `cancelled` when `signal` fires; `unavailable` when the
   *   store is not open.
   */
  read(
    partition: string,
    fromPosition = 0,
    limit = Number.MAX_SAFE_INTEGER,
    options: ReadOptions = {},
  ): AsyncIterable<JournalEvent> {
    return this.readEvents(partition, fromPosition, limit, options.signal);
  }

  private async *readEvents(
    partition: string,
    fromPosition: number,
    limit: number,
    signal: AbortSignal | undefined,
  ): AsyncGenerator<JournalEvent> {
    this.assertOpen();
    assertPartitionName(partition);
    assertPosition(fromPosition, 'from position', partition);
    assertPosition(limit, 'limit', partition);
    const head = this.healthy(partition)?.head ?? 0;
    if (fromPosition > head) {
      throw new AppError(
        'failed_precondition',
        `${partition}: position ${String(fromPosition)} is beyond the head ${String(head)}`,
        { details: { partition, fromPosition, head } },
      );
    }
    const to = Math.min(head, fromPosition + limit);
    if (to <= fromPosition) return;
    let expected = fromPosition;
    for await (const [key, value] of this.kv.entries(
      positionRange(partition, RecordTag.Event, fromPosition, to),
    )) {
      if (signal?.aborted === true) {
        throw new AppError('cancelled', `reading ${partition} was cancelled`, {
          cause: signal.reason,
        });
      }
      const position = positionOfKey(key);
      if (position !== expected) break;
      yield { position, ...decodeEventValue(value, partition, position) };
      expected += 1;
    }
    if (expected !== to) {
      throw new AppError(
        'data_loss',
        `${partition}: acknowledged event ${String(expected)} is missing from the store; run verify ` +
          'and restore the partition from a backup',
        { details: { partition, position: expected } },
      );
    }
  }

  /**
   * An inclusion proof of the event at `position` against the signed root over
   * `atLeafCount` leaves (default: the latest). `atLeafCount` must be the position of a
   * `signed_root` event, i.e. the head after some batch. The store checks the proof before
   * returning it.
   *
   * @throws AppError `invalid_argument` for a bad name or position, a position not below
   *   `atLeafCount`, or an `atLeafCount` that is not the position of a `signed_root`;
   *   `not_found` for a partition with no events; `failed_precondition` for an
   *   `atLeafCount` beyond the latest root; `data_loss` when a needed node or event is
   *   missing or the proof does not lead to the signed root; `unavailable` when the store
   *   is not open.
   */
  async proof(partition: string, position: number, atLeafCount?: number): Promise<EventProof> {
    this.assertOpen();
    assertPartitionName(partition);
    assertPosition(position, 'position', partition);
    const state = this.healthy(partition);
    if (state === undefined) {
      throw new AppError('not_found', `${partition} has no events`, { details: { partition } });
    }
    const latest = state.lastRoot;
    const leafCount = atLeafCount ?? latest.leafCount;
    assertPosition(leafCount, 'leaf count', partition);
    if (leafCount > latest.leafCount) {
      throw new AppError(
        'failed_precondition',
        `${partition}: no signed root over ${String(leafCount)} leaves yet; the latest covers ${String(latest.leafCount)}`,
        { details: { partition, leafCount, latest: latest.leafCount } },
      );
    }
    if (position >= leafCount) {
      throw new AppError(
        'invalid_argument',
        `${partition}: event ${String(position)} is not covered by the root over ${String(leafCount)} leaves; ` +
          'prove it against a later signed root',
        { details: { partition, position, leafCount } },
      );
    }
    const signedRoot =
      leafCount === latest.leafCount ? latest : await this.signedRootAt(partition, leafCount);
    const nodePositions = inclusionProofPositions(position, leafCount);
    const [eventValue, ...nodeValues] = await this.kv.getMany([
      eventKey(partition, position),
      ...nodePositions.map((p) => nodeKey(partition, p)),
    ]);
    if (eventValue === undefined) {
      throw new AppError(
        'data_loss',
        `${partition}: acknowledged event ${String(position)} is missing`,
        {
          details: { partition, position },
        },
      );
    }
    const nodes = new Map<number, Uint8Array>();
    nodePositions.forEach((p, i) => {
      const value = nodeValues[i];
      if (value !== undefined) nodes.set(p, value);
    });
    const event = { position, ...decodeEventValue(eventValue, partition, position) };
    const leaf =
      event.excisedLeaf ?? new LeafHasher(this.hash).digest(position, event.kind, event.payload);
    const proof = buildInclusionProof(position, leafCount, (p) => nodes.get(p));
    verifyInclusion(this.hash, proof, leaf, signedRoot.root);
    return { event, leaf, proof, signedRoot };
  }

  private async signedRootAt(partition: string, leafCount: number): Promise<StoredSignedRoot> {
    const value = await this.kv.get(eventKey(partition, leafCount));
    const notRoot = (): AppError =>
      new AppError(
        'invalid_argument',
        `${partition}: event ${String(leafCount)} is not a signed_root, so no root over ${String(leafCount)} ` +
          'leaves was signed; pass the position of a signed_root (the head after a batch)',
        { details: { partition, leafCount } },
      );
    if (value === undefined) throw notRoot();
    const { kind, payload } = decodeEventValue(value, partition, leafCount);
    if (kind !== EventKind.SignedRoot) throw notRoot();
    let fields;
    try {
      fields = decodePayload(EventKind.SignedRoot, payload);
    } catch (cause) {
      throw new AppError(
        'data_loss',
        `${partition}: the signed_root at ${String(leafCount)} does not parse`,
        {
          details: { partition, position: leafCount },
          cause,
        },
      );
    }
    return storedSignedRootOf(leafCount, fields);
  }

  /**
   * Replays the stored events of `partition` through the pure verifier
   * (state/journal/verify-journal.ts): recomputes every leaf, node and root, checks every
   * signature and key rotation, and names the first failure as the core reports it
   * (`failure.position`, `reason`, `expected`, `found`). Also runs on a refused partition,
   * over whatever events are stored. Memory: O(log n) plus one small record per signed
   * root. If fewer events are stored than the head says, the result fails with `gap` at
   * the first missing position.
   *
   * @throws AppError `not_found` for a partition with no records; `failed_precondition`
   *   when no trusted key is given and the store does not hold the partition's first key;
   *   `cancelled`; `unavailable` when the store is not open.
   */
  async verify(partition: string, options: VerifyOptions = {}): Promise<JournalVerification> {
    this.assertOpen();
    assertPartitionName(partition);
    const state = this.partitions.get(partition);
    if (state === undefined && !this.refused.has(partition)) {
      throw new AppError('not_found', `${partition} has no events`, { details: { partition } });
    }
    const trustedPublicKeys =
      options.trustedPublicKeys ?? (await this.genesisTrust(partition, state));
    const replayer = new StreamingJournalVerifier({
      hash: this.hash,
      trustedPublicKeys,
      partition,
      ...(options.checkpoint === undefined ? {} : { checkpoint: options.checkpoint }),
      checkSignatures:
        options.checkSignatures ??
        ((checks) =>
          Promise.resolve(
            checks.map((c) => this.verifier.verify(c.publicKey, c.message, c.signature)),
          )),
    });
    const range = positionRange(partition, RecordTag.Event, 0, state?.head);
    for await (const entries of readAhead(this.kv.entries(range))) {
      for (const [key, value] of entries) {
        if (options.signal?.aborted === true) {
          throw new AppError('cancelled', `verifying ${partition} was cancelled`, {
            cause: options.signal.reason,
          });
        }
        const position = positionOfKey(key);
        let event: JournalEvent;
        try {
          event = { position, ...decodeEventValue(value, partition, position) };
        } catch {
          // A damaged record still takes part, so the first root after it names the damage.
          event = { position, kind: '', payload: value };
        }
        replayer.add(event);
      }
    }
    const outcome = await replayer.finish();
    if (outcome.failure === undefined && state !== undefined && outcome.leafCount < state.head) {
      const missing = outcome.leafCount;
      return {
        ...outcome,
        ok: false,
        failure: {
          position: missing,
          kind: '',
          reason: VerifyFailureReason.Gap,
          expected: toHex(encodeU64(missing)),
          found: '',
          message:
            `${partition}: events ${String(missing)} to ${String(state.head - 1)} are acknowledged but missing ` +
            'from the store; restore the partition from a backup',
        },
      };
    }
    return outcome;
  }

  private async genesisTrust(
    partition: string,
    state: PartitionState | undefined,
  ): Promise<Uint8Array[]> {
    let genesisKeyId = state?.genesisKeyId;
    if (genesisKeyId === undefined) {
      const record = await this.kv.get(headKey(partition));
      try {
        if (record !== undefined) genesisKeyId = decodeHeadRecord(record, partition).genesisKeyId;
      } catch (error) {
        if (!isAppError(error)) throw error;
      }
    }
    if (genesisKeyId === undefined) {
      // A refused partition without a readable head record: trust every key held.
      return [...this.keyring.values()].map((s) => s.publicKey);
    }
    const signer = this.keyring.get(genesisKeyId);
    if (signer === undefined) {
      throw new AppError(
        'failed_precondition',
        `${partition}'s first root was signed by key ${genesisKeyId}, which this store does not hold; ` +
          'pass that public key in trustedPublicKeys',
        { details: { partition, keyId: genesisKeyId } },
      );
    }
    return [signer.publicKey];
  }

  /**
   * Streams a partition as typed records (journal-export.ts): a header with what the store
   * claims (`head` and `checkpoint` undefined for a refused partition), then every stored
   * event in order. Works on refused partitions (exports whatever is stored).
   *
   * @throws AppError `invalid_argument` for a bad name; `not_found` for a partition with no
   *   records; `cancelled`; `unavailable` when the store is not open. Errors surface on the
   *   first `next()`.
   */
  exportRecords(partition: string, options: ReadOptions = {}): AsyncIterable<StoreExportRecord> {
    return this.exportFrom(partition, options.signal);
  }

  private async *exportFrom(
    partition: string,
    signal: AbortSignal | undefined,
  ): AsyncGenerator<StoreExportRecord> {
    this.assertOpen();
    assertPartitionName(partition);
    const state = this.partitions.get(partition);
    if (state === undefined && !this.refused.has(partition)) {
      throw new AppError('not_found', `${partition} has no events`, { details: { partition } });
    }
    yield* exportRecords(this.kv, partition, state, signal);
  }

  /**
   * {@link JournalStore.exportRecords} as NDJSON (UTF-8, one JSON object per line) that a
   * third party can verify with docs/journal-format.md alone: first
   * `{"format":"polychrome-journal-export/v1","partition":…,"head":…,"checkpoint":…}`
   * (`head` and `checkpoint` null for a refused partition), then
   * `{"position":…,"kind":…,"payloadHex":…}` per stored event (an excised entry as
   * `{"position":…,"excised":true,"leafHex":…}`). Throws as `exportRecords`.
   */
  export(partition: string, options: ReadOptions = {}): AsyncIterable<Uint8Array> {
    return exportNdjson(this.exportRecords(partition, options));
  }

  /**
   * Every partition the store holds, sorted by name, with refused ones marked.
   *
   * @throws AppError `unavailable` when the store is not open.
   */
  listPartitions(): PartitionInfo[] {
    this.assertOpen();
    const out: PartitionInfo[] = [];
    for (const [partition, state] of this.partitions)
      out.push({ partition, status: 'ok', head: state.head });
    for (const [partition, error] of this.refused)
      out.push({ partition, status: 'refused', problem: error.message });
    return out.sort((a, b) => (a.partition < b.partition ? -1 : a.partition > b.partition ? 1 : 0));
  }

  /** Counters for metrics (valid in any state). */
  stats(): JournalStoreStats {
    return {
      ...this.committer.counters(),
      appends: this.appends,
      events: this.events,
      partitions: this.partitions.size,
      refusedPartitions: this.refused.size,
    };
  }
}
