import { describe, expect, it } from '@jest/globals';

import { isAppError } from '../../common/errors';
import { payloadCodecs, type EventKind, type EventPayloads } from '../../common/event-kinds';
import type { JournalEntry } from '../../common/state-journal';
import { foldJournal } from '../turns/journal-view';
import { checkErasable } from './erasure-check';

/*
 * The control plane's own erasure rule (erasure-check.ts): only entries of settled turns,
 * never a fallback answer; the state plane checks the rest.
 */

function entry<K extends EventKind>(
  position: number,
  kind: K,
  payload: Partial<EventPayloads[K]>,
): JournalEntry {
  const codec = payloadCodecs[kind];
  return { position, kind, payload: codec.encode(codec.fromPartial(payload)).finish() };
}

const journal = [
  entry(0, 'message_received', { turnId: 'done', idempotencyKey: 'k0', text: 'a' }),
  entry(1, 'turn_dispatched', { turnId: 'done', attempt: 1 }),
  entry(2, 'turn_complete', { turnId: 'done', text: 'b' }),
  entry(3, 'message_received', { turnId: 'failed', idempotencyKey: 'k3', text: 'c' }),
  entry(4, 'turn_dispatched', { turnId: 'failed', attempt: 1 }),
  entry(5, 'turn_complete', { turnId: 'failed', text: 'sorry', fallback: true }),
  entry(6, 'message_received', { turnId: 'running', idempotencyKey: 'k6', text: 'd' }),
  entry(7, 'turn_dispatched', { turnId: 'running', attempt: 1 }),
  entry(8, 'tool_result', { turnId: 'running', toolCallId: 'c', content: 'e' }),
  entry(9, 'memory_set', { key: 'k', value: 'v' }),
];
const view = foldJournal(journal);

function refusal(positions: number[]): string | undefined {
  try {
    checkErasable('conv', view, positions);
    return undefined;
  } catch (error) {
    if (isAppError(error) && error.code === 'failed_precondition') return error.message;
    throw error;
  }
}

describe('checkErasable', () => {
  it('allows entries of a settled turn, the message of a failed one, and entries of no turn', () => {
    expect(refusal([0, 2, 3, 9])).toBeUndefined();
  });

  it('refuses an entry of a turn in flight, and a fallback answer, naming each', () => {
    const message = refusal([0, 5, 6, 8]);
    expect(message).toContain(
      'position 5 cannot be erased: it is the fallback answer of turn failed',
    );
    expect(message).toContain('position 6 cannot be erased: it belongs to turn running');
    expect(message).toContain('position 8 cannot be erased: it belongs to turn running');
    expect(message).not.toContain('position 0 cannot');
  });
});
