/**
 * The state plane's journal without the network: a real {@link JournalStore} (LevelDB in a
 * temporary directory, a real ed25519 signing key) behind the {@link StateJournal} port the
 * control plane's turn code uses. Appends, reads and follows are the store's own
 * (state/store/follow-journal.ts is the state server's tail); only the error of a lost
 * compare-and-swap is rebuilt as the {@link JournalConflictError} StateClient throws for it.
 */
import { createHash } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { isAppError } from '../../common/errors';
import { JournalConflictError, JournalFencedError } from '../../common/state-call-errors';
import type {
  AppendCallOptions,
  AppendOutcome,
  ClearMemoryOutcome,
  ExportEntry,
  HeadOutcome,
  JournalEntry,
  NewJournalEvent,
  EraseOutcome,
  RepairOutcome,
  StateJournal,
} from '../../common/state-journal';
import type { StateCallOptions } from '../../common/state-calls';
import { createNodeEd25519Signer } from '../../state/journal/node-ed25519';
import { nodeSha256 } from '../../state/journal/node-sha256';
import { keyIdOf } from '../../state/journal/signed-root';
import type { JournalEvent } from '../../state/journal/verification-types';
import { followJournal } from '../../state/store/follow-journal';
import type { StoredSignedRoot } from '../../state/store/append-batch';
import { JournalStore } from '../../state/store/journal-store';

/** gRPC ABORTED, the status StateClient maps `conflict` from. */
const GRPC_ABORTED = 10;
const GRPC_FAILED_PRECONDITION = 9;

function rootInfo(root: StoredSignedRoot): AppendOutcome['signedRoot'] {
  return {
    position: root.position,
    leafCount: root.leafCount,
    root: root.root,
    keyId: root.keyId,
    signature: root.signature,
    version: root.version,
    partition: root.partition ?? '',
  };
}

/** An append's options as the store takes them. */
function callOptions(options: AppendCallOptions) {
  return {
    ...(options.signal === undefined ? {} : { signal: options.signal }),
    ...(options.fencingToken === undefined ? {} : { fencingToken: options.fencingToken }),
    ...(options.expectedRoot === undefined ? {} : { expectedRoot: options.expectedRoot }),
  };
}

/** Runs a store write, its lost compare-and-swap and fencing rebuilt as StateClient throws them. */
async function asStateError<T>(method: string, write: () => Promise<T>): Promise<T> {
  try {
    return await write();
  } catch (error) {
    if (isAppError(error) && error.code === 'conflict') {
      const head = error.details?.head;
      throw new JournalConflictError(error.message, {
        method,
        grpcStatus: GRPC_ABORTED,
        head: typeof head === 'number' ? head : 0,
        ...(error.details === undefined ? {} : { details: error.details }),
        cause: error,
      });
    }
    if (isAppError(error) && error.code === 'fenced') {
      // As the state plane's server sends it (FAILED_PRECONDITION with the code).
      throw new JournalFencedError(error.message, {
        method,
        grpcStatus: GRPC_FAILED_PRECONDITION,
        ...(error.details === undefined ? {} : { details: error.details }),
        cause: error,
      });
    }
    throw error;
  }
}

/** A store event as StateClient delivers it: an excised entry has `excised` and `leafDigest`. */
async function* asEntries(events: AsyncIterable<JournalEvent>): AsyncGenerator<JournalEntry> {
  for await (const { excisedLeaf, ...event } of events) {
    yield excisedLeaf === undefined ? event : { ...event, excised: true, leafDigest: excisedLeaf };
  }
}

/** The test-only signing key of `keySeed`: its seed is SHA-256 of the text. */
function testSigner(keySeed: string): ReturnType<typeof createNodeEd25519Signer> {
  return createNodeEd25519Signer(new Uint8Array(createHash('sha256').update(keySeed).digest()));
}

export class StoreJournal implements StateJournal {
  private constructor(
    /** The real store: tests may append to it directly, as another writer would. */
    readonly store: JournalStore,
    private readonly remove: () => Promise<void>,
    /** The signing key's public half, sent first by {@link export} as the state plane does. */
    readonly publicKey: Uint8Array,
  ) {}

  /** Opens a fresh store in a new temporary directory, signing with test key `keySeed`. */
  static async open(keySeed = 'polychrome/test-only/journal-key/1'): Promise<StoreJournal> {
    const dir = await mkdtemp(join(tmpdir(), 'polychrome-journal-'));
    const signer = testSigner(keySeed);
    const store = new JournalStore({ location: dir, signer });
    await store.open();
    return new StoreJournal(
      store,
      () => rm(dir, { recursive: true, force: true }),
      signer.publicKey,
    );
  }

  async append(
    partition: string,
    expectedHead: number,
    events: readonly NewJournalEvent[],
    options: AppendCallOptions = {},
  ): Promise<AppendOutcome> {
    const result = await asStateError('Append', () =>
      this.store.append(partition, expectedHead, events, callOptions(options)),
    );
    return {
      firstPosition: result.firstPosition,
      head: result.head,
      signedRoot: rootInfo(result.signedRoot),
    };
  }

