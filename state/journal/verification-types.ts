import type { EventKind } from '../../common/event-kinds';
import type { Sha256 } from './sha256';

/*
 * What journal verification reads and reports (docs/journal-format.md, "Verification"):
 * the events it replays, the failures it names, the signature checks it collects, the plan
 * replay hands to signature checking, and the options of a replay.
 */

/**
 * One journal event as stored: `(position, kind, payload)`. An entry that repair excised
 * (docs/journal-format.md, "Excision") has `excisedLeaf`, the leaf digest it keeps, and an
 * empty kind and payload: replay uses the kept digest as the leaf.
 */
export interface JournalEvent {
  readonly position: number;
  readonly kind: string;
  readonly payload: Uint8Array;
  readonly excisedLeaf?: Uint8Array;
}

/**
 * Why verification stopped (docs/journal-format.md, "Verification"):
 *
 * - `event_changed`: the journal's events are not the ones a root was signed over (a root
 *   or leaf count differs from the recomputed one and no later root vouches for the
 *   events), or a signed_root / key_rotated payload does not parse.
 * - `root_forged`: a correctly signed root differs from the recomputed one, yet the next
 *   signed root passes every check over the same events: the events are what the key
 *   holder later attested, so the earlier root itself is false.
 * - `wrong_key`: the key id is not trusted at that position.
 * - `bad_signature`: the signature does not verify under the trusted key.
 * - `gap`: positions do not run 0, 1, 2, ...
 * - `wrong_partition`, `rolled_back`, `unrecorded_excision`: see the constants.
 */
export const VerifyFailureReason = {
  EventChanged: 'event_changed',
  RootForged: 'root_forged',
  WrongKey: 'wrong_key',
  BadSignature: 'bad_signature',
  Gap: 'gap',
  /** A version-2 root was signed for another partition than the one being verified. */
  WrongPartition: 'wrong_partition',
  /** The journal is shorter than a trusted checkpoint, or differs from it: truncated or rolled back. */
  RolledBack: 'rolled_back',
  /** An excised entry that no sealed `excision` event records with the same leaf digest. */
  UnrecordedExcision: 'unrecorded_excision',
} as const;
export type VerifyFailureReason = (typeof VerifyFailureReason)[keyof typeof VerifyFailureReason];

/**
 * The first failing check. `expected` and `found` are lowercase hex: roots for a
 * `signed_root`, key ids for a `key_rotated` (several trusted ids joined by commas),
 * u64 big-endian positions for a `gap`; empty where the journal holds no value.
 */
export interface VerifyFailure {
  readonly position: number;
  /** Kind of the event at `position` (for a gap, of the misplaced event). */
  readonly kind: string;
  readonly reason: VerifyFailureReason;
  readonly expected: string;
  readonly found: string;
  /** For people: what failed and what to do. */
  readonly message: string;
}

/**
 * One ed25519 check verification needs. Checks are independent, so a caller may run them
 * on worker threads and hand the results back in the same order.
 */
export interface SignatureCheck {
  readonly position: number;
  readonly publicKey: Uint8Array;
  readonly message: Uint8Array;
  readonly signature: Uint8Array;
}

/** Events after the last `signed_root`: stored, but no root covers them yet. */
export interface UnsealedRange {
  /** First unsealed position (the leaf count when `count` is 0). */
  readonly fromPosition: number;
  readonly count: number;
}

