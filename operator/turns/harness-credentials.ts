/**
 * Mints the per-conversation harness credential (common/harness-credential.ts): one per
 * call, bound to the conversation's uid, short-lived, signed with the control plane's
 * ed25519 key under its own domain, so it can never pass for an approval or a journal
 * signature. The credential goes into the call's metadata and nowhere else: it is never
 * logged, and never written to status, events or the journal.
 */
import { sign, type KeyObject } from 'node:crypto';
import { AppError } from '../../common/errors';
import { ed25519PrivateKey } from './ed25519-private-key';
import {
  encodeHarnessCredential,
  HARNESS_CREDENTIAL_AUDIENCE,
} from '../../common/harness-credential';

/** How long a minted credential is valid: it is checked when the call starts. */
export const HARNESS_CREDENTIAL_TTL_MS = 5 * 60_000;

/** What the harness connector needs: a fresh credential for a conversation's call. */
export interface HarnessCredentials {
  mint(conversation: string, namespace: string): string;
}

export class HarnessCredentialMinter implements HarnessCredentials {
  private constructor(
    private readonly key: KeyObject,
    private readonly nowMs: () => number,
  ) {}

  /**
   * From an ed25519 private key (PKCS#8 PEM): the approval key file, whose public half the
   * harness pods already hold.
   *
   * @throws AppError `invalid_argument` when the PEM is not an ed25519 private key.
   */
  static fromPem(
    pem: string,
    source = 'credential key',
    nowMs: () => number = Date.now,
  ): HarnessCredentialMinter {
    const key = ed25519PrivateKey(pem, source, 'harness credentials');
    return new HarnessCredentialMinter(key, nowMs);
  }

  mint(conversation: string, namespace: string): string {
    if (conversation === '') {
      throw new AppError(
        'invalid_argument',
        'a harness credential needs the conversation uid; the Conversation has none yet',
      );
    }
    const iat = this.nowMs();
    return encodeHarnessCredential(
      {
        aud: HARNESS_CREDENTIAL_AUDIENCE,
        conversation,
        namespace,
        iat,
        exp: iat + HARNESS_CREDENTIAL_TTL_MS,
      },
      (message) => new Uint8Array(sign(null, message, this.key)),
    );
  }
}
