import { encodePayload, EventKind } from '../../common/event-kinds';
import { CompactMmr } from './compact-mmr';
import type { Ed25519Signer } from './ed25519';
import { fromHex, toHex } from './hex';
import { LeafHasher } from './leaf-digest';
import type { Sha256 } from './sha256';
import { signedRootMessageV2, signedRootPayload, signRoot } from './signed-root';
import { fillerBytes } from './vector-bytes';
import type { JournalEvent } from './verification-types';

/**
 * A small repaired journal of partition `partition`, signed by `keys[0]` with version-2
 * roots: 0 message_received, 1 tool_result (later excised), 2 signed_root, 3 excision of
 * 1, 4 signed_root. `leaves` is the journal as stored after the repair: entry 1 is
 * `{position, excised: true, leafHex}`, everything else as in the main vectors.
 */
export interface V2Vectors {
  readonly description: string;
  readonly partition: string;
  readonly leaves: readonly (
    | {
        readonly position: number;
        readonly kind: string;
        readonly payloadHex: string;
        readonly leafHex: string;
      }
    | { readonly position: number; readonly excised: true; readonly leafHex: string }
  )[];
  readonly signedRoots: readonly {
    readonly position: number;
    readonly leafCount: number;
    readonly rootHex: string;
    readonly keyId: string;
    readonly messageHex: string;
    readonly signatureHex: string;
  }[];
  readonly excised: readonly number[];
  /** Verified as this partition instead, the journal fails `wrong_partition` at `position`. */
  readonly otherPartition: { readonly partition: string; readonly position: number };
}

const V2_PARTITION = 'conv-00000000-0000-4000-8000-000000000001';

/** A stored entry of a small vectors journal. */
interface StoredVectorEntry {
  readonly position: number;
  readonly kind: string;
  readonly payload: Uint8Array;
  readonly leaf: Uint8Array;
}

/**
 * Builds a small journal of `partition` with version-2 roots by `signer`: `push` appends an
 * event and returns its leaf, `seal` appends the `signed_root` over everything before it.
 */
export function smallV2Journal(hash: Sha256, signer: Ed25519Signer, partition: string) {
  const leafHasher = new LeafHasher(hash);
  const mmr = new CompactMmr(hash);
  const stored: StoredVectorEntry[] = [];
  const signedRoots: V2Vectors['signedRoots'][number][] = [];
  const push = (kind: string, payload: Uint8Array): Uint8Array => {
    const position = stored.length;
    const leaf = leafHasher.digest(position, kind, payload);
    stored.push({ position, kind, payload, leaf });
    mmr.append(leaf);
    return leaf;
  };
  const seal = (): void => {
    const position = stored.length;
    const fields = signRoot(hash, signer, position, mmr.root(), partition);
    push(EventKind.SignedRoot, encodePayload(EventKind.SignedRoot, signedRootPayload(fields)));
    signedRoots.push({
      position,
      leafCount: position,
      rootHex: toHex(fields.root),
      keyId: fields.keyId,
      messageHex: toHex(signedRootMessageV2(partition, fields.leafCount, fields.root)),
      signatureHex: toHex(fields.signature),
    });
  };
  /** The journal as stored, the entries at `excised` kept as their leaf digests only. */
  const leaves = (excised: readonly number[]): V2Vectors['leaves'] =>
    stored.map((e) =>
      excised.includes(e.position)
        ? { position: e.position, excised: true, leafHex: toHex(e.leaf) }
        : {
            position: e.position,
            kind: e.kind,
            payloadHex: toHex(e.payload),
            leafHex: toHex(e.leaf),
          },
    );
  return { push, seal, signedRoots, leaves };
}

/** Builds the version-2 vectors, signed by `signer`. */
export function buildV2Vectors(hash: Sha256, signer: Ed25519Signer): V2Vectors {
  const { push, seal, signedRoots, leaves } = smallV2Journal(hash, signer, V2_PARTITION);
  push(EventKind.MessageReceived, fillerBytes(hash, 'v2/payload/0', 40));
  // Not a valid ToolResult: the entry repair finds unreadable.
  const damagedLeaf = push(EventKind.ToolResult, Uint8Array.of(0xff, 0xff));
  seal();
  push(
    EventKind.Excision,
    encodePayload(EventKind.Excision, {
      position: 1,
      leafDigest: Buffer.from(damagedLeaf),
      actor: 'admin@example.com',
      reason: 'test vector',
      excisedAtMs: 1_700_000_000_000,
      problem: 'its payload does not decode as tool_result',
      erased: false,
      erasedKind: '',
      turnId: '',
    }),
  );
  seal();
  return {
    description:
      'Version-2 signed roots (the message binds the partition) and an excision: entry 1 is ' +
      'excised and keeps its leaf digest, recorded by the excision event at 3.',
    partition: V2_PARTITION,
    leaves: leaves([1]),
    signedRoots,
    excised: [1],
    otherPartition: { partition: 'conv-00000000-0000-4000-8000-000000000002', position: 2 },
  };
}

/** The version-2 journal of the vectors, as a verifier reads it (excised entries included). */
export function v2JournalEvents(vectors: Pick<V2Vectors, 'leaves'>): JournalEvent[] {
  return vectors.leaves.map((leaf) =>
    'excised' in leaf
      ? {
          position: leaf.position,
          kind: '',
          payload: new Uint8Array(0),
          excisedLeaf: fromHex(leaf.leafHex, `leafHex of leaf ${String(leaf.position)}`),
        }
      : {
          position: leaf.position,
          kind: leaf.kind,
          payload: fromHex(leaf.payloadHex, `payloadHex of leaf ${String(leaf.position)}`),
        },
  );
}
