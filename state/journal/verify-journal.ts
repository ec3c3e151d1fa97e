import { AppError } from '../../common/errors';
import { decodePayload, EventKind } from '../../common/event-kinds';
import { CompactMmr, type NodeVisitor } from './compact-mmr';
import { ED25519_KEY_BYTES, ED25519_SIGNATURE_BYTES, type Ed25519Verifier } from './ed25519';
import { bytesEqual, toHex } from './hex';
import { LeafHasher } from './leaf-digest';
import { DIGEST_BYTES, type Sha256 } from './sha256';
import {
  keyIdOf,
  keyRotationMessage,
  signedRootMessage,
  signedRootMessageV2,
  SignedRootVersion,
} from './signed-root';
import { encodeU64 } from './u64';

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
  /** True when a checkpoint was given (and so checked; a mismatch is the failure). */
  readonly checkpointChecked: boolean;
}

interface RootStep {
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

interface RotationStep {
  readonly type: 'rotation';
  readonly position: number;
  readonly signatureIndex: number;
  readonly oldKeyId: string;
  readonly newKeyId: string;
}

interface FailedStep {
  readonly type: 'failed';
  readonly failure: VerifyFailure;
}

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

/**
 * Replays a journal event by event: hashes each leaf into an MMR, recomputes the root at
 * every `signed_root`, follows `key_rotated`, and collects the signature checks. Streams:
 * memory is O(log n) plus one check per signed root, so a store can feed it from a cursor.
 *
 * Checks needing no signature (gap, unparsable payload, unknown key) are settled here;
 * once one fails, no further checks are collected, because a later check can never be the
 * first failure. Hashing goes on so `leafCount` and the root describe the whole input.
 */
export class JournalReplayer {
  private readonly hash: Sha256;
  private readonly leaves: LeafHasher;
  private readonly mmr: CompactMmr;
  private readonly trusted = new Map<string, Uint8Array>();
  private readonly steps: VerificationStep[] = [];
  private readonly checks: SignatureCheck[] = [];
  private readonly partition: string | undefined;
  private readonly checkpoint: JournalCheckpoint | undefined;
  /** Excised positions and their kept digests, until an `excision` event records them. */
  private readonly excisedLeaves = new Map<number, Uint8Array>();
  private readonly excised: number[] = [];
  /** `excision` records: position → (recording event's position, kept digest). */
  private readonly excisionRecords = new Map<number, { at: number; leaf: Uint8Array }>();
  private signedRoots = 0;
  private lastSignedRoot = -1;
  private settled = false;
  private stopped = false;
  /** Checks already handed out by {@link JournalReplayer.takeSignatureChecks}. */
  private taken = 0;

  /**
   * @throws AppError `invalid_argument` when a trusted key is not 32 bytes.
   */
  constructor(options: ReplayOptions) {
    this.hash = options.hash;
    this.leaves = new LeafHasher(options.hash);
    this.mmr = new CompactMmr(options.hash);
    this.partition = options.partition;
    this.checkpoint = options.checkpoint;
    for (const key of options.trustedPublicKeys) {
      this.trusted.set(keyIdOf(options.hash, key), key);
    }
  }

  /**
   * Replays the next event. `visit` receives the MMR nodes the event creates, so a store
   * can rebuild its node index in the same pass. After a gap, events are ignored.
   */
  add(event: JournalEvent, visit?: NodeVisitor): void {
    if (this.stopped) return;
    const position = this.mmr.leafCount;
    if (event.position !== position) {
      this.fail({
        position,
        kind: event.kind,
        reason: VerifyFailureReason.Gap,
        expected: toHex(encodeU64(position)),
        found:
          Number.isSafeInteger(event.position) && event.position >= 0
            ? toHex(encodeU64(event.position))
            : '',
        message:
          `event ${String(event.position)} (${event.kind}) comes where position ${String(position)} belongs: ` +
          'positions must run 0, 1, 2, ... without gaps; the journal lost or reordered events',
      });
      this.stopped = true;
      return;
    }
    if (position + 1 === this.checkpoint?.head && !this.settled) this.checkCheckpoint(event);
    if (event.excisedLeaf !== undefined) {
      this.excised.push(position);
      this.excisedLeaves.set(position, event.excisedLeaf);
      this.mmr.append(event.excisedLeaf, visit);
      return;
    }
    if (event.kind === EventKind.SignedRoot) {
      this.signedRoots += 1;
      this.lastSignedRoot = position;
      if (!this.settled) this.planRoot(event);
    } else if (event.kind === EventKind.KeyRotated && !this.settled) {
      this.planRotation(event);
    } else if (event.kind === EventKind.Excision && !this.settled) {
      this.recordExcision(event);
    }
    this.mmr.append(this.leaves.digest(position, event.kind, event.payload), visit);
  }

