import { describe, expect, it } from '@jest/globals';
import { WorkQueue } from './work-queue';

describe('WorkQueue', () => {
  it('holds a key once, and hands it to one worker at a time', async () => {
    const q = new WorkQueue();
    q.add('a');
    q.add('a');
    q.add('b');
    expect(q.length).toBe(2);
    expect(await q.get()).toBe('a');
    q.add('a'); // while processing: queued again only when done
    expect(await q.get()).toBe('b');
    expect(q.length).toBe(0);
    q.done('a');
    expect(await q.get()).toBe('a');
    q.shutDown();
  });

  it('backs off exponentially and forgets on success', () => {
    const q = new WorkQueue({ baseDelayMs: 10, maxDelayMs: 35 });
    expect([q.addRateLimited('a'), q.addRateLimited('a'), q.addRateLimited('a')]).toEqual([
      10, 20, 35,
    ]);
    q.forget('a');
    expect(q.addRateLimited('a')).toBe(10);
    q.shutDown();
  });

  it('delivers a delayed key, and wakes waiting workers on shutdown', async () => {
    const q = new WorkQueue();
    q.addAfter('a', 5);
    expect(await q.get()).toBe('a');
    const waiting = q.get();
    q.shutDown();
    expect(await waiting).toBeUndefined();
    expect(await q.get()).toBeUndefined();
  });
});
