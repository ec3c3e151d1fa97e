import { encodePayload, EventKind } from '../../common/event-kinds';
import { CompactMmr } from './compact-mmr';
import type { Ed25519Signer } from './ed25519';
import { fromHex, toHex } from './hex';
import { buildInclusionProof } from './inclusion-proof';
import { LeafHasher } from './leaf-digest';
import type { Sha256 } from './sha256';
import {
  keyIdOf,
  keyRotationMessage,
  rotateKey,
  signedRootMessage,
  signedRootMessageV2,
  signedRootPayload,
  signRoot,
} from './signed-root';
import { encodeU64 } from './u64';
import type { JournalEvent } from './verification-types';

/**
 * The pinned test vectors of docs/journal-vectors.json (docs/journal-format.md, "Test
 * vectors"). Built here, not in hack/, so a unit test can rebuild them in memory and
 * compare with the committed file byte for byte.
 */
export interface JournalVectors {
  readonly description: string;
  readonly keys: readonly {
    readonly note: string;
    readonly seedHex: string;
    readonly publicKeyHex: string;
    readonly keyId: string;
  }[];
  readonly leaves: readonly {
    readonly position: number;
    readonly kind: string;
    readonly payloadHex: string;
    readonly leafHex: string;
  }[];
  readonly roots: readonly {
    readonly leafCount: number;
    readonly sizeNodes: number;
    readonly rootHex: string;
  }[];
  readonly nodesHex: readonly string[];
  readonly signedRoots: readonly {
    readonly position: number;
    readonly leafCount: number;
    readonly rootHex: string;
    readonly publicKeyHex: string;
    readonly keyId: string;
    readonly messageHex: string;
    readonly signatureHex: string;
  }[];
  readonly keyRotations: readonly {
    readonly position: number;
    readonly oldKeyId: string;
    readonly oldPublicKeyHex: string;
    readonly newKeyId: string;
    readonly newPublicKeyHex: string;
    readonly messageHex: string;
    readonly signatureHex: string;
  }[];
  readonly inclusionProofs: readonly {
    readonly leafIndex: number;
    readonly leafCount: number;
    readonly leafHex: string;
    readonly proofHex: readonly string[];
    readonly rootHex: string;
  }[];
  /** Version-2 roots and an excision (docs/journal-format.md, sections 6 and 10). */
  readonly version2: V2Vectors;
}

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

/** Crypto the vectors are built with; node:crypto and @noble must give the same bytes. */
export interface VectorCrypto {
  readonly hash: Sha256;
  readonly createSigner: (seed: Uint8Array) => Ed25519Signer;
}

/** Number of events in the vector journal. */
export const VECTOR_EVENT_COUNT = 200;

const utf8 = new TextEncoder();

/**
 * Seeds of the two vector keys: SHA-256 of a fixed label. TEST ONLY: anyone can derive
 * them, so nothing signed with them proves anything.
 */
export function vectorKeySeed(hash: Sha256, index: 1 | 2): Uint8Array {
  return hash(utf8.encode(`polychrome/test-only/journal-key/${String(index)}`));
}

/** Deterministic filler: SHA-256( label ‖ u64 block ) blocks, cut to `length` bytes. */
function fillerBytes(hash: Sha256, label: string, length: number): Uint8Array {
  const out = new Uint8Array(length);
  const labelBytes = utf8.encode(label);
  for (let block = 0; block * 32 < length; block++) {
    const input = new Uint8Array(labelBytes.length + 8);
    input.set(labelBytes, 0);
    input.set(encodeU64(block), labelBytes.length);
    out.set(hash(input).subarray(0, Math.min(32, length - block * 32)), block * 32);
  }
  return out;
}

