/**
 * Verification of a stored partition: replays its events through the pure verifier
 * (state/journal/verify-journal.ts), read ahead from the store's LevelDB handle, and the
 * trust anchor the replay starts from when the caller names none.
 */
import { AppError, isAppError } from '../../common/errors';
import type { Ed25519Verifier } from '../journal/ed25519';
import { toHex } from '../journal/hex';
import type { Sha256 } from '../journal/sha256';
import { encodeU64 } from '../journal/u64';
import { StreamingJournalVerifier } from '../journal/streaming-verifier';
import {
  VerifyFailureReason,
  type JournalEvent,
  type JournalVerification,
  type SignatureCheck,
} from '../journal/verification-types';
import { decodeHeadRecord } from './head-record';
import type { SigningKeyring } from './journal-keyring';
import type { VerifyOptions } from './journal-store-types';
import type { KvStore } from './level-kv';
import { readAhead } from './read-ahead';
import type { PartitionState } from './recover-partition';
import { decodeEventValue, headKey, positionOfKey, positionRange, RecordTag } from './store-keys';

/** Checks signatures on this thread with `verifier`, in the order of `checks`. */
export type SignatureChecker = (checks: readonly SignatureCheck[]) => Promise<readonly boolean[]>;

/** A {@link SignatureChecker} over `verifier`, on this thread. */
export function signatureChecker(verifier: Ed25519Verifier): SignatureChecker {
  return (checks) =>
    Promise.resolve(checks.map((c) => verifier.verify(c.publicKey, c.message, c.signature)));
}

/**
 * The key trusted at position 0 of `partition`: the held key whose id the head record
 * names as the signer of its first root (every held key for a refused partition without a
 * readable head record).
 *
 * @throws AppError `failed_precondition` when that key is not held.
 */
export async function genesisTrust(
  kv: KvStore,
  keyring: SigningKeyring,
  partition: string,
  state: PartitionState | undefined,
): Promise<Uint8Array[]> {
  let genesisKeyId = state?.genesisKeyId;
  if (genesisKeyId === undefined) {
    const record = await kv.get(headKey(partition));
    try {
      if (record !== undefined) genesisKeyId = decodeHeadRecord(record, partition).genesisKeyId;
    } catch (error) {
      if (!isAppError(error)) throw error;
    }
  }
  // A refused partition without a readable head record: trust every key held.
  if (genesisKeyId === undefined) return keyring.publicKeys();
  const signer = keyring.get(genesisKeyId);
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

/** What {@link verifyPartition} needs from the store. */
export interface VerifyParts {
  readonly kv: KvStore;
  readonly hash: Sha256;
  readonly keyring: SigningKeyring;
  /** Checks signatures when the caller gives no `checkSignatures`. */
  readonly verifier: Ed25519Verifier;
}

/** The stored event at `position`; a damaged record as an event of no kind. */
function storedEvent(partition: string, position: number, value: Uint8Array): JournalEvent {
  try {
    return { position, ...decodeEventValue(value, partition, position) };
  } catch {
    // A damaged record still takes part, so the first root after it names the damage.
    return { position, kind: '', payload: value };
  }
}

/** The `gap` failure of a partition whose stored events end at `missing`, below `head`. */
function gap(partition: string, outcome: JournalVerification, head: number): JournalVerification {
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
        `${partition}: events ${String(missing)} to ${String(head - 1)} are acknowledged but missing ` +
        'from the store; restore the partition from a backup',
    },
  };
}

/**
 * Replays the stored events of `partition` (its state: `state`, `undefined` for a
 * refused partition, whose stored events are all replayed) and reports the first failure.
 * Without `options.trustedPublicKeys` the replay trusts {@link genesisTrust}.
 *
 * @throws AppError `failed_precondition` as genesisTrust; `cancelled` when the signal fires.
 */
export async function verifyPartition(
  parts: VerifyParts,
  partition: string,
  state: PartitionState | undefined,
  options: VerifyOptions,
): Promise<JournalVerification> {
  const { kv } = parts;
  const { signal } = options;
  const replayer = new StreamingJournalVerifier({
    hash: parts.hash,
    trustedPublicKeys:
      options.trustedPublicKeys ?? (await genesisTrust(kv, parts.keyring, partition, state)),
    partition,
    ...(options.checkpoint === undefined ? {} : { checkpoint: options.checkpoint }),
    checkSignatures: options.checkSignatures ?? signatureChecker(parts.verifier),
  });
  const head = state?.head;
  for await (const entries of readAhead(
    kv.entries(positionRange(partition, RecordTag.Event, 0, head)),
  )) {
    for (const [key, value] of entries) {
      if (signal?.aborted === true) {
        throw new AppError('cancelled', `verifying ${partition} was cancelled`, {
          cause: signal.reason,
        });
      }
      const position = positionOfKey(key);
      replayer.add(storedEvent(partition, position, value));
    }
  }
  const outcome = await replayer.finish();
  if (outcome.failure === undefined && head !== undefined && outcome.leafCount < head) {
    return gap(partition, outcome, head);
  }
  return outcome;
}
