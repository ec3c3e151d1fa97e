import { createHash, hkdfSync } from 'node:crypto';
import { readFile } from 'node:fs/promises';

import { AppError } from '../../common/errors';

/** Bytes in a records key. */
export const RECORDS_KEY_BYTES = 32;

/**
 * The secret the records are protected with, and the subkeys derived from it. One 32-byte
 * key is provisioned (a Kubernetes Secret in a cluster, a local file in development); each
 * use gets its own subkey through HKDF-SHA-256 (RFC 5869, empty salt, info below), so a
 * key is never used by two algorithms:
 *
 * - `sealKey` = HKDF(key, info "polychrome/records/credential-seal/v1"): AES-256-GCM key
 *   for credential values (credential-seal.ts).
 * - `codeKey` = HKDF(key, info "polychrome/records/ceremony-code/v1"): HMAC-SHA-256 key for
 *   ceremony codes, so a stolen database does not let anyone test short codes offline.
 * - `keyId` = hex of the first 8 bytes of SHA-256("polychrome/records/key-id/v1" ‖ key):
 *   names the key in records and messages without revealing it.
 */
export interface RecordsKey {
  readonly keyId: string;
  readonly sealKey: Uint8Array;
  readonly codeKey: Uint8Array;
}

/**
 * Derives the {@link RecordsKey} from a 32-byte secret.
 *
 * @throws AppError `invalid_argument` unless `secret` is exactly 32 bytes.
 */
export function deriveRecordsKey(secret: Uint8Array): RecordsKey {
  if (secret.length !== RECORDS_KEY_BYTES) {
    throw new AppError(
      'invalid_argument',
      `the records key is ${String(secret.length)} bytes; it must be exactly ` +
        `${String(RECORDS_KEY_BYTES)} random bytes (e.g. \`openssl rand 32\`)`,
      { details: { bytes: secret.length } },
    );
  }
  const derive = (info: string): Uint8Array =>
    new Uint8Array(hkdfSync('sha256', secret, new Uint8Array(0), info, RECORDS_KEY_BYTES));
  const keyId = createHash('sha256')
    .update('polychrome/records/key-id/v1')
    .update(secret)
    .digest()
    .subarray(0, 8)
    .toString('hex');
  return {
    keyId,
    sealKey: derive('polychrome/records/credential-seal/v1'),
    codeKey: derive('polychrome/records/ceremony-code/v1'),
  };
}

/**
 * Reads the records key from `path`: exactly 32 raw bytes, or the same bytes as 64 hex
 * digits or as base64, optionally followed by a newline (a Secret created with
 * `kubectl create secret generic --from-file` holds the file's bytes as they are).
 *
 * @throws AppError `failed_precondition` when the file cannot be read, or
 *   `invalid_argument` when it holds none of those forms; the message names the path and
 *   length, never the content.
 */
export async function loadRecordsKey(path: string): Promise<RecordsKey> {
  let bytes: Buffer;
  try {
    bytes = await readFile(path);
  } catch (cause) {
    throw new AppError(
      'failed_precondition',
      `cannot read the records key file ${path}; mount the records key Secret there`,
      { details: { path }, cause },
    );
  }
  return deriveRecordsKey(decodeKeyFile(bytes, path));
}

function decodeKeyFile(bytes: Buffer, path: string): Uint8Array {
  if (bytes.length === RECORDS_KEY_BYTES) return new Uint8Array(bytes);
  const text = bytes.toString('latin1').replace(/\r?\n$/, '');
  if (/^[0-9a-fA-F]{64}$/.test(text)) return new Uint8Array(Buffer.from(text, 'hex'));
  if (/^[A-Za-z0-9+/_-]{43}=?$/.test(text)) {
    const decoded = Buffer.from(text, 'base64');
    if (decoded.length === RECORDS_KEY_BYTES) return new Uint8Array(decoded);
  }
  throw new AppError(
    'invalid_argument',
    `the records key file ${path} holds ${String(bytes.length)} bytes that are not a 32-byte ` +
      'key: write 32 raw random bytes, or them as 64 hex digits or base64',
    { details: { path, bytes: bytes.length } },
  );
}