// Batches of a plausible conversation; each is followed by a signed_root. Payload sizes
// hit SHA-256 padding edges (55/56/64 bytes of preimage and payload) and the empty and
// multi-KB cases.
const K = EventKind;
const BATCHES: readonly (readonly (readonly [EventKind, number])[])[] = [
  [
    [K.MessageReceived, 0],
    [K.TurnDispatched, 31],
  ],
  [
    [K.ModelCall, 55],
    [K.ToolCall, 56],
    [K.ToolResult, 4096],
    [K.ModelCall, 64],
    [K.TurnComplete, 120],
  ],
  [
    [K.MessageReceived, 1],
    [K.IngressDirective, 17],
    [K.TurnDispatched, 90],
  ],
  [
    [K.ModelCall, 300],
    [K.ToolCall, 63],
    [K.ApprovalRequest, 200],
  ],
  [[K.ApprovalResponse, 150]],
  [
    [K.ToolCall, 80],
    [K.ToolResult, 9000],
    [K.PaymentCharge, 44],
    [K.OutboundPaymentReceipt, 33],
  ],
  [
    [K.ModelCall, 1024],
    [K.QuestionRequest, 70],
  ],
  [
    [K.QuestionResponse, 32],
    [K.MemorySet, 48],
    [K.MemoryCleared, 0],
    [K.TurnComplete, 513],
  ],
  [
    [K.MessageReceived, 65],
    [K.TurnDispatched, 88],
    [K.ModelCall, 2048],
    [K.Handoff, 40],
  ],
  [
    [K.TurnAmbiguous, 27],
    [K.ConversationClosed, 0],
  ],
  [
    [K.ConversationReopened, 12],
    [K.MessageReceived, 5000],
    [K.TurnDispatched, 91],
  ],
];

/**
 * Builds the vectors: a 200-event journal of batches each closed by a `signed_root`, with
 * one key rotation in the middle, plus every root, node, signed root and a few inclusion
 * proofs. Pure and deterministic: ed25519 signatures are deterministic (RFC 8032).
 */
export function buildJournalVectors(crypto: VectorCrypto): JournalVectors {
  const { hash } = crypto;
  const signers = [
    crypto.createSigner(vectorKeySeed(hash, 1)),
    crypto.createSigner(vectorKeySeed(hash, 2)),
  ];
  const [first, second] = signers;
  if (first === undefined || second === undefined) throw new Error('unreachable: two signers');
  const events = vectorEvents(crypto, first, second);

  const leafHasher = new LeafHasher(hash);
  const mmr = new CompactMmr(hash);
  const nodes: Uint8Array[] = [];
  const leaves: JournalVectors['leaves'][number][] = [];
  const roots: JournalVectors['roots'][number][] = [];
  for (const event of events) {
    roots.push({ leafCount: mmr.leafCount, sizeNodes: mmr.size, rootHex: toHex(mmr.root()) });
    const leaf = leafHasher.digest(event.position, event.kind, event.payload);
    mmr.append(leaf, (position, digest) => {
      nodes[position] = digest;
    });
    leaves.push({
      position: event.position,
      kind: event.kind,
      payloadHex: toHex(event.payload),
      leafHex: toHex(leaf),
    });
  }
  roots.push({ leafCount: mmr.leafCount, sizeNodes: mmr.size, rootHex: toHex(mmr.root()) });

  const signedRoots = events.flatMap((event) => event.signedRoot ?? []);
  const keyRotations = events.flatMap((event) => event.rotation ?? []);
  const proofCases: readonly (readonly [number, number])[] = [
    [0, 1],
    [2, 3],
    [5, 11],
    [100, 200],
    [199, 200],
  ];
  const inclusionProofs = proofCases.map(([leafIndex, leafCount]) => {
    const proof = buildInclusionProof(leafIndex, leafCount, (p) => nodes[p]);
    const root = roots[leafCount]?.rootHex ?? '';
    return {
      leafIndex,
      leafCount,
      leafHex: leaves[leafIndex]?.leafHex ?? '',
      proofHex: proof.digests.map(toHex),
      rootHex: root,
    };
  });

  return {
    description:
      'Polychrome journal integrity vectors; see docs/journal-format.md. Regenerate with ' +
      '`npx tsx hack/gen-journal-vectors.ts`. The keys are TEST ONLY (their seeds are published here).',
    keys: signers.map((signer, i) => ({
      note: `test-only seed: SHA-256 of UTF-8 "polychrome/test-only/journal-key/${String(i + 1)}"`,
      seedHex: toHex(vectorKeySeed(hash, i === 0 ? 1 : 2)),
      publicKeyHex: toHex(signer.publicKey),
      keyId: keyIdOf(hash, signer.publicKey),
    })),
    leaves,
    roots,
    nodesHex: nodes.map(toHex),
    signedRoots,
    keyRotations,
    inclusionProofs,
    version2: buildV2Vectors(hash, first),
  };
}

