/**
 * The control plane's ed25519 private key from PKCS#8 PEM: the approval key, which signs
 * approvals and harness credentials, each under its own domain.
 */
import { createPrivateKey, type KeyObject } from 'node:crypto';
import { AppError } from '../../common/errors';

/**
 * @param source what the PEM is, for messages (`approval key`, a file path)
 * @param use what the key signs, for messages (`approvals`)
 * @throws AppError `invalid_argument` when the PEM is not an ed25519 private key, saying
 *   how to make one.
 */
export function ed25519PrivateKey(pem: string, source: string, use: string): KeyObject {
  let key: KeyObject;
  try {
    key = createPrivateKey(pem);
  } catch (error) {
    throw new AppError(
      'invalid_argument',
      `${source} is not a PEM private key; generate one with openssl genpkey -algorithm ed25519`,
      { cause: error },
    );
  }
  if (key.asymmetricKeyType !== 'ed25519') {
    throw new AppError(
      'invalid_argument',
      `${source} is a ${key.asymmetricKeyType ?? 'unknown'} key; ${use} need ed25519`,
    );
  }
  return key;
}
