import type { NodeVisitor } from './compact-mmr';
import { CompactMmr } from './compact-mmr';
import { checkpointFailure, truncatedBeforeCheckpoint } from './checkpoint-check';
import { firstUnrecordedExcision, readExcisionRecord, type ExcisionRecord } from './excision-check';
import { toHex } from './hex';
import { checkKeyRotation } from './key-rotation-check';
import { LeafHasher } from './leaf-digest';
import type { Sha256 } from './sha256';
import { keyIdOf } from './signed-root';
import { checkSignedRoot } from './signed-root-check';
import { EventKind } from '../../common/event-kinds';
import { encodeU64 } from './u64';
import {
  VerifyFailureReason,
  type FailedStep,
  type JournalCheckpoint,
  type JournalEvent,
  type ReplayOptions,
  type SignatureCheck,
  type VerificationPlan,
  type VerificationStep,
  type VerifyFailure,
} from './verification-types';

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
  private readonly excisionRecords = new Map<number, ExcisionRecord>();
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
    if (position + 1 === this.checkpoint?.head && !this.settled) {
      const failure = checkpointFailure(event, this.checkpoint, this.mmr.root());
      if (failure !== undefined) this.fail(failure);
    }
    if (event.excisedLeaf !== undefined) {
      this.excised.push(position);
      this.excisedLeaves.set(position, event.excisedLeaf);
      this.mmr.append(event.excisedLeaf, visit);
      return;
    }
    if (event.kind === EventKind.SignedRoot) {
      this.signedRoots += 1;
      this.lastSignedRoot = position;
      if (!this.settled) this.checkRoot(event);
    } else if (event.kind === EventKind.KeyRotated && !this.settled) {
      this.checkRotation(event);
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
    const unrecorded = this.settled
      ? undefined
      : firstUnrecordedExcision(
          this.excised,
          this.excisedLeaves,
          this.excisionRecords,
          this.lastSignedRoot,
        );
    if (unrecorded !== undefined) insertInOrder(steps, unrecorded);
    const checkpoint = this.checkpoint;
    if (checkpoint !== undefined && leafCount < checkpoint.head && !this.settled) {
      steps.push(truncatedBeforeCheckpoint(checkpoint, leafCount));
    }
    return {
      leafCount,
      signedRootCount: this.signedRoots,
      root: this.mmr.root(),
      unsealed: { fromPosition, count: leafCount - fromPosition },
      signatureChecks: [...this.checks],
      steps,
      excised: [...this.excised],
      erased: this.excised.filter((p) => this.excisionRecords.get(p)?.erased === true),
      checkpointChecked: checkpoint !== undefined,
    };
  }

  private recordExcision(event: JournalEvent): void {
    const record = readExcisionRecord(event);
    if ('reason' in record) this.fail(record);
    else this.excisionRecords.set(record.position, record);
  }

  private fail(failure: VerifyFailure): void {
    if (!this.settled) this.steps.push({ type: 'failed', failure });
    this.settled = true;
  }

  private checkRoot(event: JournalEvent): void {
    const outcome = checkSignedRoot(event, {
      expectedRoot: this.mmr.root(),
      partition: this.partition,
      trusted: this.trusted,
      signatureIndex: this.checks.length,
    });
    if ('failure' in outcome) {
      this.fail(outcome.failure);
      return;
    }
    this.steps.push(outcome.step);
    this.checks.push(outcome.check);
  }

  private checkRotation(event: JournalEvent): void {
    const outcome = checkKeyRotation(event, {
      hash: this.hash,
      trusted: this.trusted,
      signatureIndex: this.checks.length,
    });
    if ('failure' in outcome) {
      this.fail(outcome.failure);
      return;
    }
    this.steps.push(outcome.step);
    this.checks.push(outcome.check);
    // The old key is retired: roots after a rotation must be signed by the new key, so a
    // leaked old key cannot extend the journal.
    this.trusted.delete(outcome.step.oldKeyId);
    this.trusted.set(outcome.step.newKeyId, outcome.newPublicKey);
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
