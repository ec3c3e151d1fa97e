/** Runs at most `limit` tasks at once; the others wait their turn, first come first served. */
export class ConcurrencyLimit {
  private inFlight = 0;
  private readonly waiters: (() => void)[] = [];

  constructor(private readonly limit: number) {}

  /** Runs `task` once fewer than `limit` tasks are running. */
  async run<T>(task: () => Promise<T>): Promise<T> {
    while (this.inFlight >= this.limit) {
      await new Promise<void>((resolve) => this.waiters.push(resolve));
    }
    this.inFlight += 1;
    try {
      return await task();
    } finally {
      this.inFlight -= 1;
      this.waiters.shift()?.();
    }
  }
}
