import { AppError } from '../../common/errors';
import { keyRotationMessage } from '../../common/journal-keys';
import { ED25519_KEY_BYTES, type Ed25519Signer } from './ed25519';
import { toHex } from './hex';
import { DIGEST_BYTES, type Sha256 } from './sha256';
import { assertU64, writeU64 } from './u64';

const utf8 = new TextEncoder();

/** Domain prefix of the version-1 signed-root message; a signature over it can mean nothing else. */
export const JOURNAL_ROOT_DOMAIN = 'polychrome/journal-root/v1';
/** Domain prefix of the version-2 signed-root message, which also binds the partition name. */
export const JOURNAL_ROOT_DOMAIN_V2 = 'polychrome/journal-root/v2';
/** Versions of the signed-root message (the `version` field of `SignedRoot`; 0 reads as 1). */
export const SignedRootVersion = { V1: 1, V2: 2 } as const;
export type SignedRootVersion = (typeof SignedRootVersion)[keyof typeof SignedRootVersion];
// The key-rotation message is built in common/, where the control plane also checks
// rotations before it records a key in a Conversation's status (common/journal-keys.ts).

const ROOT_DOMAIN_BYTES = utf8.encode(JOURNAL_ROOT_DOMAIN);
const ROOT_DOMAIN_V2_BYTES = utf8.encode(JOURNAL_ROOT_DOMAIN_V2);

/**
 * The bytes a `signed_root` signature covers:
 * UTF-8 `polychrome/journal-root/v1` ‖ u64 leafCount ‖ root (32 bytes), 66 bytes in all.
 *
 * @throws AppError `invalid_argument` when `root` is not 32 bytes or `leafCount` is not a
 *   non-negative safe integer.
 */
export function signedRootMessage(leafCount: number, root: Uint8Array): Uint8Array {
  assertU64(leafCount, 'leaf count');
  assertLength(root, DIGEST_BYTES, 'root');
  const message = new Uint8Array(ROOT_DOMAIN_BYTES.length + 8 + DIGEST_BYTES);
  message.set(ROOT_DOMAIN_BYTES, 0);
  writeU64(message, ROOT_DOMAIN_BYTES.length, leafCount);
  message.set(root, ROOT_DOMAIN_BYTES.length + 8);
  return message;
}

/**
 * The bytes a version-2 `signed_root` signature covers: UTF-8 `polychrome/journal-root/v2`
 * ‖ u64 len(partition) ‖ partition (UTF-8) ‖ u64 leafCount ‖ root (32 bytes), 74 bytes plus
 * the partition name. Binding the name makes a journal copied into another partition fail
 * at its first version-2 root.
 *
 * @throws AppError `invalid_argument` when `root` is not 32 bytes, `leafCount` is not a
 *   non-negative safe integer, or `partition` is empty.
 */
export function signedRootMessageV2(
  partition: string,
  leafCount: number,
  root: Uint8Array,
): Uint8Array {
  assertU64(leafCount, 'leaf count');
  assertLength(root, DIGEST_BYTES, 'root');
  if (partition.length === 0) {
    throw new AppError('invalid_argument', 'a version-2 signed root needs a partition name', {
      details: { field: 'partition' },
    });
  }
  const name = utf8.encode(partition);
  const d = ROOT_DOMAIN_V2_BYTES.length;
  const message = new Uint8Array(d + 8 + name.length + 8 + DIGEST_BYTES);
  message.set(ROOT_DOMAIN_V2_BYTES, 0);
  writeU64(message, d, name.length);
  message.set(name, d + 8);
  writeU64(message, d + 8 + name.length, leafCount);
  message.set(root, d + 16 + name.length);
  return message;
}

/**
 * The message of a signed root of either version: version 2 with `partition`, else 1.
 *
 * @throws AppError as {@link signedRootMessage} and {@link signedRootMessageV2}.
 */
export function rootMessageOf(fields: {
  readonly version: SignedRootVersion;
  readonly partition?: string;
  readonly leafCount: number;
  readonly root: Uint8Array;
}): Uint8Array {
  return fields.version === SignedRootVersion.V2
    ? signedRootMessageV2(fields.partition ?? '', fields.leafCount, fields.root)
    : signedRootMessage(fields.leafCount, fields.root);
}

