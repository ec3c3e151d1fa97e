import { afterEach, describe, expect, it } from '@jest/globals';
import pino from 'pino';
import { AppError } from '../../common/errors';
import type { JournalEntry } from '../../common/state-client';
import { StateCallError } from '../../common/state-client';
import {
  JournalHub,
  prepareEvent,
  type JournalHubOptions,
  type PreparedEvent,
} from './journal-hub';
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

interface Collector {
  readonly events: PreparedEvent[];
  readonly controller: AbortController;
  readonly done: Promise<unknown>;
}

function collect(hub: JournalHub, from: number): Collector {
  const controller = new AbortController();
  controllers.push(controller);
  const events: PreparedEvent[] = [];
  const done = (async () => {
    for await (const event of hub.subscribe(P, from, controller.signal)) events.push(event);
  })().catch((error: unknown) => error);
  return { events, controller, done };
}

const positions = (c: Collector): number[] => c.events.map((e) => e.position);

async function nextPosition(iterator: AsyncIterator<PreparedEvent>): Promise<number> {
  const result = await iterator.next();
  return result.done === true ? -1 : result.value.position;
}

describe('JournalHub', () => {
  it('shares ONE upstream follow among many subscribers, and builds each frame once', async () => {
    const { journal, hub, prepared } = setUp();
    append(journal, 5);
    const subscribers = range(0, 50).map(() => collect(hub, 0));
    await pollUntil('all at 5', () => subscribers.every((s) => s.events.length === 5));
    append(journal, 5);
    await pollUntil('all at 10', () => subscribers.every((s) => s.events.length === 10));

    expect(journal.follows).toHaveLength(1);
    expect(hub.follows).toBe(1);
    expect(prepared()).toBe(10);
    for (const s of subscribers) {
      expect(positions(s)).toEqual(range(0, 10));
      // The same prepared object (one frame text) went to everyone.
      s.events.forEach((event, i) => expect(event).toBe(subscribers[0]?.events[i]));
    }
    expect(subscribers[0]?.events[0]?.frame).toBe(
      `id: 0\nevent: test_kind\ndata: ${JSON.stringify({
        position: 0,
        kind: 'test_kind',
        payload: null,
        payloadBase64: 'AA==',
      })}\n\n`,
    );
  });

  it('gives late subscribers with old cursors the exact sequence: a bounded read, then the ring', async () => {
    const { journal, hub } = setUp({ ringSize: 4 });
    append(journal, 20);
    const first = collect(hub, 10);
    await pollUntil('first at 20', () => first.events.length === 10);

    const behind = collect(hub, 3);
    const inRing = collect(hub, 17);
    const ahead = collect(hub, 22);
    await pollUntil('behind at 20', () => behind.events.length === 17);
    await pollUntil('inRing at 20', () => inRing.events.length === 3);
    append(journal, 5);
    await pollUntil('all at 25', () =>
      [first, behind, inRing].every((c) => c.events.at(-1)?.position === 24),
    );
    await pollUntil('ahead at 25', () => ahead.events.length === 3);

    expect(positions(first)).toEqual(range(10, 25));
    expect(positions(behind)).toEqual(range(3, 25));
    expect(positions(inRing)).toEqual(range(17, 25));
    expect(positions(ahead)).toEqual(range(22, 25));
    expect(journal.liveFollows).toHaveLength(1);
    // Only the subscriber behind the ring read anything, and only what it missed.
    expect(
      journal.follows.filter((f) => f.limit !== undefined).map((f) => [f.fromPosition, f.limit]),
    ).toEqual([[3, 13]]);
  });

  it('lets a slow subscriber overflow without delaying a fast one; it still gets every event exactly once', async () => {
    const { journal, hub } = setUp({ ringSize: 8 });
    const fast = collect(hub, 0);
    const controller = new AbortController();
    controllers.push(controller);
    const slow = hub.subscribe(P, 0, controller.signal)[Symbol.asyncIterator]();
    const firstSlow = nextPosition(slow);
    append(journal, 100);
    expect(await firstSlow).toBe(0);

    // The slow one pulls nothing more: the fast one still gets everything, at once.
    await pollUntil('fast at 100', () => fast.events.length === 100);
    expect(positions(fast)).toEqual(range(0, 100));

    const slowPositions: number[] = [0];
    for (let i = 1; i < 100; i += 1) {
      slowPositions.push(await nextPosition(slow));
    }
    expect(slowPositions).toEqual(range(0, 100));
    // It fell out of the ring and caught up with its own read from its next position.
    const reads = journal.follows.filter((f) => f.limit !== undefined);
    expect(reads.length).toBeGreaterThan(0);
    expect(reads[0]?.fromPosition).toBe(1);
    expect(journal.liveFollows).toHaveLength(1);

    append(journal, 1);
    expect(await nextPosition(slow)).toBe(100);
    await pollUntil('fast at 101', () => fast.events.length === 101);
  });

  it('restarts an upstream that failed with unavailable from the next position: no gap, no duplicate', async () => {
    const { journal, hub } = setUp();
    append(journal, 5);
    const subscribers = [collect(hub, 0), collect(hub, 2)];
    await pollUntil('caught up', () => subscribers.every((s) => s.events.at(-1)?.position === 4));
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
    await pollUntil('all at 10', () => subscribers.every((s) => s.events.at(-1)?.position === 9));
    expect(positions(subscribers[0] as Collector)).toEqual(range(0, 10));
    expect(positions(subscribers[1] as Collector)).toEqual(range(2, 10));
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
    const errors = await Promise.all(subscribers.map((s) => s.done));
    expect(calls).toBe(1);
    for (const error of errors) expect(error).toMatchObject({ code: 'permission_denied' });
    expect(hub.follows).toBe(0);
  });

  it('cancels the upstream after the linger once the last subscriber left; a return in time reuses it', async () => {
    const { journal, hub } = setUp({ lingerMs: 60 });
    append(journal, 3);
    const first = collect(hub, 0);
    await pollUntil('first at 3', () => first.events.length === 3);
    first.controller.abort();
    await first.done;
    const again = collect(hub, 3);
    append(journal, 1);
    await pollUntil('again at 4', () => again.events.length === 1);
    expect(journal.follows).toHaveLength(1);

    again.controller.abort();
    await again.done;
    expect(journal.follows[0]?.signal.aborted).toBe(false);
    expect(hub.follows).toBe(1);
    await pollUntil('upstream cancelled', () => journal.follows[0]?.signal.aborted === true);
    await pollUntil('follower gone', () => journal.activeFollowers === 0);
    expect(hub.follows).toBe(0);

    // A new subscriber then starts a new follow.
    const later = collect(hub, 0);
    await pollUntil('later at 4', () => later.events.length === 4);
    expect(journal.liveFollows).toHaveLength(2);
  });
});
