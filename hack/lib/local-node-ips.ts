// Each pod on a local node gets its own loopback address, so two pods can listen on the
// same port as they would in a cluster. Linux routes all of 127.0.0.0/8 to `lo`, so a
// process can bind 127.k.x.y without any setup. Each local node owns one block
// 127.k.0.0/16 (its Node's spec.podCIDR), so nodes never hand out the same address.

/** Third octets 1..255 times fourth octets 1..254: no `.0` or `.255`, and 127.k.0.x stays free. */
const perRow = 254;
const rows = 255;

/** How many pod addresses one block holds. */
export const loopbackPoolSize = perRow * rows;

/** How many blocks (local nodes) 127.0.0.0/8 holds. */
export const loopbackBlocks = 256;

function checkBlock(block: number): void {
  if (!Number.isInteger(block) || block < 0 || block >= loopbackBlocks) {
    throw new RangeError(`loopback block ${block} is outside 0..${loopbackBlocks - 1}`);
  }
}

/** The address at `index` of `block` (block 0: 0 ⇒ 127.0.1.1, 253 ⇒ 127.0.1.254, 254 ⇒ 127.0.2.1). */
export function loopbackAddress(index: number, block = 0): string {
  checkBlock(block);
  if (!Number.isInteger(index) || index < 0 || index >= loopbackPoolSize) {
    throw new RangeError(`loopback index ${index} is outside 0..${loopbackPoolSize - 1}`);
  }
  return `127.${block}.${1 + Math.floor(index / perRow)}.${1 + (index % perRow)}`;
}

/** The index of `ip` in `block`, or undefined when `ip` is not a pod address of it. */
export function loopbackIndex(ip: string, block = 0): number | undefined {
  const match = /^127\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(ip);
  if (match === null || Number(match[1]) !== block) return undefined;
  const third = Number(match[2]);
  const fourth = Number(match[3]);
  if (third < 1 || third > rows || fourth < 1 || fourth > perRow) return undefined;
  return (third - 1) * perRow + (fourth - 1);
}

/** The CIDR of a block, as a Node's `spec.podCIDR`. */
export function loopbackCidr(block: number): string {
  checkBlock(block);
  return `127.${block}.0.0/16`;
}

/** The block a `spec.podCIDR` names, or undefined when it is not a loopback block. */
export function loopbackBlockOf(cidr: string): number | undefined {
  const match = /^127\.(\d{1,3})\.0\.0\/16$/.exec(cidr);
  const block = match === null ? NaN : Number(match[1]);
  return block >= 0 && block < loopbackBlocks ? block : undefined;
}

/** Thrown when every address of a block is in use. */
export class LoopbackPoolExhaustedError extends Error {
  constructor(block: number) {
    super(
      `all ${loopbackPoolSize} pod addresses of ${loopbackCidr(block)} are in use: delete pods`,
    );
    this.name = 'LoopbackPoolExhaustedError';
  }
}

/**
 * The IPv4 addresses something listens on over TCP, from the text of Linux's
 * `/proc/net/tcp` (one socket a line: `sl local_address rem_address st ...`, the address
 * as 8 hex digits in host byte order, which is little-endian on the machines we run,
 * state `0A` LISTEN). Pure.
 */
export function listeningIPv4(procNetTcp: string): Set<string> {
  const listening = new Set<string>();
  for (const line of procNetTcp.split('\n').slice(1)) {
    const [, local, , state] = line.trim().split(/\s+/u);
    const hex = local?.split(':')[0];
    if (state !== '0A' || hex === undefined || !/^[0-9A-Fa-f]{8}$/u.test(hex)) continue;
    const octets = [6, 4, 2, 0].map((at) => parseInt(hex.slice(at, at + 2), 16));
    listening.add(octets.join('.'));
  }
  return listening;
}

/**
 * Hands out the pod addresses of one block from 127.k.1.1 upward. It continues after the
 * last address it gave rather than reusing a freed one at once, so a client still
 * holding a dead pod's address does not reach the next pod by accident. It also skips an
 * address some process already listens on: a pod process left over from an earlier
 * node (killed without its children) would otherwise answer in the new pod's place.
 */
export class LoopbackAllocator {
  private readonly used = new Set<number>();
  private next = 0;

  /**
   * @param listening the addresses taken outside this allocator, asked at each
   *   {@link allocate} (e.g. {@link listeningIPv4} of `/proc/net/tcp`)
   * @throws RangeError when `block` is not 0..255.
   */
  constructor(
    readonly block = 0,
    private readonly listening: () => ReadonlySet<string> = () => new Set(),
  ) {
    checkBlock(block);
  }

  /** Addresses currently handed out. */
  get inUse(): number {
    return this.used.size;
  }

  /**
   * The next free address.
   * @throws LoopbackPoolExhaustedError when none is free.
   */
  allocate(): string {
    const taken = this.listening();
    for (let step = 0; step < loopbackPoolSize; step++) {
      const index = (this.next + step) % loopbackPoolSize;
      if (!this.used.has(index) && !taken.has(loopbackAddress(index, this.block))) {
        this.used.add(index);
        this.next = (index + 1) % loopbackPoolSize;
        return loopbackAddress(index, this.block);
      }
    }
    throw new LoopbackPoolExhaustedError(this.block);
  }

  /**
   * Reserves a given address (a pod that already had it before the node restarted).
   * Returns false when it is not an address of this block or is taken.
   */
  claim(ip: string): boolean {
    const index = loopbackIndex(ip, this.block);
    if (index === undefined || this.used.has(index)) return false;
    this.used.add(index);
    return true;
  }

  /** Returns an address to the pool; releasing a free or foreign address does nothing. */
  release(ip: string): void {
    const index = loopbackIndex(ip, this.block);
    if (index !== undefined) this.used.delete(index);
  }
}
