/**
 * Runs tasks one at a time per key, in arrival order; tasks on different keys run
 * concurrently. The store keys it by partition so that compare-and-swap on the head and
 * the in-memory frontier see one append at a time. Idle keys hold no memory.
 */
export class KeyedMutex {
  private readonly tails = new Map<string, Promise<void>>();

  /** Number of keys with a running or waiting task. */
  get activeKeys(): number {
    return this.tails.size;
  }

  /**
   * Runs `task` once every earlier task for `key` has settled; resolves or rejects as
   * `task` does. A failing task does not block the ones after it.
   */
  async run<T>(key: string, task: () => Promise<T>): Promise<T> {
    const previous = this.tails.get(key);
    let release = (): void => undefined;
    const mine = new Promise<void>((resolve) => {
      release = resolve;
    });
    const tail = previous === undefined ? mine : previous.then(() => mine);
    this.tails.set(key, tail);
    try {
      if (previous !== undefined) await previous;
      return await task();
    } finally {
      release();
      if (this.tails.get(key) === tail) this.tails.delete(key);
    }
  }
}
