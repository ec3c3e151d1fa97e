/**
 * `items` in batches, read ahead (for the journal store's verify and repair): a pump takes
 * entries from the store's iterator as they arrive, so LevelDB fetches the next ones on
 * its own thread while the caller works on a batch; a plain `for await` leaves this thread
 * idle at every fetch. A batch is what arrived since the previous one, about one LevelDB
 * fetch, so memory stays bounded. Leaving the loop early stops the pump and closes the
 * iterator.
 */
export async function* readAhead<T>(items: AsyncIterable<T>): AsyncGenerator<T[]> {
  let arrived: T[] = [];
  let done = false;
  let stop = false;
  let failure: { readonly error: unknown } | undefined;
  let wake: (() => void) | undefined;
  const pump = (async () => {
    try {
      for await (const item of items) {
        arrived.push(item);
        wake?.();
        if (stop) return;
      }
    } catch (error) {
      failure = { error };
    } finally {
      done = true;
      wake?.();
    }
  })();
  try {
    for (;;) {
      if (arrived.length === 0 && !done) await new Promise<void>((resolve) => (wake = resolve));
      // One macrotask turn: the pump takes the rest of what LevelDB fetched and asks for more.
      await new Promise((resolve) => setImmediate(resolve));
      if (failure !== undefined) throw failure.error;
      if (arrived.length === 0) return;
      const batch = arrived;
      arrived = [];
      yield batch;
    }
  } finally {
    stop = true;
    await pump;
  }
}
