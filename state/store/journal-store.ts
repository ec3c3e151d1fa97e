import type { Ed25519Signer, Ed25519Verifier } from '../journal/ed25519';
import { createNodeEd25519Verifier } from '../journal/node-ed25519';
import { nodeSha256 } from '../journal/node-sha256';
import type { Sha256 } from '../journal/sha256';
import type { JournalEvent, JournalVerification } from '../journal/verification-types';
import { CommitListeners } from './commit-listeners';
import { GroupCommitter } from './group-commit';
import {
  appendResultOf,
  assertAppendable,
  batchWriter,
  validateEvents,
  writeBatch,
  type BatchWriter,
  type WrittenBatch,
} from './journal-append';
import { assertPosition, noEvents, throwIfAborted } from './journal-checks';
import { exportNdjson, exportRecords, type StoreExportRecord } from './journal-export';
import { noKeyToRotate, SigningKeyring } from './journal-keyring';
import { PartitionTable } from './journal-partitions';
import { proveEvent } from './journal-proofs';
import { readEvents } from './journal-read';
import { erasePartition, repairPartition, type ExcisionContext } from './journal-excisions';
import { clearMemoryPartition } from './journal-memory-clear';
import {
  resolveLimits,
  type AppendEvent,
  type AppendOptions,
  type AppendResult,
  type ClearMemoryOptions,
  type CommitListener,
  type EraseOptions,
  type EraseResult,
  type EventProof,
  type JournalStoreLimits,
  type JournalStoreOptions,
  type JournalStoreStats,
  type OpenReport,
  type PartitionHead,
  type PartitionInfo,
  type ReadOptions,
  type RepairOptions,
  type RepairResult,
  type VerifyOptions,
} from './journal-store-types';
import { verifyPartition } from './journal-verify';
import { createLevelKv, type KvStore } from './level-kv';
import { assertPartitionName } from '../../common/partition-name';
import type { PartitionState } from './recover-partition';
import { StoreLifecycle } from './store-lifecycle';
import { StorageGuard } from './storage-guard';
import { openPartitions, recoverStorage, type RecoverParts } from './storage-recovery';
import { retirementOf, retirePartition } from './journal-retire';
import type { PartitionRetirement, RetireOptions, RetireResult } from './retirement-types';

/**
 * The state plane's durable journal store: many `conv-{id}` partitions in one LevelDB
 * database, each an append-only, signed journal (docs/journal-format.md;
 * state/store/README.md). This class owns the store's state (the LevelDB handle, the
 * partition table, the lifecycle and locks, the signing keys, the commit listeners) and
 * hands each call to the module of its responsibility (journal-append.ts, -repair.ts,
 * -retire.ts, -proofs.ts, -verify.ts, -export.ts, -read.ts, -open.ts) with what that
 * needs. An append is acknowledged once its one atomic write is durable; the in-memory
 * state moves only then. Its calls in one place: state/store/README.md, "API".
 */
export class JournalStore {
  private readonly kv: KvStore;
  /** Every write goes through it: refused while the volume is full (storage-guard.ts). */
  readonly storage: StorageGuard;
  private readonly hash: Sha256;
  private readonly verifier: Ed25519Verifier;
  private readonly limits: JournalStoreLimits;
  private readonly committer: GroupCommitter;
  private readonly keyring: SigningKeyring;
  /** What appends and repairs write with (the kinds' bytes cached). */
  private readonly writer: BatchWriter;
  private readonly table = new PartitionTable();
  private readonly listeners = new CommitListeners();
  private readonly life = new StoreLifecycle();
  private opening: Promise<OpenReport> | undefined;
  private closing: Promise<void> | undefined;

  /**
   * Builds the store; nothing is read until {@link JournalStore.open}.
   *
   * @throws AppError `invalid_argument` for a limit that is not a positive integer.
   */
  constructor(private readonly options: JournalStoreOptions) {
    this.hash = options.hash ?? nodeSha256;
    this.verifier = options.verifier ?? createNodeEd25519Verifier();
    this.limits = resolveLimits(options.limits);
    this.storage = new StorageGuard(options.kv ?? createLevelKv(options.location));
    this.kv = this.storage;
    this.committer = new GroupCommitter(this.kv, this.limits.maxGroupBytes);
    this.keyring = new SigningKeyring(this.hash, options.signer, options.previousSigners);
    this.writer = batchWriter(this.hash, this.keyring, this.committer);
  }

