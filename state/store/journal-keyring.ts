/**
 * The journal store's signing keys (state/store/README.md, "Keys"): the active key, which
 * signs every root from now on, and the earlier keys still held, which hand their
 * partitions over to it. Rotation is lazy: a partition last signed by an earlier key gets
 * a `key_rotated` event (signed by that key) in its next batch, built by append-batch.ts
 * with the signer {@link SigningKeyring.handOverFrom} names.
 */
import { AppError } from '../../common/errors';
import type { Ed25519Signer } from '../journal/ed25519';
import type { Sha256 } from '../journal/sha256';
import { keyIdOf } from '../journal/signed-root';

/** The `not_found` error of rotating the key of a partition with no events. */
export function noKeyToRotate(partition: string): AppError {
  return new AppError(
    'not_found',
    `${partition} has no events, so there is no key to rotate; its first batch is signed by the active key`,
    { details: { partition } },
  );
}

export class SigningKeyring {
  private readonly keys = new Map<string, Ed25519Signer>();
  private activeId: string;

  /** `active` signs from now on; `previous` are earlier keys still held. */
  constructor(
    private readonly hash: Sha256,
    active: Ed25519Signer,
    previous: readonly Ed25519Signer[] = [],
  ) {
    for (const signer of previous) this.keys.set(keyIdOf(hash, signer.publicKey), signer);
    this.activeId = keyIdOf(hash, active.publicKey);
    this.keys.set(this.activeId, active);
  }

  /** Key id of the active key. */
  get activeKeyId(): string {
    return this.activeId;
  }

  /** The active key. */
  get active(): Ed25519Signer {
    const signer = this.keys.get(this.activeId);
    if (signer === undefined) throw new Error('unreachable: the active key is in the keyring');
    return signer;
  }

  /** Makes `signer` the active key; the previous active key stays held. */
  use(signer: Ed25519Signer): void {
    const keyId = keyIdOf(this.hash, signer.publicKey);
    this.keys.set(keyId, signer);
    this.activeId = keyId;
  }

  /** The held key with id `keyId`, if any. */
  get(keyId: string): Ed25519Signer | undefined {
    return this.keys.get(keyId);
  }

  /** The public keys of every key held. */
  publicKeys(): Uint8Array[] {
    return [...this.keys.values()].map((signer) => signer.publicKey);
  }

  /**
   * The key that hands `partition` over to the active key in its next batch: the key of
   * its last root (`lastKeyId`), or `undefined` when that is the active key or the
   * partition has no root yet.
   *
   * @throws AppError `failed_precondition` when that key is not held.
   */
  handOverFrom(partition: string, lastKeyId: string | undefined): Ed25519Signer | undefined {
    if (lastKeyId === undefined || lastKeyId === this.activeId) return undefined;
    const signer = this.keys.get(lastKeyId);
    if (signer === undefined) {
      throw new AppError(
        'failed_precondition',
        `${partition} was last signed by key ${lastKeyId}, which this store does not hold, ` +
          `so it cannot be handed over to the active key ${this.activeId}; load the old key as a ` +
          'previous signing key',
        { details: { partition, keyId: lastKeyId, activeKeyId: this.activeId } },
      );
    }
    return signer;
  }
}