  /** Checks collected and not yet handed out by {@link JournalReplayer.takeSignatureChecks}. */
  get pendingSignatureChecks(): number {
    return this.checks.length - this.taken;
  }

  /**
   * The checks collected since the last call, in position order, so they can be verified
   * while replay goes on. {@link JournalReplayer.plan} still lists every check.
   */
  takeSignatureChecks(): SignatureCheck[] {
    const checks = this.checks.slice(this.taken);
    this.taken = this.checks.length;
    return checks;
  }

  /** What replay found so far; call once all events are added. */
  plan(): VerificationPlan {
    const leafCount = this.mmr.leafCount;
    const fromPosition = this.lastSignedRoot + 1;
    const steps = [...this.steps];
    const unrecorded = this.settled ? undefined : this.firstUnrecordedExcision();
    if (unrecorded !== undefined) insertInOrder(steps, unrecorded);
    const checkpoint = this.checkpoint;
    if (checkpoint !== undefined && leafCount < checkpoint.head && !this.settled) {
      steps.push({
        type: 'failed',
        failure: {
          position: leafCount,
          kind: '',
          reason: VerifyFailureReason.RolledBack,
          expected: toHex(checkpoint.root),
          found: '',
          message:
            `truncated or rolled back: the checkpoint says the journal had ${String(checkpoint.head)} ` +
            `entries (last signed root ${toHex(checkpoint.root)}), but it has ${String(leafCount)}; ` +
            `entries from ${String(leafCount)} on were cut off or rolled back: restore them from a backup`,
        },
      });
    }
    return {
      leafCount,
      signedRootCount: this.signedRoots,
      root: this.mmr.root(),
      unsealed: { fromPosition, count: leafCount - fromPosition },
      signatureChecks: [...this.checks],
      steps,
      excised: [...this.excised],
      checkpointChecked: checkpoint !== undefined,
    };
  }

  /**
   * An excision counts only when an `excision` event after it, before the last
   * `signed_root` (so a root covers the record), names it with the same kept digest.
   */
  private firstUnrecordedExcision(): FailedStep | undefined {
    for (const position of this.excised) {
      const leaf = this.excisedLeaves.get(position);
      const record = this.excisionRecords.get(position);
      if (
        leaf !== undefined &&
        record !== undefined &&
        record.at < this.lastSignedRoot &&
        bytesEqual(record.leaf, leaf)
      ) {
        continue;
      }
      return {
        type: 'failed',
        failure: {
          position,
          kind: '',
          reason: VerifyFailureReason.UnrecordedExcision,
          expected: leaf === undefined ? '' : toHex(leaf),
          found: record === undefined ? '' : toHex(record.leaf),
          message:
            `the entry at ${String(position)} is excised, but no sealed excision event records it ` +
            (record === undefined
              ? ''
              : `with that leaf digest (the record at ${String(record.at)} names ${toHex(record.leaf)}) `) +
            "before a signed_root; only the state plane's repair excises entries, so the journal was " +
            'edited: restore it from a backup',
        },
      };
    }
    return undefined;
  }