  /**
   * Opens the database and checks every partition's tail (journal-open.ts): a
   * never-acknowledged tail is deleted; a damaged partition is refused with `data_loss`
   * while the others open. Calling it again returns the same report.
   *
   * @throws AppError as `openStore` (journal-open.ts); `failed_precondition` once closed.
   */
  open(): Promise<OpenReport> {
    const closed = this.life.closedError();
    if (closed !== undefined) return Promise.reject(closed);
    this.opening ??= openPartitions(this.openParts());
    return this.opening;
  }

  /** After a failed write, reopens the database: `recoverStorage` (storage-recovery.ts). */
  recoverStorage(): Promise<OpenReport | undefined> {
    return recoverStorage(this.openParts());
  }

  private openParts(): RecoverParts {
    const { kv, hash, table, life, committer, storage } = this;
    return { kv, hash, table, location: this.options.location, life, committer, storage };
  }

  /** Stops taking calls, lets appends in flight end, closes the database; idempotent. */
  close(): Promise<void> {
    this.closing ??= this.doClose();
    return this.closing;
  }

  private async doClose(): Promise<void> {
    const wasOpened = await this.life.startClosing(this.opening);
    await this.committer.whenIdle();
    if (wasOpened) await this.kv.close();
    this.life.finishClosing();
  }

  /**
   * Appends `events` to `partition` if its head is still `expectedHead` (compare-and-swap),
   * closing the batch with a `signed_root` over every event before it, all in one atomic,
   * durable write; resolves once it is durable. A new partition starts with `expectedHead`
   * 0. A rejected append changes nothing.
   *
   * @throws AppError `invalid_argument` for a bad partition name, an empty or oversized
   *   batch, an unknown or reserved kind, an oversized payload, or a negative head or
   *   fencing token; `fenced` when `options.fencingToken` is lower than the highest token
   *   the partition accepted (checked before the head); `conflict` when the head moved
   *   (`details.head`); `failed_precondition` when `expectedHead` is beyond the head, when
   *   `options.expectedRoot` is not the last signed root's (`details.reason`
   *   `root_mismatch`), or the partition's signing key is no longer held; `data_loss` for
   *   a refused partition; `cancelled` when `signal` fired first; `unavailable` when the
   *   store is not open or the durable write failed (retry against the same head).
   */
  async append(
    partition: string,
    expectedHead: number,
    events: readonly AppendEvent[],
    options: AppendOptions = {},
  ): Promise<AppendResult> {
    this.life.assertOpen();
    assertPartitionName(partition);
    assertPosition(expectedHead, 'expected head', partition);
    const fencingToken = options.fencingToken ?? 0;
    assertPosition(fencingToken, 'fencing token', partition);
    validateEvents(partition, events, this.limits);
    const abort = { signal: options.signal, what: `append to ${partition}` };
    throwIfAborted(abort.signal, abort.what);
    return this.life.locked(
      partition,
      async () => {
        const state = this.table.healthy(partition);
        const { expectedRoot } = options;
        assertAppendable(partition, state, expectedHead, { fencingToken, expectedRoot });
        const written = await writeBatch(this.writer, partition, state, events, fencingToken);
        return this.apply(partition, state, written);
      },
      abort,
    );
  }

  /** Moves the in-memory state to a durable batch (only now), then tells the listeners. */
  private apply(
    partition: string,
    state: PartitionState | undefined,
    written: WrittenBatch,
  ): AppendResult {
    this.table.advance(partition, state, written);
    this.listeners.notify(partition, written.batch.head);
    return appendResultOf(partition, written);
  }

  /**
   * Calls `listener` with the new head after every durable batch of `partition`, from now
   * until the returned function (idempotent) is called, before the batch is acknowledged;
   * it must be cheap and must not throw. The partition need not exist yet. Subscribe
   * before reading to tail without a gap (state/store/README.md, "Commit listeners").
   *
   * @throws AppError `invalid_argument` for a bad partition name; `unavailable` when the
   *   store is not open.
   */
  subscribe(partition: string, listener: CommitListener): () => void {
    this.life.assertOpen();
    assertPartitionName(partition);
    return this.listeners.subscribe(partition, listener);
  }

