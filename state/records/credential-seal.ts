import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';

import { AppError } from '../../common/errors';

/*
 * Sealed credential value, stored base64url (no padding) in the record's `sealed` field:
 *
 *   0x01 (format version) ‖ nonce (12 bytes, random per seal) ‖ ciphertext ‖ GCM tag (16)
 *
 * AES-256-GCM under the records seal key (records-key.ts). The associated data binds the
 * value to its record, so a sealed value copied into another credential or persona fails
 * to open:
 *
 *   UTF-8 "polychrome/records/credential/v1" ‖ 0x00 ‖ credentialId ‖ 0x00 ‖ personaId
 *
 * (ids never hold 0x00: record-input.ts). Random 96-bit nonces are safe for far more seals
 * than one key will see (NIST SP 800-38D allows 2^32 per key).
 */

const VERSION = 0x01;
const NONCE_BYTES = 12;
const TAG_BYTES = 16;
const AAD_DOMAIN = 'polychrome/records/credential/v1';

/** The associated data of credential `credentialId` held by `personaId`. */
export function credentialAad(credentialId: string, personaId: string): Uint8Array {
  return new Uint8Array(Buffer.from(`${AAD_DOMAIN}\u0000${credentialId}\u0000${personaId}`));
}

/** Seals `plaintext` under `sealKey` (32 bytes) with `aad`; returns the stored text. */
export function sealSecret(sealKey: Uint8Array, plaintext: Uint8Array, aad: Uint8Array): string {
  const nonce = randomBytes(NONCE_BYTES);
  const cipher = createCipheriv('aes-256-gcm', sealKey, nonce, { authTagLength: TAG_BYTES });
  cipher.setAAD(aad);
  const body = Buffer.concat([cipher.update(plaintext), cipher.final()]);
  return Buffer.concat([Buffer.of(VERSION), nonce, body, cipher.getAuthTag()]).toString(
    'base64url',
  );
}

/**
 * Opens a value {@link sealSecret} produced. `where` names the record in messages.
 *
 * @throws AppError `data_loss` when the value is malformed, of another format version, or
 *   fails authentication (changed bytes, another key, another record's associated data).
 */
export function openSealed(
  sealKey: Uint8Array,
  sealed: string,
  aad: Uint8Array,
  where: string,
): Uint8Array {
  const bytes = Buffer.from(sealed, 'base64url');
  if (bytes.length < 1 + NONCE_BYTES + TAG_BYTES || bytes[0] !== VERSION) {
    throw new AppError(
      'data_loss',
      `${where}: the sealed value is malformed or of an unknown format; restore it from a ` +
        'backup or store the credential again',
      { details: { bytes: bytes.length, version: bytes[0] ?? null } },
    );
  }
  const nonce = bytes.subarray(1, 1 + NONCE_BYTES);
  const body = bytes.subarray(1 + NONCE_BYTES, bytes.length - TAG_BYTES);
  const tag = bytes.subarray(bytes.length - TAG_BYTES);
  try {
    const decipher = createDecipheriv('aes-256-gcm', sealKey, nonce, { authTagLength: TAG_BYTES });
    decipher.setAAD(aad);
    decipher.setAuthTag(tag);
    return new Uint8Array(Buffer.concat([decipher.update(body), decipher.final()]));
  } catch (cause) {
    throw new AppError(
      'data_loss',
      `${where}: the sealed value fails authentication: it was changed, or sealed under ` +
        'another records key; restore it from a backup or store the credential again',
      { cause },
    );
  }
}
