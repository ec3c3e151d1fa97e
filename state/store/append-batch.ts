import { encodePayload, EventKind } from '../../common/event-kinds';
import { CompactMmr } from '../journal/compact-mmr';
import type { Ed25519Signer } from '../journal/ed25519';
import type { LeafHasher } from '../journal/leaf-digest';
import type { Sha256 } from '../journal/sha256';
import {
  rotateKey,
  signedRootPayload,
  signRoot,
  type KeyRotationFields,
  type SignedRootVersion,
} from '../journal/signed-root';
import { encodeHeadRecord } from './head-record';
import type { KvOp } from './level-kv';
import { encodeEventValue, encodeFence, eventKey, fenceKey, headKey, nodeKey } from './store-keys';

/** A `signed_root` as the store wrote it, with its own position. */
export interface StoredSignedRoot {
  /** Position of the `signed_root` event (equal to `leafCount`). */
  readonly position: number;
  /** Leaves the root covers: positions [0, leafCount). */
  readonly leafCount: number;
  readonly root: Uint8Array;
  readonly keyId: string;
  readonly signature: Uint8Array;
  /** 2 for every root this store writes; 1 for roots of older journals. */
  readonly version: SignedRootVersion;
  /** The partition a version-2 root names. */
  readonly partition?: string;
}

/**
 * A decoded `SignedRoot` payload at `position` as a {@link StoredSignedRoot}: version 0
 * (unset) reads as 1.
 */
export function storedSignedRootOf(
  position: number,
  fields: {
    leafCount: number;
    root: Uint8Array;
    keyId: string;
    signature: Uint8Array;
    version: number;
    partition: string;
  },
): StoredSignedRoot {
  return {
    position,
    leafCount: fields.leafCount,
    root: new Uint8Array(fields.root),
    keyId: fields.keyId,
    signature: new Uint8Array(fields.signature),
    ...(fields.version === 2 ? { version: 2, partition: fields.partition } : { version: 1 }),
  };
}

/** Everything one append writes, computed before any I/O. */
export interface AppendBatch {
  readonly ops: KvOp[];
  /** Sum of key and value bytes, for the group-commit size cap. */
  readonly bytes: number;
  /** The frontier after the batch (a copy; the caller's frontier is untouched). */
  readonly mmr: CompactMmr;
  /** The next position after the batch. */
  readonly head: number;
  readonly signedRoot: StoredSignedRoot;
  /** Set when the batch hands the partition over to a new key. */
  readonly keyRotation?: KeyRotationFields & { readonly position: number };
}

/** Inputs of {@link buildAppendBatch}. */
export interface AppendBatchInput {
  readonly partition: string;
  readonly hash: Sha256;
  readonly leafHasher: LeafHasher;
  readonly kindBytes: (kind: string) => Uint8Array;
  /** Frontier over the `head` events already stored; `undefined` for an empty partition. */
  readonly mmr: CompactMmr | undefined;
  readonly head: number;
  readonly genesisKeyId: string;
  readonly events: readonly { readonly kind: string; readonly payload: Uint8Array }[];
  /** Signs the closing root. */
  readonly signer: Ed25519Signer;
  /**
   * The key that signed the partition until now, when it is not `signer`: a `key_rotated`
   * event signed by it goes after the caller's events (so the caller's positions are the
   * ones it expected) and before the closing root.
   */
  readonly handOverFrom?: Ed25519Signer;
  /**
   * The partition's new fencing mark, when this batch raises it: written in the same
   * atomic batch, so the mark is durable exactly when the events that carried it are.
   */
  readonly raiseFence?: number;
}

/**
 * Builds the writes of one append: each event, each MMR node the core's visitor reports,
 * an optional `key_rotated`, the closing `signed_root` over every leaf before it, a raised
 * fencing mark, and the new head record. The caller writes them in one atomic, durable batch.
 *
 * @throws AppError `invalid_argument` from the journal core (never for validated input).
 */
export function buildAppendBatch(input: AppendBatchInput): AppendBatch {
  const { partition, hash, leafHasher } = input;
  const mmr = input.mmr?.clone() ?? new CompactMmr(hash);
  const ops: KvOp[] = [];
  let bytes = 0;
  const put = (key: Uint8Array, value: Uint8Array): void => {
    ops.push({ type: 'put', key, value });
    bytes += key.length + value.length;
  };
  const visit = (position: number, digest: Uint8Array): void =>
    put(nodeKey(partition, position), digest);
  let position = input.head;
  const add = (kind: string, payload: Uint8Array): void => {
    put(eventKey(partition, position), encodeEventValue(input.kindBytes(kind), payload));
    mmr.append(leafHasher.digest(position, kind, payload), visit);
    position += 1;
  };

  for (const event of input.events) add(event.kind, event.payload);

  let keyRotation: AppendBatch['keyRotation'];
  if (input.handOverFrom !== undefined) {
    const fields = rotateKey(hash, input.handOverFrom, input.signer.publicKey);
    keyRotation = { ...fields, position };
    add(
      EventKind.KeyRotated,
      encodePayload(EventKind.KeyRotated, {
        oldKeyId: fields.oldKeyId,
        newKeyId: fields.newKeyId,
        newPublicKey: Buffer.from(fields.newPublicKey),
        signatureByOldKey: Buffer.from(fields.signatureByOldKey),
      }),
    );
  }

  const signed = signRoot(hash, input.signer, position, mmr.root(), partition);
  const signedRoot: StoredSignedRoot = { position, ...signed };
  add(EventKind.SignedRoot, encodePayload(EventKind.SignedRoot, signedRootPayload(signed)));
  if (input.raiseFence !== undefined) put(fenceKey(partition), encodeFence(input.raiseFence));
  put(
    headKey(partition),
    encodeHeadRecord({ head: position, genesisKeyId: input.genesisKeyId, peaks: mmr.peaks() }),
  );
  return { ops, bytes, mmr, head: position, signedRoot, keyRotation };
}
