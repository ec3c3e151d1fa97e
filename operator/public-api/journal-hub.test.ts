import { afterEach, describe, expect, it } from '@jest/globals';
import pino from 'pino';
import { AppError } from '../../common/errors';
import type { JournalEntry } from '../../common/state-journal';
import { StateCallError } from '../../common/state-call-errors';
import { StoreJournal } from '../../test/support/store-journal';
import { stateJournalFollower } from './journal-follower';
import { prepareEvent, type JournalSink } from './journal-feed';
import { JournalHub, type JournalHubOptions } from './journal-hub';
import { pollUntil, toolResults } from '../../test/support/api-fixtures';
import { RecordingFollow } from '../../test/support/recording-follow';

const P = 'conv-p';
const hubs: JournalHub[] = [];
const controllers: AbortController[] = [];
const stores: StoreJournal[] = [];

afterEach(async () => {
  for (const controller of controllers.splice(0)) controller.abort();
  await Promise.all(hubs.splice(0).map((hub) => hub.close()));
  await Promise.all(stores.splice(0).map((store) => store.close()));
});

function range(from: number, to: number): number[] {
  return Array.from({ length: to - from }, (_, i) => from + i);
}

/** The real store behind the production follower, recorded; appends go to the store. */
interface Journal {
  readonly store: StoreJournal;
  readonly follows: RecordingFollow;
  /**
   * Appends `count` events as one batch; the store seals it, so the head moves by
   * `count + 1`. @returns the new head.
   */
  append(count: number): Promise<number>;
}

function setUp(options: Partial<JournalHubOptions> = {}): Promise<{
  journal: Journal;
  hub: JournalHub;
  prepared: () => number;
}> {
  return StoreJournal.open().then((store) => {
    stores.push(store);
    const follows = new RecordingFollow(stateJournalFollower(store));
    const journal: Journal = {
      store,
      follows,
      append: async (count) =>
        (await store.append(P, store.store.head(P).head, toolResults(count))).head,
    };
    return { journal, ...hubOf(follows, options) };
  });
}

