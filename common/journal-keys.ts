import { approvalKeyId } from './approval-bytes';
import { AppError } from './errors';

/*
 * The state plane's journal signing keys as the control plane records them in a
 * Conversation's `status.journal.publicKeys` (docs/operator.md, "Status"), so a verifier
 * can pin them instead of trusting the keys an export's header presents
 * (docs/replay.md, "Which journal key is trusted"). Pure: the caller brings ed25519.
 *
 * The record is trust on first use, then a chain: the key that signed the partition's
 * first root, learned when the control plane first records the journal, and after it
 * only keys the journal's own `key_rotated` events hand over to from a recorded key, with
 * the old key's signature checked. A state plane that starts signing with a key of its
 * own, without a rotation signed by a recorded key, does not get that key recorded.
 */

/** One journal signing key: its key id (docs/journal-format.md, section 6) and raw key. */
export interface JournalPublicKey {
  readonly keyId: string;
  /** The raw 32-byte ed25519 public key. */
  readonly publicKey: Uint8Array;
}

/**
 * The most keys a status records: the partition's first key and the newest after it. A
 * verifier pins them all at position 0; the journal's `key_rotated` events introduce the
 * ones between, so dropping a middle key loses nothing.
 */
export const MAX_RECORDED_JOURNAL_KEYS = 4;

/** Raw ed25519 public keys are 32 bytes. */
export const JOURNAL_PUBLIC_KEY_BYTES = 32;

/** Domain prefix of the key-rotation message (docs/journal-format.md, "key_rotated"). */
export const KEY_ROTATION_DOMAIN = 'polychrome/key-rotation/v1';
const ROTATION_DOMAIN_BYTES = new TextEncoder().encode(KEY_ROTATION_DOMAIN);

/**
 * The bytes a `key_rotated` signature (by the old key) covers:
 * UTF-8 `polychrome/key-rotation/v1` ‖ new public key (32 raw bytes), 58 bytes in all.
 *
 * @throws AppError `invalid_argument` when the key is not 32 bytes.
 */
export function keyRotationMessage(newPublicKey: Uint8Array): Uint8Array {
  if (newPublicKey.length !== JOURNAL_PUBLIC_KEY_BYTES) {
    throw new AppError(
      'invalid_argument',
      `new public key must be ${String(JOURNAL_PUBLIC_KEY_BYTES)} bytes, got ${String(newPublicKey.length)}`,
      { details: { field: 'new public key', length: newPublicKey.length } },
    );
  }
  const message = new Uint8Array(ROTATION_DOMAIN_BYTES.length + JOURNAL_PUBLIC_KEY_BYTES);
  message.set(ROTATION_DOMAIN_BYTES, 0);
  message.set(newPublicKey, ROTATION_DOMAIN_BYTES.length);
  return message;
}

/**
 * The key id of a raw ed25519 public key: the first 16 bytes of its SHA-256, 32 lowercase
 * hex characters. The journal's keys and the approval key share the rule.
 */
export function journalKeyId(publicKey: Uint8Array): string {
  return approvalKeyId(publicKey);
}

/** A `key_rotated` event's fields, as the journal holds them. */
export interface KeyRotationRecord {
  readonly position: number;
  readonly oldKeyId: string;
  readonly newKeyId: string;
  readonly newPublicKey: Uint8Array;
  readonly signatureByOldKey: Uint8Array;
}

/** Checks an ed25519 signature (RFC 8032, strict). */
export type Ed25519Check = (
  publicKey: Uint8Array,
  message: Uint8Array,
  signature: Uint8Array,
) => boolean;

/** Why a rotation was not followed. */
export const RotationRefusal = {
  /** The old key is not one the status recorded (a chain the control plane never saw start). */
  UnrecordedOldKey: 'unrecorded_old_key',
  /** The new key id is not the id of the new key, or the key is not 32 bytes. */
  KeyMismatch: 'key_mismatch',
  /** The old key's signature over the new key does not verify. */
  BadSignature: 'bad_signature',
} as const;
export type RotationRefusal = (typeof RotationRefusal)[keyof typeof RotationRefusal];

