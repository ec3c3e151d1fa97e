import { afterEach, describe, expect, it } from '@jest/globals';
import pino from 'pino';
import { AppError } from '../../common/errors';
import type { JournalEntry } from '../../common/state-client';
import { StateCallError } from '../../common/state-client';
import { JournalHub, prepareEvent, type JournalHubOptions, type JournalSink } from './journal-hub';
import { pollUntil } from './testdata/fixtures';
import { InMemoryJournal } from './testdata/in-memory-journal';

const P = 'conv-p';
const hubs: JournalHub[] = [];
const controllers: AbortController[] = [];

afterEach(async () => {
  for (const controller of controllers.splice(0)) controller.abort();
  await Promise.all(hubs.splice(0).map((hub) => hub.close()));
});

function range(from: number, to: number): number[] {
  return Array.from({ length: to - from }, (_, i) => from + i);
}

function append(journal: InMemoryJournal, count: number): void {
  journal.append(
    P,
    range(0, count).map((i) => ({ kind: 'test_kind', payload: new Uint8Array([i % 256]) })),
  );
}

function setUp(options: Partial<JournalHubOptions> = {}): {
  journal: InMemoryJournal;
  hub: JournalHub;
  prepared: () => number;
} {
  const journal = new InMemoryJournal();
  let prepared = 0;
  const hub = new JournalHub({
    follow: journal.follow,
    log: pino({ level: 'silent' }),
    retry: { attempts: 3, baseDelayMs: 2, maxDelayMs: 10 },
    lingerMs: 30,
    prepare: (entry: JournalEntry) => {
      prepared += 1;
      return prepareEvent(entry);
    },
    ...options,
  });
  hubs.push(hub);
  return { journal, hub, prepared: () => prepared };
}

/**
 * A sink as a stream is one: it records each write and can be full (`write` answers false
 * and `drained` waits until {@link TestSink.open}).
 */
class TestSink implements JournalSink {
  readonly writes: { readonly frames: Buffer; readonly from: number; readonly next: number }[] = [];
  full = false;
  failure: Error | undefined;
  private readonly failed: Promise<Error>;
  private failedResolve!: (error: Error) => void;
  private drain: (() => void) | undefined;

  constructor() {
    this.failed = new Promise((resolve) => {
      this.failedResolve = resolve;
    });
  }

  write(frames: Buffer, from: number, next: number): boolean {
    this.writes.push({ frames, from, next });
    return !this.full;
  }

  drained(): Promise<void> {
    if (!this.full) return Promise.resolve();
    return new Promise((resolve) => {
      this.drain = resolve;
    });
  }

  fail(error: Error): void {
    this.failure = error;
    this.failedResolve(error);
  }

  /** Takes writes again. */
  open(): void {
    this.full = false;
    this.drain?.();
  }

  /** Resolves with the error the hub failed this sink with. */
  get done(): Promise<Error> {
    return this.failed;
  }

  /** The ids of every frame written, in order. */
  positions(): number[] {
    const text = Buffer.concat(this.writes.map((w) => w.frames)).toString('utf8');
    return [...text.matchAll(/^id: (\d+)$/gmu)].map((m) => Number(m[1]));
  }
}

interface Collector {
  readonly sink: TestSink;
  readonly controller: AbortController;
}

function collect(hub: JournalHub, from: number): Collector {
  const controller = new AbortController();
  controllers.push(controller);
  const sink = new TestSink();
  hub.subscribe(P, from, controller.signal).start(sink);
  return { sink, controller };
}

const positions = (c: Collector): number[] => c.sink.positions();
const count = (c: Collector): number => positions(c).length;