  async clearMemory(
    partition: string,
    expectedHead: number,
    cleared: NewJournalEvent,
    options: AppendCallOptions = {},
  ): Promise<ClearMemoryOutcome> {
    const result = await asStateError('ClearMemory', () =>
      this.store.clearMemory(partition, expectedHead, cleared.payload, callOptions(options)),
    );
    return {
      firstPosition: result.firstPosition,
      head: result.head,
      signedRoot: rootInfo(result.signedRoot),
      erased: result.erased.map((e) => ({
        position: e.position,
        leafDigest: e.leaf,
        kind: e.kind,
        turnId: e.turnId,
      })),
    };
  }

  read(
    partition: string,
    fromPosition = 0,
    limit = 0,
    options: Pick<StateCallOptions, 'signal'> & { readonly follow?: boolean } = {},
  ): AsyncIterable<JournalEntry> {
    if (options.follow === true) {
      return asEntries(
        followJournal(
          this.store,
          partition,
          fromPosition,
          limit,
          options.signal ?? new AbortController().signal,
        ),
      );
    }
    return asEntries(
      this.store.read(
        partition,
        fromPosition,
        limit === 0 ? Number.MAX_SAFE_INTEGER : limit,
        options.signal === undefined ? {} : { signal: options.signal },
      ),
    );
  }

  head(partition: string): Promise<HeadOutcome> {
    const head = this.store.head(partition);
    return Promise.resolve({
      head: head.head,
      signedRoot: head.signedRoot === undefined ? undefined : rootInfo(head.signedRoot),
    });
  }

  /** As the state plane's `Export`: the public key, then every stored event. */
  async *export(
    partition: string,
    options: Pick<StateCallOptions, 'signal'> = {},
  ): AsyncGenerator<ExportEntry> {
    yield {
      type: 'public_key',
      keyId: keyIdOf(nodeSha256, this.publicKey),
      publicKey: this.publicKey,
    };
    for await (const event of this.read(partition, 0, 0, options)) yield { type: 'event', event };
  }

  /**
   * Rotates the store to test key `keySeed`, as the state plane does after its Secret
   * changed: each partition's next batch hands over with a `key_rotated` by its old key.
   * Returns the new public key. (`export` still names the first key, as a state plane that
   * keeps its previous key loaded lists it.)
   */
  rotateTo(keySeed: string): Uint8Array {
    const signer = testSigner(keySeed);
    this.store.useSigningKey(signer);
    return signer.publicKey;
  }

  /** The store's repair, as the state plane's `Repair` answers it. */
  async repair(
    partition: string,
    request: {
      readonly actor: string;
      readonly reason: string;
      readonly dryRun?: boolean;
      readonly fencingToken?: number;
    },
    options: StateCallOptions = {},
  ): Promise<RepairOutcome> {
    const result = await this.store.repair(partition, {
      actor: request.actor,
      reason: request.reason,
      ...(request.dryRun === undefined ? {} : { dryRun: request.dryRun }),
      ...(request.fencingToken === undefined ? {} : { fencingToken: request.fencingToken }),
      ...(options.signal === undefined ? {} : { signal: options.signal }),
    });
    return {
      excised: result.excised.map((e) => ({
        position: e.position,
        leafDigest: e.leaf,
        problem: e.problem,
      })),
      dryRun: result.dryRun,
      head: result.head,
      signedRoot: result.signedRoot === undefined ? undefined : rootInfo(result.signedRoot),
      message: result.message,
    };
  }

  /** The store's erasure, as the state plane's `Erase` answers it. */
  async erase(
    partition: string,
    request: {
      readonly positions: readonly number[];
      readonly actor: string;
      readonly reason: string;
      readonly dryRun?: boolean;
      readonly fencingToken?: number;
    },
    options: StateCallOptions = {},
  ): Promise<EraseOutcome> {
    const result = await this.store.erase(partition, {
      ...request,
      ...(options.signal === undefined ? {} : { signal: options.signal }),
    });
    return {
      erased: result.erased.map((e) => ({
        position: e.position,
        leafDigest: e.leaf,
        kind: e.kind,
        turnId: e.turnId,
      })),
      dryRun: result.dryRun,
      head: result.head,
      signedRoot: result.signedRoot === undefined ? undefined : rootInfo(result.signedRoot),
      message: result.message,
    };
  }

  /** Every event of the partition, in order. */
  async entries(partition: string): Promise<JournalEntry[]> {
    const out: JournalEntry[] = [];
    for await (const entry of this.read(partition)) out.push(entry);
    return out;
  }

  /** Closes the store and removes its directory. */
  async close(): Promise<void> {
    await this.store.close();
    await this.remove();
  }
}