/**
 * Key id of a raw ed25519 public key: the first 16 bytes of its SHA-256, lowercase hex
 * (32 characters).
 *
 * @throws AppError `invalid_argument` when the key is not 32 bytes.
 */
export function keyIdOf(hash: Sha256, publicKey: Uint8Array): string {
  assertLength(publicKey, ED25519_KEY_BYTES, 'public key');
  return toHex(hash(publicKey).subarray(0, 16));
}

/** The fields of a `SignedRoot` payload (proto/polychrome/events/v1), as domain values. */
export interface SignedRootFields {
  /** 1: signed over {@link signedRootMessage}; 2: over {@link signedRootMessageV2}. */
  readonly version: SignedRootVersion;
  /** The partition a version-2 root was signed for; `undefined` for version 1. */
  readonly partition?: string;
  readonly leafCount: number;
  readonly root: Uint8Array;
  readonly keyId: string;
  readonly signature: Uint8Array;
}

/**
 * Signs the root over the first `leafCount` leaves. The result goes into the `signed_root`
 * event at position `leafCount`, in the same batch as the events it covers. With
 * `partition` the root is version 2 (what the store writes); without, version 1 (kept for
 * the vectors and for tests of old journals).
 *
 * @throws AppError `invalid_argument` for a root that is not 32 bytes.
 */
export function signRoot(
  hash: Sha256,
  signer: Ed25519Signer,
  leafCount: number,
  root: Uint8Array,
  partition?: string,
): SignedRootFields {
  const keyId = keyIdOf(hash, signer.publicKey);
  if (partition === undefined) {
    const signature = signer.sign(signedRootMessage(leafCount, root));
    return { version: SignedRootVersion.V1, leafCount, root: root.slice(), keyId, signature };
  }
  const signature = signer.sign(signedRootMessageV2(partition, leafCount, root));
  return {
    version: SignedRootVersion.V2,
    partition,
    leafCount,
    root: root.slice(),
    keyId,
    signature,
  };
}

/**
 * The `SignedRoot` payload fields of `fields`, as proto/polychrome/events/v1 encodes them:
 * a version-1 root leaves `version` and `partition` unset, so its bytes are what a
 * version-1 writer wrote.
 */
export function signedRootPayload(fields: SignedRootFields): {
  leafCount: number;
  root: Buffer;
  keyId: string;
  signature: Buffer;
  version: number;
  partition: string;
} {
  return {
    leafCount: fields.leafCount,
    root: Buffer.from(fields.root),
    keyId: fields.keyId,
    signature: Buffer.from(fields.signature),
    version: fields.version === SignedRootVersion.V2 ? 2 : 0,
    partition: fields.partition ?? '',
  };
}

/** The fields of a `KeyRotated` payload, as domain values. */
export interface KeyRotationFields {
  readonly oldKeyId: string;
  readonly newKeyId: string;
  readonly newPublicKey: Uint8Array;
  readonly signatureByOldKey: Uint8Array;
}

/**
 * Hands signing over from `oldSigner` to the key `newPublicKey`: the old key signs
 * {@link keyRotationMessage}. Append the result as a `key_rotated` event; every
 * `signed_root` after it must be signed by the new key.
 *
 * @throws AppError `invalid_argument` when the new key is not 32 bytes.
 */
export function rotateKey(
  hash: Sha256,
  oldSigner: Ed25519Signer,
  newPublicKey: Uint8Array,
): KeyRotationFields {
  return {
    oldKeyId: keyIdOf(hash, oldSigner.publicKey),
    newKeyId: keyIdOf(hash, newPublicKey),
    newPublicKey: newPublicKey.slice(),
    signatureByOldKey: oldSigner.sign(keyRotationMessage(newPublicKey)),
  };
}

function assertLength(bytes: Uint8Array, length: number, what: string): void {
  if (bytes.length !== length) {
    throw new AppError(
      'invalid_argument',
      `${what} must be ${String(length)} bytes, got ${String(bytes.length)}`,
      { details: { field: what, length: bytes.length } },
    );
  }
}
