import { stat, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { CoreV1Api } from '@kubernetes/client-node';
import { AppError, ErrorCode } from '../../common/errors';
import { apiStatusCode } from '../controller/kube-api-errors';
import { walletFromPrivateKey, type Wallet } from './wallet';

/**
 * Where wallet keys live (docs/payments.md, "Wallets and the SecretStore"). Only the
 * control plane reads them. A store hands out a `Wallet` (an address and a signer), never
 * the key: no method returns it, and no error message names it.
 */
export interface SecretStore {
  /** The wallet named `name`; a missing or malformed key is an AppError naming the wallet. */
  wallet(name: string): Promise<Wallet>;
}

/** The Secret object a wallet's key is read from: `polychrome-wallet-<name>`. */
export const walletSecretName = (name: string): string => `polychrome-wallet-${name}`;

/** The key inside that Secret (and the file suffix in a directory store). */
export const WALLET_SECRET_KEY = 'private-key';

/** The narrow read a Kubernetes store needs: one Secret's `data` (base64 values), or undefined when it does not exist. */
export interface SecretReader {
  read(namespace: string, name: string): Promise<Readonly<Record<string, string>> | undefined>;
}

/** A `SecretReader` over the client's CoreV1Api (a 404 is "does not exist"). */
export function kubernetesSecretReader(
  core: Pick<CoreV1Api, 'readNamespacedSecret'>,
): SecretReader {
  return {
    async read(namespace, name) {
      try {
        return (await core.readNamespacedSecret({ namespace, name })).data ?? {};
      } catch (error) {
        if (apiStatusCode(error) === 404) return undefined;
        throw new AppError(
          ErrorCode.Unavailable,
          `could not read Secret ${namespace}/${name} (status ${apiStatusCode(error) ?? 'none'})`,
        );
      }
    },
  };
}

/** Wallets in per-wallet Secrets of one namespace (the control plane's own). */
export function kubernetesSecretStore(reader: SecretReader, namespace: string): SecretStore {
  return {
    async wallet(name) {
      checkName(name);
      const secret = walletSecretName(name);
      const data = await reader.read(namespace, secret);
      const encoded = data?.[WALLET_SECRET_KEY];
      if (encoded === undefined || encoded === '') {
        throw missing(
          name,
          `Secret ${namespace}/${secret} ${data === undefined ? 'does not exist' : `has no ${WALLET_SECRET_KEY} key`}`,
        );
      }
      return walletFromPrivateKey(name, Buffer.from(encoded, 'base64').toString('utf8'));
    },
  };
}

/**
 * Wallets as files in a local directory, for development: `<dir>/<name>.private-key`
 * holding the key as hex. A file that its group or others may read is refused.
 */
export function directorySecretStore(directory: string): SecretStore {
  return {
    async wallet(name) {
      checkName(name);
      const path = join(directory, `${name}.${WALLET_SECRET_KEY}`);
      let mode: number;
      try {
        mode = (await stat(path)).mode;
      } catch {
        throw missing(name, `file ${path} does not exist`);
      }
      if ((mode & 0o077) !== 0) {
        throw new AppError(
          ErrorCode.FailedPrecondition,
          `wallet ${name}: ${path} may be read by its group or others (mode ${(mode & 0o777).toString(8)}); chmod 600 it`,
          { details: { wallet: name } },
        );
      }
      return walletFromPrivateKey(name, await readFile(path, 'utf8'));
    },
  };
}

/**
 * True for a wallet name: a lower-case DNS label short enough for its Secret's name
 * (`polychrome-wallet-<name>`). The one rule: stores and the link (plan-payment-policy.ts)
 * both read it.
 */
export function isWalletName(name: string): boolean {
  return new RegExp(WALLET_NAME_PATTERN, 'u').test(name);
}

/** The pattern `isWalletName` tests (the Helm chart's values schema checks wallet names by it). */
export const WALLET_NAME_PATTERN = '^[a-z0-9]([a-z0-9-]{0,44}[a-z0-9])?$';

function checkName(name: string): void {
  if (!isWalletName(name)) {
    throw new AppError(
      ErrorCode.InvalidArgument,
      `wallet name "${name.slice(0, 60)}" is not a lower-case DNS label of at most 46 characters`,
    );
  }
}

function missing(name: string, where: string): AppError {
  return new AppError(ErrorCode.NotFound, `wallet ${name} has no key: ${where}`, {
    details: { wallet: name },
  });
}