  /** Commit listeners subscribed, to `partition` or (omitted) to any partition. */
  commitListenerCount(partition?: string): number {
    return this.listeners.count(partition);
  }

  /**
   * Makes `signer` the store's active key: every root from now on is signed by it, and
   * each partition is handed over (`key_rotated` by its previous key) in its next batch.
   * The previous active key stays held. Writes nothing itself.
   *
   * @throws AppError `unavailable` when the store is not open.
   */
  useSigningKey(signer: Ed25519Signer): void {
    this.life.assertOpen();
    this.keyring.use(signer);
  }

  /** Key id of the active signing key. */
  get signingKeyId(): string {
    return this.keyring.activeKeyId;
  }

  /**
   * {@link JournalStore.useSigningKey} and the hand-over of `partition` at once: one
   * atomic batch of a `key_rotated` event and a `signed_root` by the new key (the head
   * moves by 2). `undefined` when the partition is already signed by `newSigner`.
   *
   * @throws AppError `not_found` when the partition has no events; `failed_precondition`
   *   when its current key is not held; `data_loss` for a refused partition;
   *   `unavailable` as for append.
   */
  async rotateKey(partition: string, newSigner: Ed25519Signer): Promise<AppendResult | undefined> {
    this.life.assertOpen();
    assertPartitionName(partition);
    return this.life.locked(partition, async () => {
      const state = this.table.healthy(partition);
      if (state === undefined) throw noKeyToRotate(partition);
      this.keyring.use(newSigner);
      if (state.lastRoot.keyId === this.keyring.activeKeyId) return undefined;
      return this.apply(partition, state, await writeBatch(this.writer, partition, state, []));
    });
  }

  /** Excises every unreadable entry, as `repairPartition` (journal-excisions.ts) says. */
  repair(partition: string, options: RepairOptions): Promise<RepairResult> {
    return repairPartition(this.excisionContext(), partition, options);
  }

  /** Erases named readable entries as repair excises (journal-erase.ts); throws as repair. */
  erase(partition: string, options: EraseOptions): Promise<EraseResult> {
    return erasePartition(this.excisionContext(), partition, options);
  }

  /** A memory clear and its erasure in one batch, as `clearMemoryPartition` says. */
  clearMemory(p: string, head: number, bytes: Uint8Array, options?: ClearMemoryOptions) {
    return clearMemoryPartition(this.excisionContext(), p, head, bytes, options);
  }

  private excisionContext(): ExcisionContext {
    const { kv, verifier, writer, life, table, limits } = this;
    return { life, table, parts: { kv, verifier, writer }, apply: this.apply.bind(this), limits };
  }

  /** Retires `partition`, as `retirePartition` (journal-retire.ts) says; throws as it. */
  retire(partition: string, options: RetireOptions): Promise<RetireResult> {
    const { kv, hash, keyring, table, life, listeners } = this;
    return retirePartition({ kv, hash, keyring, table, life, listeners }, partition, options);
  }

  /** The retirement of `partition`. @throws AppError as `retirementOf` (journal-retire.ts). */
  retirement(partition: string): PartitionRetirement {
    return retirementOf(this.life, this.table, partition);
  }

  /**
   * The head of `partition` as of its last acknowledged batch (0 and no root when it has
   * no events). @throws AppError `invalid_argument`, `data_loss` (refused), `unavailable`.
   */
  head(partition: string): PartitionHead {
    this.life.assertOpen();
    assertPartitionName(partition);
    const state = this.table.healthy(partition);
    return { partition, head: state?.head ?? 0, signedRoot: state?.lastRoot };
  }

  /**
   * Streams the acknowledged events at `[fromPosition, fromPosition + limit)` in order,
   * up to the head as iteration started (journal-read.ts). Errors surface on `next()`.
   *
   * @throws AppError `invalid_argument` for a bad name or position; `failed_precondition`
   *   when `fromPosition` is beyond the head; `data_loss` for a refused partition or a
   *   missing or damaged event; `cancelled`; `unavailable` when the store is not open.
   */
  read(
    partition: string,
    fromPosition = 0,
    limit = Number.MAX_SAFE_INTEGER,
    options: ReadOptions = {},
  ): AsyncIterable<JournalEvent> {
    return this.readFrom(partition, fromPosition, limit, options.signal);
  }

