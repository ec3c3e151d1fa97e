import { AppError } from './errors';

/**
 * The per-conversation credential the control plane mints for each harness call
 * (docs/operator.md, "The harness door"). Both planes build and read it here.
 *
 * Text form: `phc1.` ‖ base64url(claims JSON) ‖ `.` ‖ base64url(ed25519 signature). The
 * signature covers UTF-8 `polychrome/harness-credential/v1` ‖ 0x00 ‖ the claims JSON bytes
 * exactly as sent, so the domain keeps it apart from approval and journal signatures made
 * with the same key.
 */

export const HARNESS_CREDENTIAL_DOMAIN = 'polychrome/harness-credential/v1';
/** The audience every harness credential names: a harness refuses any other. */
export const HARNESS_CREDENTIAL_AUDIENCE = 'polychrome-harness';
/** The gRPC metadata key that carries the credential. */
export const HARNESS_CREDENTIAL_METADATA = 'x-polychrome-credential';
const PREFIX = 'phc1';
/** Longest credential text accepted (a few hundred bytes in practice). */
const MAX_CREDENTIAL_LENGTH = 4096;

/** What a credential says. */
export interface HarnessCredentialClaims {
  readonly aud: string;
  /** The conversation's uid: the only conversation whose turns the call may run. */
  readonly conversation: string;
  /** The conversation's namespace: a harness that knows its own refuses any other. */
  readonly namespace: string;
  /** Unix ms when it was minted. */
  readonly iat: number;
  /** Unix ms after which it is refused. */
  readonly exp: number;
}

const encoder = new TextEncoder();

/** The bytes the control plane signs for `claimsJson` (UTF-8 JSON as sent). */
export function credentialSigningBytes(claimsJson: Uint8Array): Uint8Array {
  const domain = encoder.encode(HARNESS_CREDENTIAL_DOMAIN);
  const out = new Uint8Array(domain.length + 1 + claimsJson.length);
  out.set(domain, 0);
  out[domain.length] = 0;
  out.set(claimsJson, domain.length + 1);
  return out;
}

/** Builds the credential text; `sign` makes the ed25519 signature over the given bytes. */
export function encodeHarnessCredential(
  claims: HarnessCredentialClaims,
  sign: (message: Uint8Array) => Uint8Array,
): string {
  const json = encoder.encode(
    JSON.stringify({
      aud: claims.aud,
      conversation: claims.conversation,
      namespace: claims.namespace,
      iat: claims.iat,
      exp: claims.exp,
    }),
  );
  const signature = sign(credentialSigningBytes(json));
  return `${PREFIX}.${Buffer.from(json).toString('base64url')}.${Buffer.from(signature).toString('base64url')}`;
}

/** Checks an ed25519 signature with a raw 32-byte public key. */
export interface CredentialVerifier {
  verify(message: Uint8Array, signature: Uint8Array, publicKey: Uint8Array): boolean;
}

export type CredentialVerdict =
  | { readonly ok: true; readonly claims: HarnessCredentialClaims }
  | { readonly ok: false; readonly reason: string };

/**
 * Accepts `text` only when it is well formed, signed by one of `publicKeys` (current and
 * next key during a rotation), names the harness audience, and has not expired at
 * `nowMs`. The reason never quotes the credential.
 */
export function verifyHarnessCredential(
  text: string,
  publicKeys: readonly Uint8Array[],
  verifier: CredentialVerifier,
  nowMs: number,
): CredentialVerdict {
  const parts = text.length > MAX_CREDENTIAL_LENGTH ? [] : text.split('.');
  const [prefix, body, sig] = parts;
  if (parts.length !== 3 || prefix !== PREFIX || body === undefined || sig === undefined) {
    return { ok: false, reason: `the credential is not in the ${PREFIX} format` };
  }
  const json = new Uint8Array(Buffer.from(body, 'base64url'));
  const signature = new Uint8Array(Buffer.from(sig, 'base64url'));
  const message = credentialSigningBytes(json);
  const signed = publicKeys.some((key) => {
    try {
      return verifier.verify(message, signature, key);
    } catch {
      return false;
    }
  });
  if (!signed) {
    return {
      ok: false,
      reason:
        'the credential is not signed by a key this harness trusts (forged, or minted with a key not in its Secret)',
    };
  }
  const claims = parseClaims(json);
  if (claims === undefined) return { ok: false, reason: 'the credential claims are malformed' };
  if (claims.aud !== HARNESS_CREDENTIAL_AUDIENCE) {
    return {
      ok: false,
      reason: `the credential is for audience ${claims.aud}, not ${HARNESS_CREDENTIAL_AUDIENCE}`,
    };
  }
  if (claims.exp <= nowMs) {
    return { ok: false, reason: `the credential expired at ${new Date(claims.exp).toISOString()}` };
  }
  return { ok: true, claims };
}

function parseClaims(json: Uint8Array): HarnessCredentialClaims | undefined {
  let value: unknown;
  try {
    value = JSON.parse(Buffer.from(json).toString('utf8'));
  } catch {
    return undefined;
  }
  if (typeof value !== 'object' || value === null) return undefined;
  const { aud, conversation, namespace, iat, exp } = value as Record<string, unknown>;
  if (
    typeof aud !== 'string' ||
    typeof conversation !== 'string' ||
    conversation === '' ||
    typeof namespace !== 'string' ||
    typeof iat !== 'number' ||
    typeof exp !== 'number'
  ) {
    return undefined;
  }
  return { aud, conversation, namespace, iat, exp };
}

/** The error a harness answers a call with that carries no valid credential. */
export function credentialRefused(reason: string): AppError {
  return new AppError(
    'unauthenticated',
    `the call has no valid harness credential: ${reason}; the control plane mints one per conversation and call (metadata ${HARNESS_CREDENTIAL_METADATA})`,
  );
}
