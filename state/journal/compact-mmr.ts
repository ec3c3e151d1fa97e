import { AppError } from '../../common/errors';
import { mmrSize, peaksForLeafCount, popcount } from './mmr-layout';
import { type NodeFetcher, fetchNode } from './mmr-root';
import { DIGEST_BYTES, type Sha256 } from './sha256';
import { assertU64, writeU64 } from './u64';

/**
 * Receives each node an append creates, in increasing position order with no gaps: the
 * leaf first, then each parent it completes. A store persists them here; verification
 * passes no visitor and keeps only the peaks.
 */
export type NodeVisitor = (position: number, digest: Uint8Array) => void;

/**
 * The frontier of an MMR: its leaf count and peak digests, nothing else. O(log n) memory,
 * like transparency-dev/merkle's compact.Range. Appending reports every new node to a
 * visitor so the caller decides what to persist; the root is available at every step.
 *
 * @example
 * import { nodeSha256 } from './node-sha256';
 * const nodes: Uint8Array[] = [];
 * const mmr = new CompactMmr(nodeSha256);
 * mmr.append(new Uint8Array(32), (position, digest) => { nodes[position] = digest; });
 * const root: Uint8Array = mmr.root();
 */
export class CompactMmr {
  private readonly peakDigests: Uint8Array[];
  private leaves: number;
  private nodes: number;
  private readonly pair = new Uint8Array(8 + 2 * DIGEST_BYTES);
  /** Scratch for the root preimage, grown with the number of peaks. */
  private rootPreimage = new Uint8Array(8 + 8 * DIGEST_BYTES);

  constructor(private readonly hash: Sha256) {
    this.peakDigests = [];
    this.leaves = 0;
    this.nodes = 0;
  }

  /**
   * Resumes from persisted state: the leaf count and the peak digests leftmost first, as
   * {@link CompactMmr.peaks} returned them or as read at the positions
   * `peaksForLeafCount(leafCount)` names.
   *
   * @throws AppError `invalid_argument` when the number of peaks is not popcount(leafCount)
   *   or a peak is not 32 bytes.
   */
  static fromPeaks(hash: Sha256, leafCount: number, peaks: readonly Uint8Array[]): CompactMmr {
    assertU64(leafCount, 'leaf count');
    const want = popcount(leafCount);
    if (peaks.length !== want || peaks.some((p) => p.length !== DIGEST_BYTES)) {
      throw new AppError(
        'invalid_argument',
        `an MMR of ${String(leafCount)} leaves has ${String(want)} peaks of 32 bytes; got ` +
          `${String(peaks.length)} (lengths ${peaks.map((p) => p.length).join(',')}); pass the digests at peaksForLeafCount(leafCount)`,
        { details: { leafCount, peaks: peaks.length } },
      );
    }
    const mmr = new CompactMmr(hash);
    mmr.peakDigests.push(...peaks.map((p) => p.slice()));
    mmr.leaves = leafCount;
    mmr.nodes = mmrSize(leafCount);
    return mmr;
  }

  /**
   * Resumes from a node store: reads the peaks of `leafCount` leaves through `getNode`.
   *
   * @throws AppError `data_loss` when a peak is missing from the store.
   */
  static fromNodes(hash: Sha256, leafCount: number, getNode: NodeFetcher): CompactMmr {
    const peaks = peaksForLeafCount(leafCount).map((p) => fetchNode(getNode, p.position));
    return CompactMmr.fromPeaks(hash, leafCount, peaks);
  }

  /** Number of leaves appended. */
  get leafCount(): number {
    return this.leaves;
  }

  /** Number of nodes (the MMR size); also the node position the next leaf takes. */
  get size(): number {
    return this.nodes;
  }

  /** Copies of the peak digests, leftmost (tallest) first. */
  peaks(): Uint8Array[] {
    return this.peakDigests.map((p) => p.slice());
  }

  /**
   * Appends one leaf digest and returns the leaf's node position. `visit` sees the leaf,
   * then each parent the append completes (one per trailing 1-bit of the old leaf count).
   * The MMR keeps `leaf` by reference: do not change it afterwards. If `visit` throws, this
   * instance is in an unspecified state: drop it and resume with {@link CompactMmr.fromNodes}.
   *
   * @throws AppError `invalid_argument` when `leaf` is not 32 bytes.
   */
  append(leaf: Uint8Array, visit?: NodeVisitor): number {
    if (leaf.length !== DIGEST_BYTES) {
      throw new AppError(
        'invalid_argument',
        `a leaf digest is 32 bytes, got ${String(leaf.length)}; hash the event with LeafHasher first`,
        { details: { length: leaf.length } },
      );
    }
    const leafPosition = this.nodes;
    visit?.(leafPosition, leaf);
    let right = leaf;
    let position = leafPosition;
    // Each trailing 1-bit of the old leaf count is a peak of equal height to merge with.
    for (let n = this.leaves; n % 2 === 1; n = (n - 1) / 2) {
      const left = this.peakDigests.pop();
      if (left === undefined) break; // unreachable: popcount(leaves) peaks are held
      position += 1;
      writeU64(this.pair, 0, position);
      this.pair.set(left, 8);
      this.pair.set(right, 8 + DIGEST_BYTES);
      right = this.hash(this.pair);
      visit?.(position, right);
    }
    this.peakDigests.push(right);
    this.leaves += 1;
    this.nodes = position + 1;
    return leafPosition;
  }

  /**
   * The current root: SHA-256( u64 size ‖ peaks leftmost first ), the bytes of
   * `mmrRoot`, built in a reused buffer because replay takes a root at every
   * `signed_root`.
   */
  root(): Uint8Array {
    const length = 8 + DIGEST_BYTES * this.peakDigests.length;
    if (this.rootPreimage.length < length) this.rootPreimage = new Uint8Array(2 * length);
    const preimage = this.rootPreimage;
    writeU64(preimage, 0, this.nodes);
    this.peakDigests.forEach((peak, i) => preimage.set(peak, 8 + DIGEST_BYTES * i));
    return this.hash(preimage.subarray(0, length));
  }

  /** An independent copy (peaks are copied, the hash function shared). */
  clone(): CompactMmr {
    return CompactMmr.fromPeaks(this.hash, this.leaves, this.peakDigests);
  }
}
