/**
 * The journal views this replica keeps, one per conversation (journal-view.ts folds
 * them), and the only path by which the turn code reads or appends a journal. The journal
 * on the state plane is the only truth: a view is a cache of it, brought up to the head
 * before a decision, and dropped whenever an append fails.
 */
import { partitionOf } from '../../common/partition-name';
import { AppError, isAppError } from '../../common/errors';
import { EventKind, payloadCodecs, type EventPayloads } from '../../common/event-kinds';
import { JournalConflictError, JournalFencedError } from '../../common/state-call-errors';
import {
  type AppendOutcome,
  type ClearMemoryOutcome,
  type JournalEntry,
  type NewJournalEvent,
  type StateJournal,
} from '../../common/state-journal';
import type { LeaseHandle } from '../lease/lease-source';
import { applyEntries, applyEvents, emptyView } from './journal-view';
import { type JournalView, type TypedEvent } from './journal-view-types';
import {
  acceptedAsLost,
  checkJournal,
  JournalRolledBackError,
  type CheckpointVerdict,
  type EntryAtCheckpoint,
  type JournalCheckpoint,
} from './journal-checkpoint';
import type { PlannedEvent } from './plan-common';

export interface JournalViewsOptions {
  readonly state: StateJournal;
  /** Views kept (conversations). @default 1000 */
  readonly cacheSize?: number;
  /** Whether a turn of the conversation runs in this replica (its view is never dropped). */
  readonly isBusy: (uid: string) => boolean;
  readonly onCommit?: (seconds: number) => void;
}

export class JournalViews {
  private readonly views = new Map<string, JournalView>();
  /**
   * The lease under which each conversation's cached view was last brought in line with
   * the journal. While this replica holds that same lease without a break, every append
   * to the journal is its own (and updates the view), so a turn can start from the cached
   * view without reading the journal again. Any other writer would need the lease; a
   * stale one that writes anyway is caught by the compare-and-swap on the head.
   */
  private readonly syncedUnder = new Map<string, LeaseHandle>();

  constructor(private readonly options: JournalViewsOptions) {}

  /** The cached view, as last read or appended (undefined when none is cached). */
  cached(uid: string): JournalView | undefined {
    return this.views.get(uid);
  }

  /**
   * The cached view brought up to the journal's head. A cached view longer than the
   * journal (the state plane lost entries since it was read: see {@link inSync}) is
   * dropped and the journal read again from position 0.
   */
  async refresh(uid: string, signal?: AbortSignal): Promise<JournalView> {
    let view = this.views.get(uid) ?? emptyView();
    let entries: JournalEntry[];
    try {
      entries = await this.readFrom(uid, view.head, signal);
    } catch (error) {
      if (!(view.head > 0 && isBeyondHead(error))) throw error;
      this.forget(uid);
      view = emptyView();
      entries = await this.readFrom(uid, 0, signal);
    }
    view = applyEntries(view, entries);
    // A read outside the conversation's lock (a transcript) must not replace a newer view
    // that a turn's append stored meanwhile.
    const cached = this.views.get(uid);
    if (cached === undefined || view.head >= cached.head) this.keep(uid, view);
    return view;
  }

  /**
   * The view a claimed turn starts from: the cached one when it was last brought in line
   * under `lease` and the lease has not been lost since (see {@link syncedUnder}), else
   * the view refreshed from the journal, once the journal is found to still hold
   * `checkpoint` (the Conversation's `status.journal`; journal-checkpoint.ts). So nothing
   * is appended to a journal that lost what the status recorded: while the lease is held
   * without a break, a journal that shrank under the cached view fails the next append's
   * compare-and-swap, which drops the view, and the claim after it checks again.
   *
   * @throws JournalRolledBackError (`failed_precondition`) when the journal is shorter
   *   than the checkpoint or differs at its head; nothing was appended.
   */
  async inSync(
    uid: string,
    lease: LeaseHandle,
    signal: AbortSignal,
    checkpoint: JournalCheckpoint | undefined,
  ): Promise<JournalView> {
    const cached = this.views.get(uid);
    if (cached !== undefined && this.syncedUnder.get(uid) === lease && !lease.signal.aborted) {
      return cached;
    }
    const view = await this.refresh(uid, signal);
    const verdict = await this.verdictFor(uid, view, checkpoint, signal);
    if (verdict.kind === 'rolled_back' && !acceptedAsLost(checkpoint, view.acceptedLosses)) {
      // Never start from it: the next claim reads and checks the journal again.
      this.forget(uid);
      throw new JournalRolledBackError(uid, verdict.rollback);
    }
    // From here on every append is this holder's and keeps the view in line (a failed
    // one drops it, and this mark with it).
    this.syncedUnder.set(uid, lease);
    return view;
  }