describe('JournalHub', () => {
  it('shares ONE upstream follow among many subscribers, and builds each frame once', async () => {
    const { journal, hub, prepared } = setUp();
    append(journal, 5);
    const subscribers = range(0, 50).map(() => collect(hub, 0));
    await pollUntil('all at 5', () => subscribers.every((s) => count(s) === 5));
    append(journal, 5);
    await pollUntil('all at 10', () => subscribers.every((s) => count(s) === 10));

    expect(journal.follows).toHaveLength(1);
    expect(hub.follows).toBe(1);
    expect(prepared()).toBe(10);
    const first = subscribers[0] as Collector;
    for (const s of subscribers) {
      expect(positions(s)).toEqual(range(0, 10));
      // The same bytes (one buffer) went to everyone.
      s.sink.writes.forEach((write, i) => expect(write.frames).toBe(first.sink.writes[i]?.frames));
    }
    expect(first.sink.writes[0]?.frames.toString('utf8').split('\n\n')[0]).toBe(
      `id: 0\nevent: test_kind\ndata: ${JSON.stringify({
        position: 0,
        kind: 'test_kind',
        payload: null,
        payloadBase64: 'AA==',
      })}`,
    );
  });

  it('pushes the events of one turn of the event loop as one write, ids exact and in order', async () => {
    const { journal, hub } = setUp();
    const subscribers = range(0, 3).map(() => collect(hub, 0));
    await pollUntil('follow waiting', () => journal.activeFollowers === 1);
    // Three appends (batches) in one tick: one write each, of positions [0, 7).
    append(journal, 2);
    append(journal, 1);
    append(journal, 4);
    await pollUntil('all at 7', () => subscribers.every((s) => count(s) === 7));
    for (const s of subscribers) {
      expect(s.sink.writes.map((w) => [w.from, w.next])).toEqual([[0, 7]]);
      expect(positions(s)).toEqual(range(0, 7));
      expect(s.sink.writes[0]?.frames).toBe(subscribers[0]?.sink.writes[0]?.frames);
    }
    const frames = subscribers[0]?.sink.writes[0]?.frames.toString('utf8') ?? '';
    expect(frames).toBe(
      journal
        .entries(P)
        .map((entry) => prepareEvent(entry).frame.toString('utf8'))
        .join(''),
    );

    // The next tick's events are the next write, starting where this one ended.
    append(journal, 3);
    await pollUntil('all at 10', () => subscribers.every((s) => count(s) === 10));
    for (const s of subscribers) {
      expect(s.sink.writes.map((w) => [w.from, w.next])).toEqual([
        [0, 7],
        [7, 10],
      ]);
    }
  });

  it('gives late subscribers with old cursors the exact sequence: a bounded read, then the ring', async () => {
    const { journal, hub } = setUp({ ringSize: 4 });
    append(journal, 20);
    const first = collect(hub, 10);
    await pollUntil('first at 20', () => count(first) === 10);

    const behind = collect(hub, 3);
    const inRing = collect(hub, 17);
    const ahead = collect(hub, 22);
    await pollUntil('behind at 20', () => count(behind) === 17);
    await pollUntil('inRing at 20', () => count(inRing) === 3);
    append(journal, 5);
    await pollUntil('all at 25', () =>
      [first, behind, inRing].every((c) => positions(c).at(-1) === 24),
    );
    await pollUntil('ahead at 25', () => count(ahead) === 3);

    expect(positions(first)).toEqual(range(10, 25));
    expect(positions(behind)).toEqual(range(3, 25));
    expect(positions(inRing)).toEqual(range(17, 25));
    expect(positions(ahead)).toEqual(range(22, 25));
    // The one ahead got its part of the runs of [20, 25) (a ring, 4, at most each).
    expect(ahead.sink.writes.map((w) => [w.from, w.next])).toEqual([
      [22, 24],
      [24, 25],
    ]);
    expect(journal.liveFollows).toHaveLength(1);
    // Only the subscriber behind the ring read anything, and only what it missed.
    expect(
      journal.follows.filter((f) => f.limit !== undefined).map((f) => [f.fromPosition, f.limit]),
    ).toEqual([[3, 13]]);
  });

  it('lets a slow subscriber overflow without delaying a fast one; it still gets every event exactly once', async () => {
    const { journal, hub } = setUp({ ringSize: 8 });
    const fast = collect(hub, 0);
    const slow = collect(hub, 0);
    await pollUntil('follow waiting', () => journal.activeFollowers === 1);
    slow.sink.full = true;
    append(journal, 1);
    await pollUntil('slow at 1', () => count(slow) === 1);

    // The slow one takes nothing more: the fast one still gets everything, at once.
    append(journal, 99);
    await pollUntil('fast at 100', () => count(fast) === 100);
    expect(positions(fast)).toEqual(range(0, 100));
    expect(count(slow)).toBe(1);

    slow.sink.open();
    await pollUntil('slow at 100', () => count(slow) === 100);
    expect(positions(slow)).toEqual(range(0, 100));
    // It fell out of the ring and caught up with its own read from its next position.
    const reads = journal.follows.filter((f) => f.limit !== undefined);
    expect(reads.length).toBeGreaterThan(0);
    expect(reads[0]?.fromPosition).toBe(1);
    expect(journal.liveFollows).toHaveLength(1);

    // Then it is pushed to again, with the others.
    append(journal, 1);
    await pollUntil('both at 101', () => count(fast) === 101 && count(slow) === 101);
    expect(slow.sink.writes.at(-1)?.frames).toBe(fast.sink.writes.at(-1)?.frames);
  });

  it('recovers a subscriber that falls behind mid-burst and stays full a while: no gap, no duplicate', async () => {
    const { journal, hub } = setUp({ ringSize: 4 });
    const steady = collect(hub, 0);
    const flaky = collect(hub, 0);
    await pollUntil('follow waiting', () => journal.activeFollowers === 1);
    // Full after every write while it catches up: it moves one write at a time.
    for (let burst = 0; burst < 10; burst += 1) {
      append(journal, 3);
      if (burst % 3 === 0) flaky.sink.full = true;
      await pollUntil(`steady at burst ${String(burst)}`, () => count(steady) === 3 * burst + 3);
      if (burst % 3 === 2) flaky.sink.open();
    }
    flaky.sink.open();
    await pollUntil('flaky at 30', () => count(flaky) === 30);
    expect(positions(flaky)).toEqual(range(0, 30));
    for (const [i, write] of flaky.sink.writes.entries()) {
      expect(write.from).toBe(i === 0 ? 0 : flaky.sink.writes[i - 1]?.next);
    }
    expect(positions(steady)).toEqual(range(0, 30));
    expect(journal.liveFollows).toHaveLength(1);
  });

  it('writes nothing more to a subscriber that leaves between an append and its flush, and keeps nothing of it', async () => {
    const { journal, hub } = setUp({ lingerMs: 20 });
    const staying = collect(hub, 0);
    const leaving = collect(hub, 0);
    await pollUntil('follow waiting', () => journal.activeFollowers === 1);
    append(journal, 2);
    await pollUntil('both at 2', () => count(staying) === 2 && count(leaving) === 2);

    append(journal, 3);
    // The follow took the events (a microtask each); the flush waits for the next turn.
    await new Promise((resolve) => queueMicrotask(() => resolve(undefined)));
    leaving.controller.abort();
    await pollUntil('staying at 5', () => count(staying) === 5);
    expect(positions(leaving)).toEqual([0, 1]);

    // With the last one gone, the follow ends after the linger: nothing held it.
    staying.controller.abort();
    await pollUntil('upstream cancelled', () => journal.follows[0]?.signal.aborted === true);
    await pollUntil('follows 0', () => hub.follows === 0);
    expect(positions(leaving)).toEqual([0, 1]);
  });

  it('restarts an upstream that failed with unavailable from the next position: no gap, no duplicate', async () => {
    const { journal, hub } = setUp();
    append(journal, 5);
    const subscribers = [collect(hub, 0), collect(hub, 2)];
    await pollUntil('caught up', () => subscribers.every((s) => positions(s).at(-1) === 4));
    await pollUntil('follow waiting', () => journal.activeFollowers === 1);

    const restarted = new StateCallError('unavailable', 'state plane restarting', {
      method: 'Read',
      grpcStatus: 14,
      fromServer: true,
    });
    expect(journal.failFollowers(restarted)).toBe(1);
    await pollUntil('second follow', () => journal.follows.length === 2);
    expect(journal.follows[1]?.fromPosition).toBe(5);
    append(journal, 5);
    await pollUntil('all at 10', () => subscribers.every((s) => positions(s).at(-1) === 9));
    expect(positions(subscribers[0] as Collector)).toEqual(range(0, 10));
    expect(positions(subscribers[1] as Collector)).toEqual(range(2, 10));
    for (const s of subscribers) expect(s.sink.failure).toBeUndefined();
  });

  it('fails every subscriber after the retry attempts, or at once on a non-retryable error', async () => {
    let calls = 0;
    const { hub } = setUp({
      // eslint-disable-next-line require-yield
      follow: async function* () {
        calls += 1;
        await Promise.resolve();
        throw new AppError('permission_denied', 'no');
      },
    });
    const subscribers = [collect(hub, 0), collect(hub, 0)];
    const errors = await Promise.all(subscribers.map((s) => s.sink.done));
    expect(calls).toBe(1);
    for (const error of errors) expect(error).toMatchObject({ code: 'permission_denied' });
    expect(hub.follows).toBe(0);
  });

  it('fails a subscriber started after close() with unavailable', async () => {
    const { hub } = setUp();
    await hub.close();
    const late = collect(hub, 0);
    expect(await late.sink.done).toMatchObject({ code: 'unavailable' });
    expect(hub.follows).toBe(0);
  });

  it('cancels the upstream after the linger once the last subscriber left; a return in time reuses it', async () => {
    const { journal, hub } = setUp({ lingerMs: 60 });
    append(journal, 3);
    const first = collect(hub, 0);
    await pollUntil('first at 3', () => count(first) === 3);
    first.controller.abort();
    const again = collect(hub, 3);
    append(journal, 1);
    await pollUntil('again at 4', () => count(again) === 1);
    expect(journal.follows).toHaveLength(1);

    again.controller.abort();
    expect(journal.follows[0]?.signal.aborted).toBe(false);
    expect(hub.follows).toBe(1);
    await pollUntil('upstream cancelled', () => journal.follows[0]?.signal.aborted === true);
    await pollUntil('follower gone', () => journal.activeFollowers === 0);
    expect(hub.follows).toBe(0);

    // A new subscriber then starts a new follow.
    const later = collect(hub, 0);
    await pollUntil('later at 4', () => count(later) === 4);
    expect(journal.liveFollows).toHaveLength(2);
  });
});
