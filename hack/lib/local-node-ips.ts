// Each pod on the local node gets its own loopback address, so two pods can listen on the
// same port as they would in a cluster. Linux routes all of 127.0.0.0/8 to `lo`, so a
// process can bind 127.0.x.y without any setup.

/** Third octets 1..255 times fourth octets 1..254: no `.0` or `.255`, and 127.0.0.x stays free. */
const perBlock = 254;
const blocks = 255;

/** How many pod addresses the local node can hand out. */
export const loopbackPoolSize = perBlock * blocks;

/** The address at `index` (0 ⇒ 127.0.1.1, 253 ⇒ 127.0.1.254, 254 ⇒ 127.0.2.1). */
export function loopbackAddress(index: number): string {
  if (!Number.isInteger(index) || index < 0 || index >= loopbackPoolSize) {
    throw new RangeError(`loopback index ${index} is outside 0..${loopbackPoolSize - 1}`);
  }
  return `127.0.${1 + Math.floor(index / perBlock)}.${1 + (index % perBlock)}`;
}

/** The pool index of `ip`, or undefined when `ip` is not a pod address of the pool. */
export function loopbackIndex(ip: string): number | undefined {
  const match = /^127\.0\.(\d{1,3})\.(\d{1,3})$/.exec(ip);
  if (match === null) return undefined;
  const third = Number(match[1]);
  const fourth = Number(match[2]);
  if (third < 1 || third > blocks || fourth < 1 || fourth > perBlock) return undefined;
  return (third - 1) * perBlock + (fourth - 1);
}

/** Thrown when every address of the pool is in use. */
export class LoopbackPoolExhaustedError extends Error {
  constructor() {
    super(
      `all ${loopbackPoolSize} pod addresses (127.0.1.1 to 127.0.255.254) are in use: delete pods`,
    );
    this.name = 'LoopbackPoolExhaustedError';
  }
}

/**
 * Hands out pod addresses from 127.0.1.1 upward. It continues after the last address it
 * gave rather than reusing a freed one at once, so a client still holding a dead pod's
 * address does not reach the next pod by accident.
 */
export class LoopbackAllocator {
  private readonly used = new Set<number>();
  private next = 0;

  /** Addresses currently handed out. */
  get inUse(): number {
    return this.used.size;
  }

  /**
   * The next free address.
   * @throws LoopbackPoolExhaustedError when none is free.
   */
  allocate(): string {
    for (let step = 0; step < loopbackPoolSize; step++) {
      const index = (this.next + step) % loopbackPoolSize;
      if (!this.used.has(index)) {
        this.used.add(index);
        this.next = (index + 1) % loopbackPoolSize;
        return loopbackAddress(index);
      }
    }
    throw new LoopbackPoolExhaustedError();
  }

  /**
   * Reserves a given address (a pod that already had it before the node restarted).
   * Returns false when it is not a pool address or is taken.
   */
  claim(ip: string): boolean {
    const index = loopbackIndex(ip);
    if (index === undefined || this.used.has(index)) return false;
    this.used.add(index);
    return true;
  }

  /** Returns an address to the pool; releasing a free or foreign address does nothing. */
  release(ip: string): void {
    const index = loopbackIndex(ip);
    if (index !== undefined) this.used.delete(index);
  }
}