  private checkCheckpoint(event: JournalEvent): void {
    const checkpoint = this.checkpoint;
    if (checkpoint === undefined) return;
    const found = this.mmr.root();
    let keyId: string | undefined;
    if (event.kind === EventKind.SignedRoot && event.excisedLeaf === undefined) {
      try {
        keyId = decodePayload(EventKind.SignedRoot, event.payload).keyId;
      } catch {
        keyId = undefined;
      }
    }
    const rootMatches = bytesEqual(found, checkpoint.root);
    const keyMatches = checkpoint.keyId === undefined || checkpoint.keyId === keyId;
    if (event.kind === EventKind.SignedRoot && rootMatches && keyMatches) return;
    const position = event.position;
    this.fail({
      position,
      kind: event.kind,
      reason: VerifyFailureReason.RolledBack,
      expected: toHex(checkpoint.root),
      found: toHex(found),
      message:
        `truncated or rolled back: the checkpoint says the journal had ${String(checkpoint.head)} entries, ` +
        `the last a signed_root over root ${toHex(checkpoint.root)}` +
        (checkpoint.keyId === undefined ? '' : ` by key ${checkpoint.keyId}`) +
        `; this journal's first ${String(position)} leaves hash to ${toHex(found)}` +
        (event.kind === EventKind.SignedRoot
          ? keyMatches
            ? ''
            : ` and its root there is signed by ${keyId ?? 'an unreadable key id'}`
          : ` and entry ${String(position)} is a ${event.kind || 'damaged entry'}, not a signed_root`) +
        ': the journal was rewritten or rolled back after the checkpoint was taken (or the checkpoint ' +
        'is wrong: N is the head, the number of entries, and ROOT the last signed root)',
    });
  }

  private recordExcision(event: JournalEvent): void {
    let fields: { position: number; leafDigest: Uint8Array };
    try {
      fields = decodePayload(EventKind.Excision, event.payload);
    } catch {
      this.fail(unparsable(event.position, EventKind.Excision, ''));
      return;
    }
    if (fields.leafDigest.length !== DIGEST_BYTES || fields.position >= event.position) {
      this.fail(unparsable(event.position, EventKind.Excision, ''));
      return;
    }
    this.excisionRecords.set(fields.position, {
      at: event.position,
      leaf: new Uint8Array(fields.leafDigest),
    });
  }

  private fail(failure: VerifyFailure): void {
    if (!this.settled) this.steps.push({ type: 'failed', failure });
    this.settled = true;
  }

  private planRoot(event: JournalEvent): void {
    const position = event.position;
    const expected = this.mmr.root();
    let fields: {
      leafCount: number;
      root: Uint8Array;
      keyId: string;
      signature: Uint8Array;
      version: number;
      partition: string;
    };
    try {
      fields = decodePayload(EventKind.SignedRoot, event.payload);
    } catch {
      this.fail(unparsable(position, EventKind.SignedRoot, toHex(expected)));
      return;
    }
    if (
      fields.root.length !== DIGEST_BYTES ||
      fields.signature.length !== ED25519_SIGNATURE_BYTES ||
      (fields.version !== 0 && fields.version !== SignedRootVersion.V2)
    ) {
      this.fail(unparsable(position, EventKind.SignedRoot, toHex(expected)));
      return;
    }
    const v2 = fields.version === SignedRootVersion.V2;
    if (v2 && fields.partition !== this.partition) {
      this.fail({
        position,
        kind: EventKind.SignedRoot,
        reason: VerifyFailureReason.WrongPartition,
        expected: this.partition ?? '',
        found: fields.partition,
        message:
          `signed_root at ${String(position)} was signed for partition ${JSON.stringify(fields.partition)}, ` +
          (this.partition === undefined
            ? 'but no partition was named to verify it as; pass the partition'
            : `but the journal is verified as partition ${JSON.stringify(this.partition)}: ` +
              'it was copied from another conversation'),
      });
      return;
    }
    const key = this.trusted.get(fields.keyId);
    if (key === undefined) {
      this.fail({
        position,
        kind: EventKind.SignedRoot,
        reason: VerifyFailureReason.WrongKey,
        expected: [...this.trusted.keys()].join(','),
        found: fields.keyId,
        message:
          `signed_root at ${String(position)} is signed by key ${JSON.stringify(fields.keyId)}, which is not ` +
          `trusted there (trusted: ${[...this.trusted.keys()].join(', ') || 'none'}); pass the right public key ` +
          'or find the key_rotated event that should introduce it',
      });
      return;
    }
    const rootMatches = bytesEqual(fields.root, expected);
    this.steps.push({
      type: 'root',
      position,
      signatureIndex: this.checks.length,
      countMatches: fields.leafCount === position,
      foundLeafCount: fields.leafCount,
      rootMatches,
      // When they match, one array serves both, so a long replay holds one root per step.
      expectedRoot: rootMatches ? fields.root : expected,
      foundRoot: fields.root,
      keyId: fields.keyId,
    });
    this.checks.push({
      position,
      publicKey: key,
      // The verifier's partition, not the payload's: equal here, and an edited payload
      // name cannot reach the message.
      message: v2
        ? signedRootMessageV2(this.partition ?? '', fields.leafCount, fields.root)
        : signedRootMessage(fields.leafCount, fields.root),
      signature: fields.signature,
    });
  }

