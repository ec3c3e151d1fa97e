/**
 * Inclusion proofs of stored events (docs/journal-format.md): an event, its leaf digest,
 * the proof's nodes read from the store, and the signed root the proof leads to, checked
 * before they are returned.
 */
import { AppError } from '../../common/errors';
import { decodePayload, EventKind } from '../../common/event-kinds';
import {
  buildInclusionProof,
  inclusionProofPositions,
  verifyInclusion,
} from '../journal/inclusion-proof';
import { LeafHasher } from '../journal/leaf-digest';
import type { Sha256 } from '../journal/sha256';
import { storedSignedRootOf, type StoredSignedRoot } from './append-batch';
import { assertPosition } from './journal-checks';
import type { EventProof } from './journal-store-types';
import type { KvStore } from './level-kv';
import type { PartitionState } from './recover-partition';
import { decodeEventValue, eventKey, nodeKey } from './store-keys';

/**
 * The leaf count to prove `position` against: `atLeafCount`, or the latest root's.
 *
 * @throws AppError `invalid_argument` for a bad count or a position it does not cover;
 *   `failed_precondition` for a count beyond the latest root.
 */
function leafCountFor(
  partition: string,
  latest: StoredSignedRoot,
  position: number,
  atLeafCount: number | undefined,
): number {
  const leafCount = atLeafCount ?? latest.leafCount;
  assertPosition(leafCount, 'leaf count', partition);
  if (leafCount > latest.leafCount) {
    throw new AppError(
      'failed_precondition',
      `${partition}: no signed root over ${String(leafCount)} leaves yet; the latest covers ${String(latest.leafCount)}`,
      { details: { partition, leafCount, latest: latest.leafCount } },
    );
  }
  if (position >= leafCount) {
    throw new AppError(
      'invalid_argument',
      `${partition}: event ${String(position)} is not covered by the root over ${String(leafCount)} leaves; ` +
        'prove it against a later signed root',
      { details: { partition, position, leafCount } },
    );
  }
  return leafCount;
}

/**
 * The `signed_root` stored at `leafCount`.
 *
 * @throws AppError `invalid_argument` when no `signed_root` is there; `data_loss` when it
 *   does not parse.
 */
async function signedRootAt(
  kv: KvStore,
  partition: string,
  leafCount: number,
): Promise<StoredSignedRoot> {
  const value = await kv.get(eventKey(partition, leafCount));
  const notRoot = (): AppError =>
    new AppError(
      'invalid_argument',
      `${partition}: event ${String(leafCount)} is not a signed_root, so no root over ${String(leafCount)} ` +
        'leaves was signed; pass the position of a signed_root (the head after a batch)',
      { details: { partition, leafCount } },
    );
  if (value === undefined) throw notRoot();
  const { kind, payload } = decodeEventValue(value, partition, leafCount);
  if (kind !== EventKind.SignedRoot) throw notRoot();
  let fields;
  try {
    fields = decodePayload(EventKind.SignedRoot, payload);
  } catch (cause) {
    throw new AppError(
      'data_loss',
      `${partition}: the signed_root at ${String(leafCount)} does not parse`,
      { details: { partition, position: leafCount }, cause },
    );
  }
  return storedSignedRootOf(leafCount, fields);
}

/**
 * An inclusion proof of the event at `position` of `partition` (which has events, as
 * `state` says) against the signed root over `atLeafCount` leaves (default: the latest),
 * checked before it is returned.
 *
 * @throws AppError as {@link leafCountFor} and {@link signedRootAt}; `data_loss` when a
 *   needed node or the event is missing or the proof does not lead to the signed root.
 */
export async function proveEvent(
  kv: KvStore,
  hash: Sha256,
  partition: string,
  state: PartitionState,
  position: number,
  atLeafCount: number | undefined,
): Promise<EventProof> {
  const latest = state.lastRoot;
  const leafCount = leafCountFor(partition, latest, position, atLeafCount);
  const signedRoot =
    leafCount === latest.leafCount ? latest : await signedRootAt(kv, partition, leafCount);
  const nodePositions = inclusionProofPositions(position, leafCount);
  const [eventValue, ...nodeValues] = await kv.getMany([
    eventKey(partition, position),
    ...nodePositions.map((p) => nodeKey(partition, p)),
  ]);
  if (eventValue === undefined) {
    throw new AppError(
      'data_loss',
      `${partition}: acknowledged event ${String(position)} is missing`,
      {
        details: { partition, position },
      },
    );
  }
  const nodes = new Map<number, Uint8Array>();
  nodePositions.forEach((p, i) => {
    const value = nodeValues[i];
    if (value !== undefined) nodes.set(p, value);
  });
  const event = { position, ...decodeEventValue(eventValue, partition, position) };
  const leaf =
    event.excisedLeaf ?? new LeafHasher(hash).digest(position, event.kind, event.payload);
  const proof = buildInclusionProof(position, leafCount, (p) => nodes.get(p));
  verifyInclusion(hash, proof, leaf, signedRoot.root);
  return { event, leaf, proof, signedRoot };
}