const V2_PARTITION = 'conv-00000000-0000-4000-8000-000000000001';

function buildV2Vectors(hash: Sha256, signer: Ed25519Signer): V2Vectors {
  const leafHasher = new LeafHasher(hash);
  const mmr = new CompactMmr(hash);
  const stored: { position: number; kind: string; payload: Uint8Array; leaf: Uint8Array }[] = [];
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
    const fields = signRoot(hash, signer, position, mmr.root(), V2_PARTITION);
    push(EventKind.SignedRoot, encodePayload(EventKind.SignedRoot, signedRootPayload(fields)));
    signedRoots.push({
      position,
      leafCount: position,
      rootHex: toHex(fields.root),
      keyId: fields.keyId,
      messageHex: toHex(signedRootMessageV2(V2_PARTITION, fields.leafCount, fields.root)),
      signatureHex: toHex(fields.signature),
    });
  };
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
    }),
  );
  seal();
  return {
    description:
      'Version-2 signed roots (the message binds the partition) and an excision: entry 1 is ' +
      'excised and keeps its leaf digest, recorded by the excision event at 3.',
    partition: V2_PARTITION,
    leaves: stored.map((e) =>
      e.position === 1
        ? { position: 1, excised: true, leafHex: toHex(e.leaf) }
        : {
            position: e.position,
            kind: e.kind,
            payloadHex: toHex(e.payload),
            leafHex: toHex(e.leaf),
          },
    ),
    signedRoots,
    excised: [1],
    otherPartition: { partition: 'conv-00000000-0000-4000-8000-000000000002', position: 2 },
  };
}