/** The keys after following the rotations, and the rotations refused. */
export interface ChainedKeys {
  readonly keys: readonly JournalPublicKey[];
  readonly refused: readonly { readonly position: number; readonly reason: RotationRefusal }[];
}

/**
 * Follows the journal's `key_rotated` events (in position order) from the recorded keys:
 * a rotation whose old key is recorded, whose new key id names its key, and whose
 * signature by the old key verifies adds the new key; any other is refused and adds
 * nothing. The result keeps the first key and the newest (at most
 * {@link MAX_RECORDED_JOURNAL_KEYS}).
 */
export function chainJournalKeys(
  recorded: readonly JournalPublicKey[],
  rotations: readonly KeyRotationRecord[],
  verify: Ed25519Check,
): ChainedKeys {
  const keys = [...recorded];
  const refused: { position: number; reason: RotationRefusal }[] = [];
  for (const rotation of rotations) {
    const old = keys.find((k) => k.keyId === rotation.oldKeyId);
    if (old === undefined) {
      refused.push({ position: rotation.position, reason: RotationRefusal.UnrecordedOldKey });
      continue;
    }
    if (
      rotation.newPublicKey.length !== JOURNAL_PUBLIC_KEY_BYTES ||
      journalKeyId(rotation.newPublicKey) !== rotation.newKeyId
    ) {
      refused.push({ position: rotation.position, reason: RotationRefusal.KeyMismatch });
      continue;
    }
    if (
      !verify(old.publicKey, keyRotationMessage(rotation.newPublicKey), rotation.signatureByOldKey)
    ) {
      refused.push({ position: rotation.position, reason: RotationRefusal.BadSignature });
      continue;
    }
    if (!keys.some((k) => k.keyId === rotation.newKeyId)) {
      keys.push({ keyId: rotation.newKeyId, publicKey: rotation.newPublicKey.slice() });
    }
  }
  return { keys: boundJournalKeys(keys), refused };
}

/** The first key and the newest, at most {@link MAX_RECORDED_JOURNAL_KEYS}. */
export function boundJournalKeys(keys: readonly JournalPublicKey[]): readonly JournalPublicKey[] {
  if (keys.length <= MAX_RECORDED_JOURNAL_KEYS) return keys;
  const [first, ...rest] = keys;
  return first === undefined ? [] : [first, ...rest.slice(-(MAX_RECORDED_JOURNAL_KEYS - 1))];
}

/** The status form of a key: `{keyId, publicKey: base64}`. */
export interface JournalPublicKeyJson {
  readonly keyId: string;
  readonly publicKey: string;
}

export function journalKeyToJson(key: JournalPublicKey): JournalPublicKeyJson {
  return { keyId: key.keyId, publicKey: Buffer.from(key.publicKey).toString('base64') };
}

/**
 * Reads the status form back. A key that is not 32 bytes of canonical base64, or whose id
 * is not the id of its key, is a damaged status, not a key.
 *
 * @returns the key, or a sentence saying what is wrong.
 */
export function journalKeyFromJson(json: {
  readonly keyId?: string;
  readonly publicKey?: string;
}): JournalPublicKey | string {
  const { keyId, publicKey } = json;
  if (typeof keyId !== 'string' || typeof publicKey !== 'string') {
    return 'a recorded journal key needs a keyId and a publicKey';
  }
  const bytes = Buffer.from(publicKey, 'base64');
  if (bytes.length !== JOURNAL_PUBLIC_KEY_BYTES || bytes.toString('base64') !== publicKey) {
    return `the recorded key ${JSON.stringify(keyId.slice(0, 64))} is not the base64 of 32 bytes`;
  }
  const key = new Uint8Array(bytes);
  if (journalKeyId(key) !== keyId) {
    return `the recorded key id ${JSON.stringify(keyId.slice(0, 64))} is not the id of its public key (${journalKeyId(key)})`;
  }
  return { keyId, publicKey: key };
}