/** The outcome of verifying a journal. */
export interface JournalVerification {
  /** True when no check failed. Unsealed events do not make it false; check `unsealed`. */
  readonly ok: boolean;
  /** Events replayed (up to a gap, if any). */
  readonly leafCount: number;
  /** `signed_root` events seen. */
  readonly signedRootCount: number;
  /** Leaf count of the last root that passed before the first failure (0 if none did). */
  readonly verifiedLeafCount: number;
  /** Root over all `leafCount` events, lowercase hex. */
  readonly rootHex: string;
  readonly unsealed: UnsealedRange;
  readonly failure: VerifyFailure | undefined;
  /** Positions repair excised, in order: replay used their kept leaf digests. */
  readonly excised: readonly number[];
  /**
   * The excised positions whose sealed record says an admin erased them
   * (docs/journal-format.md, "Erasure"), in order; the rest of `excised` were unreadable.
   */
  readonly erased: readonly number[];
  /** True when a checkpoint was given (and so checked; a mismatch is the failure). */
  readonly checkpointChecked: boolean;
}

/** A `signed_root` replay checked; its signature is `signatureChecks[signatureIndex]`. */
export interface RootStep {
  readonly type: 'root';
  readonly position: number;
  readonly signatureIndex: number;
  readonly countMatches: boolean;
  readonly foundLeafCount: number;
  readonly rootMatches: boolean;
  /** Roots as bytes: hex is only needed for a failure, and building it per root is costly. */
  readonly expectedRoot: Uint8Array;
  readonly foundRoot: Uint8Array;
  readonly keyId: string;
}

/** A `key_rotated` replay checked; its signature is `signatureChecks[signatureIndex]`. */
export interface RotationStep {
  readonly type: 'rotation';
  readonly position: number;
  readonly signatureIndex: number;
  readonly oldKeyId: string;
  readonly newKeyId: string;
}

/** A check that failed during replay, needing no signature. */
export interface FailedStep {
  readonly type: 'failed';
  readonly failure: VerifyFailure;
}

export /** One step of a plan, in position order. */
type VerificationStep = RootStep | RotationStep | FailedStep;

/**
 * Everything replay computed before signatures are checked: run `signatureChecks` (in
 * any order, on any thread), then pass the results to {@link concludeJournalVerification}.
 */
export interface VerificationPlan {
  readonly leafCount: number;
  readonly signedRootCount: number;
  readonly root: Uint8Array;
  readonly unsealed: UnsealedRange;
  readonly signatureChecks: readonly SignatureCheck[];
  readonly steps: readonly VerificationStep[];
  readonly excised: readonly number[];
  readonly erased: readonly number[];
  readonly checkpointChecked: boolean;
}

/**
 * A trusted checkpoint kept outside the journal, e.g. a Conversation's
 * `status.journal`: the journal had `head` entries, the last one a `signed_root` over
 * `root`. A journal with fewer entries, or whose first `head − 1` leaves hash to another
 * root, was truncated or rolled back.
 */
export interface JournalCheckpoint {
  readonly head: number;
  /** The root over the first `head − 1` leaves (what the `signed_root` at `head − 1` signs). */
  readonly root: Uint8Array;
  /** When set, the `signed_root` at `head − 1` must carry this key id. */
  readonly keyId?: string;
}

/** Options for replay. */
export interface ReplayOptions {
  readonly hash: Sha256;
  /** Raw 32-byte ed25519 public keys trusted from position 0; `key_rotated` events change the set. */
  readonly trustedPublicKeys: readonly Uint8Array[];
  /**
   * The partition the journal is verified as. Version-2 roots bind their partition, so
   * each must name this one; without it, a version-2 root fails (`wrong_partition`).
   */
  readonly partition?: string;
  /** A trusted checkpoint to check the journal against; none by default. */
  readonly checkpoint?: JournalCheckpoint;
}

/** The failure of a `kind` event whose payload does not parse (or has fields of the wrong length). */
export function unparsableFailure(
  position: number,
  kind: EventKind,
  expected: string,
): VerifyFailure {
  return {
    position,
    kind,
    reason: VerifyFailureReason.EventChanged,
    expected,
    found: '',
    message:
      `${kind} at ${String(position)} does not parse as a ${kind} payload (bad protobuf, or a root, key or ` +
      'signature of the wrong length); the event was altered or written by a broken writer',
  };
}
