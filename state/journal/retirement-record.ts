/**
 * The retirement record of a partition whose conversation was deleted under the
 * `checkpoint` policy (docs/journal-format.md, "Retirement record"): the final head, the
 * MMR root over every entry and the key id, signed by the journal key over a
 * domain-separated message that binds the partition name, so a record cannot be moved to
 * another partition. Pure: the caller brings SHA-256, the signer and the verifier.
 */
import { AppError } from '../../common/errors';
import type { Ed25519Signer, Ed25519Verifier } from './ed25519';
import { ED25519_SIGNATURE_BYTES } from './ed25519';
import { bytesEqual, toHex } from './hex';
import { DIGEST_BYTES, type Sha256 } from './sha256';
import { keyIdOf } from './signed-root';
import { assertU64, writeU64 } from './u64';

/** Domain prefix of the retirement message; a signature over it can mean nothing else. */
export const JOURNAL_RETIRED_DOMAIN = 'polychrome/journal-retired/v1';
const DOMAIN_BYTES = new TextEncoder().encode(JOURNAL_RETIRED_DOMAIN);

/** What a retirement signs: where the partition ended, and when it was retired. */
export interface RetirementFields {
  readonly partition: string;
  /** The number of entries when retired. */
  readonly head: number;
  /** The MMR root over all `head` entries (section 5), 32 bytes. */
  readonly root: Uint8Array;
  readonly retiredAtMs: number;
}

/** A signed retirement: the fields, the signing key's id and the signature. */
export interface SignedRetirement extends RetirementFields {
  readonly keyId: string;
  readonly signature: Uint8Array;
}

/**
 * The bytes a retirement signature covers: UTF-8 `polychrome/journal-retired/v1` ‖
 * u64 len(partition) ‖ partition (UTF-8) ‖ u64 head ‖ root (32 bytes) ‖ u64 retiredAtMs;
 * 85 bytes plus the partition name.
 *
 * @throws AppError `invalid_argument` for an empty partition, a root that is not 32 bytes,
 *   or a head or time that is not a non-negative safe integer.
 */
export function retirementMessage(fields: RetirementFields): Uint8Array {
  assertU64(fields.head, 'head');
  assertU64(fields.retiredAtMs, 'retired at');
  if (fields.root.length !== DIGEST_BYTES) {
    throw new AppError(
      'invalid_argument',
      `a retirement root must be ${String(DIGEST_BYTES)} bytes, got ${String(fields.root.length)}`,
      { details: { field: 'root' } },
    );
  }
  if (fields.partition.length === 0) {
    throw new AppError('invalid_argument', 'a retirement record needs a partition name', {
      details: { field: 'partition' },
    });
  }
  const name = new TextEncoder().encode(fields.partition);
  const d = DOMAIN_BYTES.length;
  const out = new Uint8Array(d + 8 + name.length + 8 + DIGEST_BYTES + 8);
  out.set(DOMAIN_BYTES, 0);
  writeU64(out, d, name.length);
  out.set(name, d + 8);
  writeU64(out, d + 8 + name.length, fields.head);
  out.set(fields.root, d + 16 + name.length);
  writeU64(out, d + 16 + name.length + DIGEST_BYTES, fields.retiredAtMs);
  return out;
}

/** Signs `fields` with `signer`. @throws AppError as {@link retirementMessage}. */
export function signRetirement(
  hash: Sha256,
  signer: Ed25519Signer,
  fields: RetirementFields,
): SignedRetirement {
  return {
    ...fields,
    root: fields.root.slice(),
    keyId: keyIdOf(hash, signer.publicKey),
    signature: signer.sign(retirementMessage(fields)),
  };
}

/** Why a retirement record does not vouch for a journal. */
export const RetirementFailureReason = {
  /** The record's signature, key or partition does not hold. */
  BadRecord: 'retirement_invalid',
  /** The journal is not the one the record describes (shorter, longer, or other entries). */
  Mismatch: 'retirement_mismatch',
} as const;
export type RetirementFailureReason =
  (typeof RetirementFailureReason)[keyof typeof RetirementFailureReason];

/** A failed check of a journal against a retirement record. */
export interface RetirementFailure {
  readonly reason: RetirementFailureReason;
  readonly expected: string;
  readonly found: string;
  readonly message: string;
}

/** What the journal being checked is: its partition, length and root over every entry. */
export interface ReplayedJournal {
  readonly partition: string;
  readonly leafCount: number;
  readonly root: Uint8Array;
}

/**
 * Checks the record itself: it names `partition`, its key is one of `trustedKeys` and its
 * signature verifies over {@link retirementMessage}.
 */
export function retirementRecordFailure(
  record: SignedRetirement,
  partition: string,
  trustedKeys: readonly Uint8Array[],
  crypto: { readonly hash: Sha256; readonly verifier: Ed25519Verifier },
): RetirementFailure | undefined {
  const bad = (expected: string, found: string, message: string): RetirementFailure => ({
    reason: RetirementFailureReason.BadRecord,
    expected,
    found,
    message,
  });
  if (record.partition !== partition) {
    return bad(
      partition,
      record.partition,
      `the retirement record is for ${record.partition}, not ${partition}: use the record of this partition`,
    );
  }
  const key = trustedKeys.find((k) => keyIdOf(crypto.hash, k) === record.keyId);
  if (key === undefined) {
    const ids = trustedKeys.map((k) => keyIdOf(crypto.hash, k));
    return bad(
      ids.join(','),
      record.keyId,
      `the retirement record is signed by key ${record.keyId}, which is not trusted here ` +
        `(${ids.join(', ') || 'none'}); pin the state plane's key with --public-key`,
    );
  }
  let message: Uint8Array;
  try {
    message = retirementMessage(record);
  } catch (error) {
    const why = error instanceof Error ? error.message : String(error);
    return bad('', '', `the retirement record does not read: ${why}`);
  }
  if (
    record.signature.length !== ED25519_SIGNATURE_BYTES ||
    !crypto.verifier.verify(key, message, record.signature)
  ) {
    return bad(
      record.keyId,
      toHex(record.signature),
      `the retirement record's signature does not verify under key ${record.keyId}: the record was changed`,
    );
  }
  return undefined;
}

/**
 * Checks a replayed journal against a (checked) record: it must hold exactly `head`
 * entries whose MMR root is the record's root. A shorter journal is a truncated export, a
 * different root a changed one.
 */
export function retiredJournalFailure(
  record: SignedRetirement,
  journal: ReplayedJournal,
): RetirementFailure | undefined {
  if (journal.leafCount === record.head && bytesEqual(journal.root, record.root)) return undefined;
  const length =
    journal.leafCount === record.head
      ? `its ${String(journal.leafCount)} entries hash to another root`
      : `it holds ${String(journal.leafCount)} entries`;
  return {
    reason: RetirementFailureReason.Mismatch,
    expected: `${String(record.head)}:${toHex(record.root)}`,
    found: `${String(journal.leafCount)}:${toHex(journal.root)}`,
    message:
      `the journal is not the one retired: the retirement record says ${record.partition} ended ` +
      `with ${String(record.head)} entries and root ${toHex(record.root)}, but ${length}; ` +
      'the export was truncated or changed, or taken before the last turns',
  };
}
