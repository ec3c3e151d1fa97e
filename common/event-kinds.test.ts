import { describe, expect, it } from '@jest/globals';
import { decodePayload, encodePayload, EventKind, isEventKind, payloadCodecs } from './event-kinds';

describe('event kinds', () => {
  it('has a codec for every kind in docs/design.md plus key rotation, agent_config, excision, request_cancelled, approval_expired, turn_resolved, rollback_accepted, summary, agent_handoff, agent_roster, payment_sent and payment_policy', () => {
    expect(Object.keys(payloadCodecs).sort()).toEqual(Object.values(EventKind).sort());
    expect(Object.values(EventKind)).toHaveLength(32);
  });

  it('round-trips a payload through its codec', () => {
    const bytes = encodePayload('turn_complete', {
      turnId: 't-1',
      text: 'hello',
      steps: 2,
      completedAtMs: 1_700_000_000_000,
      fallback: false,
    });
    expect(decodePayload('turn_complete', bytes)).toEqual({
      turnId: 't-1',
      text: 'hello',
      steps: 2,
      completedAtMs: 1_700_000_000_000,
      fallback: false,
    });
  });

  it('rejects kinds that are not in the table', () => {
    expect(isEventKind('turn_complete')).toBe(true);
    expect(isEventKind('turn_completed')).toBe(false);
    expect(isEventKind(7)).toBe(false);
  });
});