  private planRotation(event: JournalEvent): void {
    const position = event.position;
    let fields: {
      oldKeyId: string;
      newKeyId: string;
      newPublicKey: Uint8Array;
      signatureByOldKey: Uint8Array;
    };
    try {
      fields = decodePayload(EventKind.KeyRotated, event.payload);
    } catch {
      this.fail(unparsable(position, EventKind.KeyRotated, ''));
      return;
    }
    if (
      fields.newPublicKey.length !== ED25519_KEY_BYTES ||
      fields.signatureByOldKey.length !== ED25519_SIGNATURE_BYTES
    ) {
      this.fail(unparsable(position, EventKind.KeyRotated, ''));
      return;
    }
    const oldKey = this.trusted.get(fields.oldKeyId);
    if (oldKey === undefined) {
      this.fail({
        position,
        kind: EventKind.KeyRotated,
        reason: VerifyFailureReason.WrongKey,
        expected: [...this.trusted.keys()].join(','),
        found: fields.oldKeyId,
        message:
          `key_rotated at ${String(position)} hands over from key ${JSON.stringify(fields.oldKeyId)}, which is ` +
          'not trusted there; pass the public key that signed the journal before this position',
      });
      return;
    }
    const newKeyId = keyIdOf(this.hash, fields.newPublicKey);
    if (newKeyId !== fields.newKeyId) {
      this.fail({
        position,
        kind: EventKind.KeyRotated,
        reason: VerifyFailureReason.EventChanged,
        expected: newKeyId,
        found: fields.newKeyId,
        message:
          `key_rotated at ${String(position)} names new key id ${JSON.stringify(fields.newKeyId)} but carries a ` +
          `public key whose id is ${newKeyId}; the event was altered`,
      });
      return;
    }
    this.steps.push({
      type: 'rotation',
      position,
      signatureIndex: this.checks.length,
      oldKeyId: fields.oldKeyId,
      newKeyId,
    });
    this.checks.push({
      position,
      publicKey: oldKey,
      message: keyRotationMessage(fields.newPublicKey),
      signature: fields.signatureByOldKey,
    });
    // The old key is retired: roots after a rotation must be signed by the new key, so a
    // leaked old key cannot extend the journal.
    this.trusted.delete(fields.oldKeyId);
    this.trusted.set(newKeyId, fields.newPublicKey.slice());
  }
}

/** Puts `step` before the first step at a later position (steps are in position order). */
function insertInOrder(steps: VerificationStep[], step: FailedStep): void {
  const at = step.failure.position;
  const positionOf = (s: VerificationStep): number =>
    s.type === 'failed' ? s.failure.position : s.position;
  const index = steps.findIndex((s) => positionOf(s) > at);
  if (index < 0) steps.push(step);
  else steps.splice(index, 0, step);
}

function unparsable(position: number, kind: EventKind, expected: string): VerifyFailure {
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

/**
 * Replays `events` (positions 0, 1, 2, ...) without checking signatures.
 *
 * @throws AppError `invalid_argument` for a trusted key that is not 32 bytes.
 */
export function planJournalVerification(
  events: Iterable<JournalEvent>,
  options: ReplayOptions,
): VerificationPlan {
  const replayer = new JournalReplayer(options);
  for (const event of events) replayer.add(event);
  return replayer.plan();
}

/**
 * Checks signatures, e.g. on worker threads (state/verify-pool.ts); `result[i]` is the
 * outcome of `checks[i]`.
 */
export type SignatureChecker = (checks: readonly SignatureCheck[]) => Promise<readonly boolean[]>;

/** Options for {@link StreamingJournalVerifier}. */
export interface StreamingVerifyOptions extends ReplayOptions {
  readonly checkSignatures: SignatureChecker;
  /**
   * Checks sent per call of `checkSignatures`: small enough that the first go out early in
   * the replay and the last ones, sent when it ends, are little left to wait for.
   * @default 64
   */
  readonly chunkSize?: number;
}

/**
 * Replays a journal and has its signatures checked while it does: each time replay has
 * collected `chunkSize` checks they go to `checkSignatures` at once, so worker threads
 * verify signatures alongside the hashing instead of after it. Results are put back in
 * check order before {@link concludeJournalVerification}, so the verdict, first failure
 * included, is the one the whole-plan path gives, whichever chunk finishes first.
 */
export class StreamingJournalVerifier {
  private readonly replayer: JournalReplayer;
  private readonly checkSignatures: SignatureChecker;
  private readonly chunkSize: number;
  private readonly parts: { size: number; results: Promise<readonly boolean[]> }[] = [];

  /**
   * @throws AppError `invalid_argument` when a trusted key is not 32 bytes.
   */
  constructor(options: StreamingVerifyOptions) {
    this.replayer = new JournalReplayer(options);
    this.checkSignatures = options.checkSignatures;
    this.chunkSize = options.chunkSize ?? 64;
  }

  /** Replays the next event (see {@link JournalReplayer.add}); may send a chunk of checks. */
  add(event: JournalEvent, visit?: NodeVisitor): void {
    this.replayer.add(event, visit);
    if (this.replayer.pendingSignatureChecks >= this.chunkSize) this.send();
  }

  /**
   * Sends the last checks, waits for every result and names the first failure.
   *
   * @throws whatever `checkSignatures` rejects with (a pool's worker crash, for one);
   *   AppError `invalid_argument` when it returns the wrong number of results.
   */
  async finish(): Promise<JournalVerification> {
    this.send();
    const plan = this.replayer.plan();
    const results: boolean[] = [];
    for (const part of this.parts) {
      const chunk = await part.results;
      if (chunk.length !== part.size) {
        throw new AppError(
          'invalid_argument',
          `checkSignatures returned ${String(chunk.length)} results for ${String(part.size)} checks; ` +
            'return one result per check, in order',
          { details: { checks: part.size, results: chunk.length } },
        );
      }
      results.push(...chunk);
    }
    return concludeJournalVerification(plan, results);
  }

  private send(): void {
    const checks = this.replayer.takeSignatureChecks();
    if (checks.length === 0) return;
    const results = this.checkSignatures(checks);
    // Awaited in finish(); until then a rejection must not count as unhandled.
    results.catch(() => undefined);
    this.parts.push({ size: checks.length, results });
  }
}

/**
 * Combines a plan with the outcome of its signature checks (`signatureResults[i]` is the
 * result of `plan.signatureChecks[i]`) and names the first failure, in position order.
 *
 * @throws AppError `invalid_argument` when the number of results differs from the number
 *   of checks.
 */
export function concludeJournalVerification(
  plan: VerificationPlan,
  signatureResults: readonly boolean[],
): JournalVerification {
  if (signatureResults.length !== plan.signatureChecks.length) {
    throw new AppError(
      'invalid_argument',
      `the plan has ${String(plan.signatureChecks.length)} signature checks but ${String(signatureResults.length)} ` +
        'results were given; run every check in plan.signatureChecks, in order',
      { details: { checks: plan.signatureChecks.length, results: signatureResults.length } },
    );
  }
  const passed = (step: RootStep): boolean =>
    signatureResults[step.signatureIndex] === true && step.countMatches && step.rootMatches;
  let verifiedLeafCount = 0;
  let failure: VerifyFailure | undefined;
  for (const [i, step] of plan.steps.entries()) {
    failure = stepFailure(step, signatureResults, () => {
      // The next root vouches only if nothing between fails either.
      for (const later of plan.steps.slice(i + 1)) {
        if (later.type === 'failed') return false;
        if (later.type === 'root') return passed(later);
        if (signatureResults[later.signatureIndex] !== true) return false;
      }
      return false;
    });
    if (failure !== undefined) break;
    if (step.type === 'root') verifiedLeafCount = step.position;
  }
  return {
    ok: failure === undefined,
    leafCount: plan.leafCount,
    signedRootCount: plan.signedRootCount,
    verifiedLeafCount,
    rootHex: toHex(plan.root),
    unsealed: plan.unsealed,
    failure,
    excised: plan.excised,
    checkpointChecked: plan.checkpointChecked,
  };
}

function stepFailure(
  step: VerificationStep,
  signatureResults: readonly boolean[],
  nextRootPasses: () => boolean,
): VerifyFailure | undefined {
  switch (step.type) {
    case 'failed':
      return step.failure;
    case 'rotation':
      if (signatureResults[step.signatureIndex] === true) return undefined;
      return {
        position: step.position,
        kind: EventKind.KeyRotated,
        reason: VerifyFailureReason.BadSignature,
        expected: step.oldKeyId,
        found: step.newKeyId,
        message:
          `key_rotated at ${String(step.position)}: the signature by key ${step.oldKeyId} over new key ` +
          `${step.newKeyId} does not verify; the rotation was forged or altered`,
      };
    case 'root':
      return rootFailure(step, signatureResults[step.signatureIndex] === true, nextRootPasses);
  }
}

function rootFailure(
  step: RootStep,
  signatureValid: boolean,
  nextRootPasses: () => boolean,
): VerifyFailure | undefined {
  if (signatureValid && step.countMatches && step.rootMatches) return undefined;
  const at = `signed_root at ${String(step.position)}`;
  const expectedRoot = toHex(step.expectedRoot);
  const foundRoot = toHex(step.foundRoot);
  const base = {
    position: step.position,
    kind: EventKind.SignedRoot,
    expected: expectedRoot,
    found: foundRoot,
  };
  if (!signatureValid) {
    return {
      ...base,
      reason: VerifyFailureReason.BadSignature,
      message:
        `${at}: the signature does not verify under key ${step.keyId} over leaf count ` +
        `${String(step.foundLeafCount)} and root ${foundRoot}; the signed root was altered`,
    };
  }
  if (!step.countMatches) {
    return {
      ...base,
      reason: VerifyFailureReason.EventChanged,
      message:
        `${at} was signed for ${String(step.foundLeafCount)} leaves but sits after ${String(step.position)} ` +
        'events: events were inserted or removed before it; restore the journal from a backup',
    };
  }
  if (nextRootPasses()) {
    return {
      ...base,
      reason: VerifyFailureReason.RootForged,
      message:
        `${at}: root ${foundRoot} is validly signed by ${step.keyId} but is not the root of the events ` +
        `(${expectedRoot}), while the next signed root vouches for those same events; the signer ` +
        'signed a false root: treat key ' +
        step.keyId +
        ' as misused and rotate it',
    };
  }
  return {
    ...base,
    reason: VerifyFailureReason.EventChanged,
    message:
      `${at}: the events before it hash to root ${expectedRoot}, not the signed ${foundRoot}; ` +
      'an event before this position was changed after signing; compare with a backup or an inclusion proof',
  };
}

/** Options for {@link verifyJournal}. */
export interface VerifyJournalOptions extends ReplayOptions {
  readonly verifier: Ed25519Verifier;
}

/**
 * Verifies a whole journal on this thread: replays, checks every signature, and names the
 * first failure. For large journals, use a {@link StreamingJournalVerifier} whose
 * `checkSignatures` runs on worker threads, so signatures are checked during the replay.
 *
 * @example
 * import { nodeSha256 } from './node-sha256';
 * import { createNodeEd25519Verifier } from './node-ed25519';
 * const result: JournalVerification = verifyJournal([], {
 *   hash: nodeSha256,
 *   verifier: createNodeEd25519Verifier(),
 *   trustedPublicKeys: [],
 * });
 *
 * @throws AppError `invalid_argument` for a trusted key that is not 32 bytes.
 */
export function verifyJournal(
  events: Iterable<JournalEvent>,
  options: VerifyJournalOptions,
): JournalVerification {
  const plan = planJournalVerification(events, options);
  const results = plan.signatureChecks.map((c) =>
    options.verifier.verify(c.publicKey, c.message, c.signature),
  );
  return concludeJournalVerification(plan, results);
}