  /**
   * The view for an admin who accepts a rollback: the journal as the state plane holds
   * it, unchecked, and marked in sync under `lease` so the decision can be appended.
   */
  async acceptingRollback(
    uid: string,
    lease: LeaseHandle,
    signal: AbortSignal,
  ): Promise<JournalView> {
    this.forget(uid);
    const view = await this.refresh(uid, signal);
    this.syncedUnder.set(uid, lease);
    return view;
  }

  /**
   * Whether the journal `view` was just read from still holds `checkpoint`: the rule is
   * journal-checkpoint.ts's; this reads the one entry it needs from the state plane.
   */
  async verdictFor(
    uid: string,
    view: JournalView,
    checkpoint: JournalCheckpoint | undefined,
    signal: AbortSignal,
  ): Promise<CheckpointVerdict> {
    const needsEntry =
      checkpoint !== undefined && checkpoint.head > 0 && checkpoint.head <= view.head;
    return checkJournal(
      checkpoint,
      view.head,
      needsEntry ? await this.entryAt(uid, checkpoint.head - 1, signal) : undefined,
    );
  }

  /** The entry at `position` (below the head) as the rollback check reads it. */
  private async entryAt(
    uid: string,
    position: number,
    signal: AbortSignal,
  ): Promise<EntryAtCheckpoint> {
    const [entry] = await this.readFrom(uid, position, signal, 1);
    if (entry === undefined || entry.excised === true || entry.kind !== EventKind.SignedRoot) {
      return {
        kind: 'other',
        eventKind: entry?.excised === true ? 'excised' : (entry?.kind ?? ''),
      };
    }
    const root = payloadCodecs.signed_root.decode(entry.payload);
    return {
      kind: 'signed_root',
      root: Buffer.from(root.root).toString('hex'),
      keyId: root.keyId,
    };
  }

  private async readFrom(
    uid: string,
    position: number,
    signal: AbortSignal | undefined,
    limit = 0,
  ): Promise<JournalEntry[]> {
    const entries: JournalEntry[] = [];
    for await (const entry of this.options.state.read(partitionOf(uid), position, limit, {
      ...(signal === undefined ? {} : { signal }),
    })) {
      entries.push(entry);
    }
    return entries;
  }

  /**
   * Appends one batch at the cached head, fenced with the token of the lease the work
   * was claimed under (docs/state-plane.md "Fencing"), and returns the view with it. A
   * failure drops the cache (another writer may have moved the head: a stale holder's
   * batch must never land); a conflict is rethrown as `conflict`, a fenced refusal as
   * `unavailable` (this replica lost the lease), a journal shorter than the view as
   * {@link JournalRolledBackError}.
   *
   * The view is extended with the typed events themselves, not by decoding the bytes just
   * encoded: each payload is completed once (`fromPartial`), and that one value is both
   * encoded for the journal and folded, so the view equals a fresh fold of the journal
   * (journal-views.test.ts checks it after every kind of batch).
   */
  async append(
    uid: string,
    lease: Pick<LeaseHandle, 'fencingToken'>,
    planned: readonly PlannedEvent[],
  ): Promise<{ outcome: AppendOutcome; view: JournalView }> {
    const typed = planned.map(complete);
    const events = typed.map(encode);
    const view = this.views.get(uid) ?? (await this.refresh(uid));
    const started = performance.now();
    let outcome: AppendOutcome;
    try {
      outcome = await this.options.state.append(partitionOf(uid), view.head, events, {
        fencingToken: lease.fencingToken,
        // Also refused when the journal has this length but ends in another root: a copy
        // of the same length put in its place while the view was cached.
        ...(view.lastSignedRoot === undefined
          ? {}
          : { expectedRoot: Buffer.from(view.lastSignedRoot.root, 'hex') }),
      });
    } catch (error) {
      this.views.delete(uid);
      this.syncedUnder.delete(uid);
      throw refusalOf(uid, view, error);
    } finally {
      this.options.onCommit?.((performance.now() - started) / 1000);
    }
    const seal: TypedEvent = {
      kind: EventKind.SignedRoot,
      payload: {
        leafCount: outcome.signedRoot.leafCount,
        root: Buffer.from(outcome.signedRoot.root),
        keyId: outcome.signedRoot.keyId,
        signature: Buffer.from(outcome.signedRoot.signature),
        version: outcome.signedRoot.version === 2 ? 2 : 0,
        partition: outcome.signedRoot.partition,
      },
    };
    const next = applyEvents(view, [...typed, seal]);
    this.keep(uid, next);
    return { outcome, view: next };
  }

