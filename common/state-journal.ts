import type { StateCallOptions } from './state-calls';

/*
 * The state plane's journal as its clients see it: the values its Journal service reports
 * (proto messages stop at common/journal-from-proto.ts) and the contract the control
 * plane's turn code holds it to ({@link StateJournal}).
 */

/** A signed root as the state plane reports it. */
export interface SignedRootInfo {
  /** Position of the `signed_root` event; equals `leafCount`. */
  readonly position: number;
  readonly leafCount: number;
  readonly root: Uint8Array;
  readonly keyId: string;
  readonly signature: Uint8Array;
  /** 2: the signature also binds `partition` (docs/journal-format.md); 1: it does not. */
  readonly version: 1 | 2;
  /** The partition a version-2 root was signed for; empty for version 1. */
  readonly partition: string;
}

/**
 * One committed journal event. An entry the state plane's repair excised has `excised`
 * true, an empty kind and payload, and its kept `leafDigest`: readers skip it as a gap.
 */
export interface JournalEntry {
  readonly position: number;
  readonly kind: string;
  readonly payload: Uint8Array;
  readonly excised?: boolean;
  readonly leafDigest?: Uint8Array;
}

/** One event to append; the state plane assigns its position. */
export interface NewJournalEvent {
  readonly kind: string;
  readonly payload: Uint8Array;
}

/** What an acknowledged (durable) append wrote. */
export interface AppendOutcome {
  readonly firstPosition: number;
  /** The next free position; the event at `head − 1` is the batch's `signed_root`. */
  readonly head: number;
  readonly signedRoot: SignedRootInfo;
}

/** A partition's head; `signedRoot` is absent for a partition with no events. */
export interface HeadOutcome {
  readonly head: number;
  readonly signedRoot: SignedRootInfo | undefined;
}

/** An inclusion proof (docs/journal-format.md, "Inclusion proofs"). */
export interface ProofOutcome {
  readonly position: number;
  readonly leafCount: number;
  readonly leafDigest: Uint8Array;
  readonly digests: readonly Uint8Array[];
  readonly root: Uint8Array;
  readonly signedRoot: SignedRootInfo | undefined;
}

/** The first failing check of a verification. */
export interface VerifyFailureInfo {
  readonly position: number;
  readonly reason: string;
  readonly expected: string;
  readonly found: string;
  readonly message: string;
}

/** The outcome of a server-side verification. */
export interface VerifyOutcome {
  readonly ok: boolean;
  readonly events: number;
  readonly signedRoots: number;
  /** Events after the last signed root (none in a healthy journal). */
  readonly unsealed: number;
  readonly failure: VerifyFailureInfo | undefined;
  /** Positions repair excised; checked against their kept leaf digests. */
  readonly excised: readonly number[];
  /** The excised positions an admin erased (a subset of `excised`). */
  readonly erased: readonly number[];
  /** True when a checkpoint was passed and checked. */
  readonly checkpointChecked: boolean;
}

/**
 * A checkpoint kept outside the journal (the Conversation's `status.journal`): the head
 * then, and the last signed root (the root over the first `head − 1` entries).
 */
export interface JournalCheckpointInfo {
  readonly head: number;
  readonly root: Uint8Array;
  readonly keyId?: string;
}

/** What a repair found and did (`excised` empty: nothing was unreadable). */
export interface RepairOutcome {
  readonly excised: readonly {
    readonly position: number;
    readonly leafDigest: Uint8Array;
    readonly problem: string;
  }[];
  readonly dryRun: boolean;
  readonly head: number;
  readonly signedRoot: SignedRootInfo | undefined;
  readonly message: string;
}

/** What an erasure did (docs/state-plane.md, "Erasure"). */
export interface EraseOutcome {
  readonly erased: readonly {
    readonly position: number;
    readonly leafDigest: Uint8Array;
    readonly kind: string;
    readonly turnId: string;
  }[];
  readonly dryRun: boolean;
  readonly head: number;
  readonly signedRoot: SignedRootInfo | undefined;
  readonly message: string;
}

/** What a memory clear wrote (docs/state-plane.md, "Memory clears"). */
export interface ClearMemoryOutcome extends AppendOutcome {
  /** The `memory_set` entries it erased, in position order. */
  readonly erased: EraseOutcome['erased'];
}

/** One item of an export: a public key (all come first) or an event. */
export type ExportEntry =
  | { readonly type: 'public_key'; readonly keyId: string; readonly publicKey: Uint8Array }
  | { readonly type: 'event'; readonly event: JournalEntry };

/** Options of {@link StateClient.append}. */
export interface AppendCallOptions extends StateCallOptions {
  /**
   * The fencing token of the lease under which the writer acts (the Lease's
   * `leaseTransitions` when it was taken). The state plane refuses it with
   * {@link JournalFencedError} when a higher one has already written to the partition.
   * 0, the default, is the lowest token: accepted only while no higher one has written.
   * @default 0
   */
  readonly fencingToken?: number;
  /**
   * The root of the partition's last signed root as the writer last saw it: the state
   * plane refuses the append (`failed_precondition`, `details.reason` `root_mismatch`)
   * when the journal at the expected head ends in another root. Unset: no check.
   */
  readonly expectedRoot?: Uint8Array;
}

/**
 * What the control plane's turn code uses of the state plane's journal: appends at an
 * expected head, reads (bounded or following) and the head. {@link StateClient} is the
 * production one; the same contract holds for any other (tests put the real store behind
 * it): a lost compare-and-swap is a {@link JournalConflictError}, a follow that the state
 * plane ends is a StateCallError `unavailable`.
 */
export interface StateJournal {
  append(
    partition: string,
    expectedHead: number,
    events: readonly NewJournalEvent[],
    options?: AppendCallOptions,
  ): Promise<AppendOutcome>;
  read(
    partition: string,
    fromPosition?: number,
    limit?: number,
    options?: Pick<StateCallOptions, 'signal'> & { readonly follow?: boolean },
  ): AsyncIterable<JournalEntry>;
  head(partition: string, options?: StateCallOptions): Promise<HeadOutcome>;
  /**
   * Appends a person's `memory_cleared` at `expectedHead` and erases the `memory_set`
   * entries it names, in one atomic batch (docs/state-plane.md, "Memory clears"); throws
   * as append, and `permission_denied` when a named entry is not one to erase.
   */
  clearMemory(
    partition: string,
    expectedHead: number,
    cleared: NewJournalEvent,
    options?: AppendCallOptions,
  ): Promise<ClearMemoryOutcome>;
  /** The state plane's public keys, then every event (the control plane reads only the keys). */
  export(partition: string, options?: Pick<StateCallOptions, 'signal'>): AsyncIterable<ExportEntry>;
}