  private async *readFrom(
    partition: string,
    fromPosition: number,
    limit: number,
    signal: AbortSignal | undefined,
  ): AsyncGenerator<JournalEvent> {
    this.life.assertOpen();
    assertPartitionName(partition);
    assertPosition(fromPosition, 'from position', partition);
    assertPosition(limit, 'limit', partition);
    const head = this.table.healthy(partition)?.head ?? 0;
    yield* readEvents(this.kv, partition, head, fromPosition, limit, signal);
  }

  /**
   * An inclusion proof of the event at `position` against the signed root over
   * `atLeafCount` leaves (default: the latest; else the position of a `signed_root`),
   * checked before it is returned (journal-proofs.ts).
   *
   * @throws AppError `invalid_argument` for a bad name, position or `atLeafCount`;
   *   `not_found` for a partition with no events; `failed_precondition` for an
   *   `atLeafCount` beyond the latest root; `data_loss` when a needed record is missing or
   *   the proof does not lead to the root; `unavailable` when the store is not open.
   */
  async proof(partition: string, position: number, atLeafCount?: number): Promise<EventProof> {
    this.life.assertOpen();
    assertPartitionName(partition);
    assertPosition(position, 'position', partition);
    const state = this.table.healthy(partition);
    if (state === undefined) throw noEvents(partition);
    return proveEvent(this.kv, this.hash, partition, state, position, atLeafCount);
  }

  /**
   * Replays the stored events of `partition` through the pure verifier (journal-verify.ts)
   * and names the first failure; also on a refused partition. Fewer events stored than
   * the head says fails with `gap`.
   *
   * @throws AppError `not_found` for a partition with no records; `failed_precondition`
   *   when no trusted key is given and the store does not hold the partition's first key;
   *   `cancelled`; `unavailable` when the store is not open.
   */
  async verify(partition: string, options: VerifyOptions = {}): Promise<JournalVerification> {
    this.life.assertOpen();
    assertPartitionName(partition);
    const parts = { kv: this.kv, hash: this.hash, keyring: this.keyring, verifier: this.verifier };
    return verifyPartition(parts, partition, this.table.stored(partition), options);
  }

  /**
   * Streams `partition` as typed records (journal-export.ts): a header with what the store
   * claims, then every stored event in order; also a refused partition's.
   *
   * @throws AppError `invalid_argument` for a bad name; `not_found` for a partition with no
   *   records; `cancelled`; `unavailable` when the store is not open; on the first `next()`.
   */
  exportRecords(partition: string, options: ReadOptions = {}): AsyncIterable<StoreExportRecord> {
    return this.exportFrom(partition, options.signal);
  }

  private async *exportFrom(
    partition: string,
    signal: AbortSignal | undefined,
  ): AsyncGenerator<StoreExportRecord> {
    this.life.assertOpen();
    assertPartitionName(partition);
    yield* exportRecords(this.kv, partition, this.table.stored(partition), signal);
  }

  /** {@link JournalStore.exportRecords} as NDJSON lines (journal-export.ts); throws as it. */
  export(partition: string, options: ReadOptions = {}): AsyncIterable<Uint8Array> {
    return exportNdjson(this.exportRecords(partition, options));
  }

  /**
   * Every key and value in key order, from one snapshot taken at the first `next()`: a
   * backup's journal half. @throws AppError `unavailable` when not open or reopened.
   */
  backupEntries(): AsyncIterable<readonly [Uint8Array, Uint8Array]> {
    this.life.assertOpen();
    return this.kv.entries({});
  }

  /** Every partition, sorted by name, refused ones marked. @throws AppError `unavailable`. */
  listPartitions(): PartitionInfo[] {
    this.life.assertOpen();
    return this.table.list();
  }

  /** Counters for metrics (valid in any state). */
  stats(): JournalStoreStats {
    return { ...this.committer.counters(), ...this.table.counters() };
  }
}