  /**
   * Commits a person's memory clear (`planned`, one `memory_cleared`) with the erasure of
   * the `memory_set` entries it names, in one batch the state plane checks and writes
   * (docs/state-plane.md, "Memory clears"); then reads the batch back into the view, so
   * the view folds the erasure records as it does an admin's.
   */
  async clearMemory(
    uid: string,
    lease: Pick<LeaseHandle, 'fencingToken'>,
    planned: PlannedEvent,
    signal?: AbortSignal,
  ): Promise<{ outcome: ClearMemoryOutcome; view: JournalView }> {
    const view = this.views.get(uid) ?? (await this.refresh(uid, signal));
    let outcome: ClearMemoryOutcome;
    try {
      outcome = await this.options.state.clearMemory(
        partitionOf(uid),
        view.head,
        encode(complete(planned)),
        {
          fencingToken: lease.fencingToken,
          ...(view.lastSignedRoot === undefined
            ? {}
            : { expectedRoot: Buffer.from(view.lastSignedRoot.root, 'hex') }),
        },
      );
    } catch (error) {
      this.forget(uid);
      throw refusalOf(uid, view, error);
    }
    return { outcome, view: await this.refresh(uid, signal) };
  }

  /**
   * Drops the cached view: something other than a turn (a repair) wrote the journal, so
   * the next turn reads it again from the state plane.
   */
  forget(uid: string): void {
    this.views.delete(uid);
    this.syncedUnder.delete(uid);
  }

  /**
   * Keeps the view, most recently used last; beyond the bound the least recently used
   * view of a conversation without a turn in this replica is dropped (rebuilt on demand).
   */
  private keep(uid: string, view: JournalView): void {
    this.views.delete(uid);
    this.views.set(uid, view);
    const bound = this.options.cacheSize ?? 1_000;
    if (this.views.size <= bound) return;
    for (const key of this.views.keys()) {
      if (this.views.size <= bound) break;
      if (!this.options.isBusy(key)) {
        this.views.delete(key);
        this.syncedUnder.delete(key);
      }
    }
  }
}

/**
 * What a failed append is reported as: a moved head as 409, a journal that lost or replaced
 * what the view holds as {@link JournalRolledBackError}, a fenced writer as 503, anything
 * else as it came.
 */
function refusalOf(uid: string, view: JournalView, error: unknown): unknown {
  if (error instanceof JournalConflictError) {
    return new AppError(
      'conflict',
      `the journal of conversation ${uid} moved under this replica (another writer); retry`,
      { cause: error },
    );
  }
  const found = rolledBackUnder(error);
  if (found !== undefined && view.lastSignedRoot !== undefined) {
    // The journal is shorter than what this replica read or wrote under its lease, or
    // as long but ending in another root: rolled back or replaced under it
    // (journal-checkpoint.ts).
    return new JournalRolledBackError(uid, {
      checkpointHead: view.head,
      checkpointRoot: view.lastSignedRoot.root,
      ...found,
    });
  }
  if (error instanceof JournalFencedError) {
    return new AppError(
      'unavailable',
      `this replica lost the lease of conversation ${uid}: a newer holder has written its journal, and nothing of this request was committed; retry with the same idempotency key (safe)`,
      { cause: error, details: { conversationId: uid } },
    );
  }
  return error;
}

/** A read from a position past the journal's head (the state plane's `failed_precondition`). */
function isBeyondHead(error: unknown): boolean {
  return isAppError(error) && error.code === 'failed_precondition';
}

/**
 * The journal the state plane holds, when an append was refused because it expected
 * another one (the state plane's `failed_precondition`): `expectedHead` beyond `head`, or
 * `root_mismatch` (as long, another last signed root).
 */
function rolledBackUnder(
  error: unknown,
): { readonly journalHead: number; readonly journalRoot?: string } | undefined {
  if (!isAppError(error) || error.code !== 'failed_precondition') return undefined;
  const { head, expectedHead, reason, root } = error.details;
  if (typeof head !== 'number') return undefined;
  if (reason === 'root_mismatch' && typeof root === 'string') {
    return { journalHead: head, journalRoot: root };
  }
  return typeof expectedHead === 'number' && expectedHead > head
    ? { journalHead: head }
    : undefined;
}

/** The planned event with every field set: the one value that is encoded and folded. */
function complete(planned: PlannedEvent): TypedEvent {
  return completeAs(planned.kind, planned.payload);
}

function completeAs<K extends EventKind>(kind: K, payload: Partial<EventPayloads[K]>): TypedEvent {
  return { kind, payload: payloadCodecs[kind].fromPartial(payload) } as TypedEvent;
}

function encode(event: TypedEvent): NewJournalEvent {
  return encodeAs(event.kind, event.payload);
}

function encodeAs<K extends EventKind>(kind: K, payload: EventPayloads[K]): NewJournalEvent {
  return { kind, payload: payloadCodecs[kind].encode(payload).finish() };
}