function hubOf(
  follows: RecordingFollow,
  options: Partial<JournalHubOptions>,
): { hub: JournalHub; prepared: () => number } {
  let prepared = 0;
  const hub = new JournalHub({
    follow: follows.follow,
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
  return { hub, prepared: () => prepared };
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
    const { journal, hub, prepared } = await setUp();
    await journal.append(4);
    const subscribers = range(0, 50).map(() => collect(hub, 0));
    await pollUntil('all at 5', () => subscribers.every((s) => count(s) === 5));
    await journal.append(4);
    await pollUntil('all at 10', () => subscribers.every((s) => count(s) === 10));

    expect(journal.follows.follows).toHaveLength(1);
    expect(hub.follows).toBe(1);
    expect(prepared()).toBe(10);
    const first = subscribers[0] as Collector;
    for (const s of subscribers) {
      expect(positions(s)).toEqual(range(0, 10));
      // The same bytes (one buffer) went to everyone.
      s.sink.writes.forEach((write, i) => expect(write.frames).toBe(first.sink.writes[i]?.frames));
    }
    const stored = await journal.store.entries(P);
    expect(Buffer.concat(first.sink.writes.map((w) => w.frames)).toString('utf8')).toBe(
      stored.map((entry) => prepareEvent(entry).frame.toString('utf8')).join(''),
    );
  });

  it('pushes batches appended back to back in contiguous writes, ids exact and in order, the same buffer to all', async () => {
    const { journal, hub } = await setUp();
    const subscribers = range(0, 3).map(() => collect(hub, 0));
    await pollUntil('follow waiting', () => journal.follows.activeFollowers === 1);
    // Three batches appended back to back (2, 1 and 4 events, each sealed): [0, 10).
    const store = journal.store;
    await Promise.all([
      store.append(P, 0, toolResults(2)),
      store.append(P, 3, toolResults(1)),
      store.append(P, 5, toolResults(4)),
    ]);
    await pollUntil('all at 10', () => subscribers.every((s) => count(s) === 10));
    const writes = subscribers[0]?.sink.writes.map((w) => [w.from, w.next]) ?? [];
    // However the store's follow hands them over: never a gap or an overlap.
    writes.forEach(([from], i) => expect(from).toBe(i === 0 ? 0 : writes[i - 1]?.[1]));
    expect(writes.at(-1)?.[1]).toBe(10);
    for (const s of subscribers) {
      expect(s.sink.writes.map((w) => [w.from, w.next])).toEqual(writes);
      expect(positions(s)).toEqual(range(0, 10));
      s.sink.writes.forEach((write, i) =>
        expect(write.frames).toBe(subscribers[0]?.sink.writes[i]?.frames),
      );
    }

    // What comes later is the next write, starting where the last one ended.
    await journal.append(2);
    await pollUntil('all at 13', () => subscribers.every((s) => count(s) === 13));
    for (const s of subscribers) {
      const later = s.sink.writes.slice(writes.length);
      expect(later[0]?.from).toBe(10);
      later.forEach((write, i) => expect(write.from).toBe(i === 0 ? 10 : later[i - 1]?.next));
      expect(later.at(-1)?.next).toBe(13);
    }
  });

  it('gives late subscribers with old cursors the exact sequence: a bounded read, then the ring', async () => {
    const { journal, hub } = await setUp({ ringSize: 4 });
    await journal.append(20);
    const first = collect(hub, 10);
    await pollUntil('first at 21', () => count(first) === 11);

    const behind = collect(hub, 3);
    const inRing = collect(hub, 18);
    const ahead = collect(hub, 23);
    await pollUntil('behind at 21', () => count(behind) === 18);
    await pollUntil('inRing at 21', () => count(inRing) === 3);
    await journal.append(5);
    await pollUntil('all at 27', () =>
      [first, behind, inRing].every((c) => positions(c).at(-1) === 26),
    );
    await pollUntil('ahead at 27', () => count(ahead) === 4);

    expect(positions(first)).toEqual(range(10, 27));
    expect(positions(behind)).toEqual(range(3, 27));
    expect(positions(inRing)).toEqual(range(18, 27));
    expect(positions(ahead)).toEqual(range(23, 27));
    expect(journal.follows.liveFollows).toHaveLength(1);
    // Only the subscriber behind the ring read anything, and only what it missed.
    expect(
      journal.follows.follows
        .filter((f) => f.limit !== undefined)
        .map((f) => [f.fromPosition, f.limit]),
    ).toEqual([[3, 14]]);
  });

  it('lets a slow subscriber overflow without delaying a fast one; it still gets every event exactly once', async () => {
    const { journal, hub } = await setUp({ ringSize: 8 });
    const fast = collect(hub, 0);
    const slow = collect(hub, 0);
    await pollUntil('follow waiting', () => journal.follows.activeFollowers === 1);
    slow.sink.full = true;
    await journal.append(1);
    await pollUntil('slow has a write', () => slow.sink.writes.length === 1);
    const slowHad = count(slow);

    // The slow one takes nothing more: the fast one still gets everything.
    await journal.append(97);
    await pollUntil('fast at 100', () => count(fast) === 100);
    expect(positions(fast)).toEqual(range(0, 100));
    expect(count(slow)).toBe(slowHad);

    slow.sink.open();
    await pollUntil('slow at 100', () => count(slow) === 100);
    expect(positions(slow)).toEqual(range(0, 100));
    // It fell out of the ring and caught up with its own read from its next position.
    const reads = journal.follows.follows.filter((f) => f.limit !== undefined);
    expect(reads.length).toBeGreaterThan(0);
    expect(reads[0]?.fromPosition).toBe(slowHad);
    expect(journal.follows.liveFollows).toHaveLength(1);

    // Then it is pushed to again, with the others.
    await journal.append(1);
    await pollUntil('both at 102', () => count(fast) === 102 && count(slow) === 102);
    expect(slow.sink.writes.at(-1)?.frames).toBe(fast.sink.writes.at(-1)?.frames);
  });

  it('recovers a subscriber that falls behind mid-burst and stays full a while: no gap, no duplicate', async () => {
    const { journal, hub } = await setUp({ ringSize: 4 });
    const steady = collect(hub, 0);
    const flaky = collect(hub, 0);
    await pollUntil('follow waiting', () => journal.follows.activeFollowers === 1);
    // Full after every write while it catches up: it moves one write at a time.
    for (let burst = 0; burst < 10; burst += 1) {
      await journal.append(2);
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
    expect(journal.follows.liveFollows).toHaveLength(1);
  });

  it('writes nothing more to a subscriber that has left, and keeps nothing of it', async () => {
    const { journal, hub } = await setUp({ lingerMs: 20 });
    const staying = collect(hub, 0);
    const leaving = collect(hub, 0);
    await pollUntil('follow waiting', () => journal.follows.activeFollowers === 1);
    await journal.append(2);
    await pollUntil('both at 3', () => count(staying) === 3 && count(leaving) === 3);

    leaving.controller.abort();
    await journal.append(3);
    await pollUntil('staying at 7', () => count(staying) === 7);
    expect(positions(leaving)).toEqual([0, 1, 2]);

    // With the last one gone, the follow ends after the linger: nothing held it.
    staying.controller.abort();
    await pollUntil(
      'upstream cancelled',
      () => journal.follows.follows[0]?.signal.aborted === true,
    );
    await pollUntil('follows 0', () => hub.follows === 0);
    expect(positions(leaving)).toEqual([0, 1, 2]);
  });

  it('restarts an upstream that failed with unavailable from the next position: no gap, no duplicate', async () => {
    const { journal, hub } = await setUp();
    await journal.append(4);
    const subscribers = [collect(hub, 0), collect(hub, 2)];
    await pollUntil('caught up', () => subscribers.every((s) => positions(s).at(-1) === 4));
    await pollUntil('follow waiting', () => journal.follows.activeFollowers === 1);

    const restarted = new StateCallError('unavailable', 'state plane restarting', {
      method: 'Read',
      grpcStatus: 14,
      fromServer: true,
    });
    expect(journal.follows.failFollowers(restarted)).toBe(1);
    await pollUntil('second follow', () => journal.follows.follows.length === 2);
    expect(journal.follows.follows[1]?.fromPosition).toBe(5);
    await journal.append(4);
    await pollUntil('all at 10', () => subscribers.every((s) => positions(s).at(-1) === 9));
    expect(positions(subscribers[0] as Collector)).toEqual(range(0, 10));
    expect(positions(subscribers[1] as Collector)).toEqual(range(2, 10));
    for (const s of subscribers) expect(s.sink.failure).toBeUndefined();
  });

  it('fails every subscriber after the retry attempts, or at once on a non-retryable error', async () => {
    let calls = 0;
    const { hub } = await setUp({
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

  it.each(['internal', 'resource_exhausted'] as const)(
    'retries a follow that failed with %s (retryable in common/errors.ts) until the attempts run out',
    async (code) => {
      let calls = 0;
      const { hub } = await setUp({
        // eslint-disable-next-line require-yield
        follow: async function* () {
          calls += 1;
          await Promise.resolve();
          throw new AppError(code, 'the state plane failed');
        },
      });
      const subscriber = collect(hub, 0);
      const failure = await subscriber.sink.done;
      expect(calls).toBe(4); // the first try and retry.attempts (3) more
      expect(failure).toMatchObject({ code });
    },
  );

  it('fails a subscriber started after close() with unavailable', async () => {
    const { hub } = await setUp();
    await hub.close();
    const late = collect(hub, 0);
    expect(await late.sink.done).toMatchObject({ code: 'unavailable' });
    expect(hub.follows).toBe(0);
  });

  it('cancels the upstream after the linger once the last subscriber left; a return in time reuses it', async () => {
    const { journal, hub } = await setUp({ lingerMs: 60 });
    await journal.append(2);
    const first = collect(hub, 0);
    await pollUntil('first at 3', () => count(first) === 3);
    first.controller.abort();
    const again = collect(hub, 3);
    await journal.append(1);
    await pollUntil('again at 5', () => count(again) === 2);
    expect(journal.follows.follows).toHaveLength(1);

    again.controller.abort();
    expect(journal.follows.follows[0]?.signal.aborted).toBe(false);
    expect(hub.follows).toBe(1);
    await pollUntil(
      'upstream cancelled',
      () => journal.follows.follows[0]?.signal.aborted === true,
    );
    await pollUntil('follower gone', () => journal.follows.activeFollowers === 0);
    expect(hub.follows).toBe(0);

    // A new subscriber then starts a new follow.
    const later = collect(hub, 0);
    await pollUntil('later at 5', () => count(later) === 5);
    expect(journal.follows.liveFollows).toHaveLength(2);
  });
});