/** The version-2 journal of the vectors, as a verifier reads it (excised entries included). */
export function v2JournalEvents(vectors: V2Vectors): JournalEvent[] {
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

interface VectorEvent extends JournalEvent {
  readonly signedRoot?: JournalVectors['signedRoots'][number];
  readonly rotation?: JournalVectors['keyRotations'][number];
}

/** The vector journal's events, signed_root and key_rotated payloads computed as a writer would. */
function vectorEvents(
  crypto: VectorCrypto,
  first: Ed25519Signer,
  second: Ed25519Signer,
): VectorEvent[] {
  const { hash } = crypto;
  const events: VectorEvent[] = [];
  const leafHasher = new LeafHasher(hash);
  const mmr = new CompactMmr(hash);
  const push = (event: VectorEvent): void => {
    events.push(event);
    mmr.append(leafHasher.digest(event.position, event.kind, event.payload));
  };
  let signer = first;
  let rotated = false;
  for (let b = 0; events.length < VECTOR_EVENT_COUNT; b++) {
    const room = VECTOR_EVENT_COUNT - events.length - 1;
    if (!rotated && events.length >= 100 && room >= 1) {
      // Rotation is a batch of its own; the root closing it is the first by the new key.
      const rotation = rotateKey(hash, signer, second.publicKey);
      push({
        position: events.length,
        kind: EventKind.KeyRotated,
        payload: encodePayload(EventKind.KeyRotated, {
          oldKeyId: rotation.oldKeyId,
          newKeyId: rotation.newKeyId,
          newPublicKey: Buffer.from(rotation.newPublicKey),
          signatureByOldKey: Buffer.from(rotation.signatureByOldKey),
        }),
        rotation: {
          position: events.length,
          oldKeyId: rotation.oldKeyId,
          oldPublicKeyHex: toHex(signer.publicKey),
          newKeyId: rotation.newKeyId,
          newPublicKeyHex: toHex(rotation.newPublicKey),
          messageHex: toHex(keyRotationMessage(rotation.newPublicKey)),
          signatureHex: toHex(rotation.signatureByOldKey),
        },
      });
      signer = second;
      rotated = true;
    } else {
      const batch = BATCHES[b % BATCHES.length] ?? [];
      for (const [kind, size] of batch.slice(0, room)) {
        const position = events.length;
        push({
          position,
          kind,
          payload: fillerBytes(hash, `payload/${String(position)}/${kind}`, size),
        });
      }
    }
    const position = events.length;
    const fields = signRoot(hash, signer, position, mmr.root());
    push({
      position,
      kind: EventKind.SignedRoot,
      payload: encodePayload(EventKind.SignedRoot, signedRootPayload(fields)),
      signedRoot: {
        position,
        leafCount: fields.leafCount,
        rootHex: toHex(fields.root),
        publicKeyHex: toHex(signer.publicKey),
        keyId: fields.keyId,
        messageHex: toHex(signedRootMessage(fields.leafCount, fields.root)),
        signatureHex: toHex(fields.signature),
      },
    });
  }
  return events;
}

/** The events of a vectors file, as a verifier reads them. */
export function vectorJournalEvents(vectors: JournalVectors): JournalEvent[] {
  return vectors.leaves.map((leaf) => ({
    position: leaf.position,
    kind: leaf.kind,
    payload: fromHex(leaf.payloadHex, `payloadHex of leaf ${String(leaf.position)}`),
  }));
}

/** The exact text of docs/journal-vectors.json: two-space JSON and a final newline. */
export function serializeJournalVectors(vectors: JournalVectors): string {
  return `${JSON.stringify(vectors, null, 2)}\n`;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function hasFields(value: unknown, fields: Record<string, 'string' | 'number'>): boolean {
  return isRecord(value) && Object.entries(fields).every(([k, t]) => typeof value[k] === t);
}

function isListOf(value: unknown, check: (item: unknown) => boolean): boolean {
  return Array.isArray(value) && value.every(check);
}

/**
 * True when `value` has the shape of a vectors file (field names and types; the values
 * themselves are what the tests check).
 */
export function isJournalVectors(value: unknown): value is JournalVectors {
  const s = 'string';
  const n = 'number';
  return (
    isRecord(value) &&
    typeof value.description === 'string' &&
    isListOf(value.keys, (k) => hasFields(k, { note: s, seedHex: s, publicKeyHex: s, keyId: s })) &&
    isListOf(value.leaves, (l) =>
      hasFields(l, { position: n, kind: s, payloadHex: s, leafHex: s }),
    ) &&
    isListOf(value.roots, (r) => hasFields(r, { leafCount: n, sizeNodes: n, rootHex: s })) &&
    isListOf(value.nodesHex, (h) => typeof h === 'string') &&
    isListOf(value.signedRoots, (r) =>
      hasFields(r, {
        position: n,
        leafCount: n,
        rootHex: s,
        publicKeyHex: s,
        keyId: s,
        messageHex: s,
        signatureHex: s,
      }),
    ) &&
    isListOf(value.keyRotations, (r) =>
      hasFields(r, {
        position: n,
        oldKeyId: s,
        oldPublicKeyHex: s,
        newKeyId: s,
        newPublicKeyHex: s,
        messageHex: s,
        signatureHex: s,
      }),
    ) &&
    isListOf(
      value.inclusionProofs,
      (p) =>
        hasFields(p, { leafIndex: n, leafCount: n, leafHex: s, rootHex: s }) &&
        isRecord(p) &&
        isListOf(p.proofHex, (h) => typeof h === 'string'),
    ) &&
    isRecord(value.version2) &&
    hasFields(value.version2, { description: s, partition: s }) &&
    isListOf(
      value.version2.leaves,
      (l) =>
        hasFields(l, { position: n, kind: s, payloadHex: s, leafHex: s }) ||
        (hasFields(l, { position: n, leafHex: s }) && isRecord(l) && l.excised === true),
    ) &&
    isListOf(value.version2.signedRoots, (r) =>
      hasFields(r, {
        position: n,
        leafCount: n,
        rootHex: s,
        keyId: s,
        messageHex: s,
        signatureHex: s,
      }),
    ) &&
    isListOf(value.version2.excised, (p) => typeof p === 'number') &&
    hasFields(value.version2.otherPartition, { partition: s, position: n })
  );
}
