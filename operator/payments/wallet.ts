import { privateKeyToAccount } from 'viem/accounts';
import { AppError, ErrorCode } from '../../common/errors';

/**
 * A wallet as the settlement code sees it: an address and a way to sign EIP-712 typed
 * data. The private key stays inside the closure `walletFromPrivateKey` builds; no
 * property, `toJSON`, `inspect` or error message of a wallet carries it.
 */
export interface Wallet {
  /** The wallet's name in the SecretStore. */
  readonly name: string;
  /** Its EVM address (checksummed). */
  readonly address: `0x${string}`;
  /** Signs EIP-712 typed data (an EIP-3009 authorization) with the wallet's key. */
  signTypedData(message: {
    domain: Record<string, unknown>;
    types: Record<string, unknown>;
    primaryType: string;
    message: Record<string, unknown>;
  }): Promise<`0x${string}`>;
}

/**
 * Builds a wallet from a secp256k1 private key (32 bytes as hex, with or without `0x`).
 * A malformed key is refused with a message that names the wallet, never the key.
 */
export function walletFromPrivateKey(name: string, key: string): Wallet {
  const hex = key.trim().replace(/^0x/i, '');
  if (!/^[0-9a-fA-F]{64}$/.test(hex)) {
    throw new AppError(
      ErrorCode.FailedPrecondition,
      `wallet ${name}: the stored key is not 32 bytes of hex; store the private key as 64 hex digits`,
      { details: { wallet: name } },
    );
  }
  let account: ReturnType<typeof privateKeyToAccount>;
  try {
    account = privateKeyToAccount(`0x${hex}`);
  } catch {
    throw new AppError(
      ErrorCode.FailedPrecondition,
      `wallet ${name}: the stored key is not a valid secp256k1 private key`,
      { details: { wallet: name } },
    );
  }
  const wallet: Wallet = {
    name,
    address: account.address,
    signTypedData: (message) => account.signTypedData(message),
  };
  return Object.freeze(wallet);
}
