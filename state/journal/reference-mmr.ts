import type { Sha256 } from './sha256';

/*
 * A slow, obviously-correct MMR, used only by tests to cross-check the fast code. It
 * follows docs/journal-format.md literally and shares no code with it: bigint u64
 * encoding, plain concatenation, recursion over perfect subtrees, everything recomputed
 * from scratch on each call.
 */

function u64(value: number): Uint8Array {
  const out = new Uint8Array(8);
  new DataView(out.buffer).setBigUint64(0, BigInt(value), false);
  return out;
}

function concat(...parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let offset = 0;
  for (const part of parts) {
    out.set(part, offset);
    offset += part.length;
  }
  return out;
}

/** Leaf digest by the spec's formula. */
export function referenceLeafDigest(
  hash: Sha256,
  position: number,
  kind: string,
  payload: Uint8Array,
): Uint8Array {
  const kindBytes = new TextEncoder().encode(kind);
  return hash(
    concat(u64(position), u64(kindBytes.length), kindBytes, u64(payload.length), payload),
  );
}

/** Every node of the MMR and its root, computed from the leaf digests alone. */
export interface ReferenceMmr {
  /** `nodes[position]` is the node's digest. */
  readonly nodes: Uint8Array[];
  /** Peak positions, leftmost first. */
  readonly peaks: number[];
  readonly size: number;
  readonly root: Uint8Array;
}

/**
 * Builds the MMR over `leaves`: split the leaves into perfect trees of decreasing powers of
 * two (the binary digits of the count), number each tree's nodes in post-order after the
 * trees to its left, and bag the peaks.
 */
export function buildReferenceMmr(hash: Sha256, leaves: readonly Uint8Array[]): ReferenceMmr {
  const nodes: Uint8Array[] = [];
  const peaks: number[] = [];
  let start = 0;
  let remaining = leaves.length;
  while (remaining > 0) {
    let width = 1;
    while (width * 2 <= remaining) width *= 2;
    peaks.push(buildTree(hash, leaves.slice(start, start + width), nodes));
    start += width;
    remaining -= width;
  }
  const peakDigests = peaks.map((p) => nodes[p] ?? new Uint8Array());
  const root = hash(concat(u64(nodes.length), ...peakDigests));
  return { nodes, peaks, size: nodes.length, root };
}

/** Appends the post-order nodes of a perfect tree over `leaves` and returns its root position. */
function buildTree(hash: Sha256, leaves: readonly Uint8Array[], nodes: Uint8Array[]): number {
  if (leaves.length === 1) {
    nodes.push(leaves[0] ?? new Uint8Array());
    return nodes.length - 1;
  }
  const half = leaves.length / 2;
  const left = buildTree(hash, leaves.slice(0, half), nodes);
  const right = buildTree(hash, leaves.slice(half), nodes);
  const position = nodes.length;
  nodes.push(
    hash(concat(u64(position), nodes[left] ?? new Uint8Array(), nodes[right] ?? new Uint8Array())),
  );
  return position;
}
