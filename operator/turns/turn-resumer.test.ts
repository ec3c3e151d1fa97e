import { describe, expect, it } from '@jest/globals';
import { pino } from 'pino';
import { AppError } from '../../common/errors';
import type { Conversation } from '../api/v1alpha1/conversation-types';
import { conversation } from '../controller/snapshot-fixtures';
import type { ResumedOutcome, ResumedTurn } from './resume-turns';
import { TurnResumer, type TurnResumerOptions } from './turn-resumer';

// The resumer's own behaviour: which conversations it reads, how many at once, what it
// retries. What a resume commits is the coordinator's (resume-turns.ts) and is tested on
// the real stack (test/integration/turn-resume.test.ts).

const settledAt = (head: number): Conversation =>
  conversation({ owner: 'web:o' }, { journal: { head, lastSignedRoot: 'ab', keyId: 'k' } });

interface Harness {
  readonly resumer: TurnResumer;
  readonly calls: string[];
  readonly outcomes: ResumedOutcome[];
  inFlight: number;
  maxInFlight: number;
}

function harness(
  over: Partial<TurnResumerOptions> & {
    heads?: Record<string, number>;
    answer?: (uid: string, call: number) => Promise<ResumedTurn[]>;
  } = {},
): Harness {
  const { heads = {}, answer = () => Promise.resolve([]), ...options } = over;
  const h: Harness = {
    resumer: undefined as unknown as TurnResumer,
    calls: [],
    outcomes: [],
    inFlight: 0,
    maxInFlight: 0,
  };
  const self = h as { resumer: TurnResumer };
  self.resumer = new TurnResumer({
    conversations: { byUid: (uid) => (uid === 'missing' ? undefined : settledAt(10)) },
    state: {
      head: (partition) => Promise.resolve({ head: heads[partition.replace(/^conv-/u, '')] ?? 10 }),
    },
    resume: async (uid) => {
      h.calls.push(uid);
      h.inFlight += 1;
      h.maxInFlight = Math.max(h.maxInFlight, h.inFlight);
      try {
        return await answer(uid, h.calls.filter((c) => c === uid).length);
      } finally {
        h.inFlight -= 1;
      }
    },
    logger: pino({ level: 'silent' }),
    retryBaseMs: 5,
    onResumed: (outcome) => h.outcomes.push(outcome),
    ...options,
  });
  return h;
}
const done = (outcome: ResumedOutcome): ResumedTurn[] => [{ turnId: 't', attempt: 2, outcome }];

describe('TurnResumer', () => {
  it('reads only a conversation whose journal grew past its checkpoint, and reports each resumed turn', async () => {
    const h = harness({ heads: { grown: 14 }, answer: () => Promise.resolve(done('complete')) });
    h.resumer.wake('settled');
    h.resumer.wake('grown');
    h.resumer.wake('missing');
    await h.resumer.settled();
    expect(h.calls).toEqual(['grown']);
    expect(h.outcomes).toEqual(['complete']);
  });

  it('looks at a conversation once however often it is woken meanwhile, and a few at a time', async () => {
    let release = (): void => undefined;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const heads = Object.fromEntries(['a', 'b', 'c', 'd', 'e'].map((u) => [u, 11]));
    const h = harness({ heads, concurrency: 2, answer: () => gate.then(() => []) });
    for (const uid of ['a', 'a', 'b', 'c', 'a', 'd', 'e']) h.resumer.wake(uid);
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(h.inFlight).toBe(2);
    release();
    await h.resumer.settled();
    expect([...h.calls].sort()).toEqual(['a', 'b', 'c', 'd', 'e']);
    expect(h.maxInFlight).toBe(2);
  });

  it('leaves a conversation another replica holds to it, without retrying', async () => {
    const busy = new AppError('unavailable', 'replica x holds it', {
      details: { holder: 'x', retryAfterMs: 10, forwardTo: 'x' },
    });
    const h = harness({ heads: { held: 11 }, answer: () => Promise.reject(busy) });
    h.resumer.wake('held');
    await h.resumer.settled();
    expect(h.calls).toEqual(['held']);
  });

  it('retries a turn interrupted again, and a failure worth a retry, a bounded number of times', async () => {
    const h = harness({
      heads: { flaky: 11, down: 11 },
      attempts: 3,
      answer: (uid, call) =>
        uid === 'down'
          ? Promise.reject(new AppError('unavailable', 'the state plane is away'))
          : Promise.resolve(done(call < 2 ? 'orphaned' : 'complete')),
    });
    h.resumer.wake('flaky');
    h.resumer.wake('down');
    await h.resumer.settled();
    expect(h.calls.filter((c) => c === 'flaky')).toHaveLength(2);
    expect(h.calls.filter((c) => c === 'down')).toHaveLength(3);
    expect(h.outcomes).toEqual(['orphaned', 'complete']);
  });

  it('does not retry a refusal that a retry would get again', async () => {
    const h = harness({
      heads: { refused: 11 },
      answer: () => Promise.reject(new AppError('failed_precondition', 'journal rolled back')),
    });
    h.resumer.wake('refused');
    await h.resumer.settled();
    expect(h.calls).toEqual(['refused']);
  });

  it('takes no wake after close', async () => {
    const h = harness({ heads: { late: 11 } });
    h.resumer.close();
    h.resumer.wake('late');
    await h.resumer.settled();
    expect(h.calls).toEqual([]);
  });
});
