/**
 * Resolving a quarantined turn on the real coordinator over in-memory ports
 * (test/support/real-turns.ts), with the real harness: a side-effecting test tool whose
 * first call breaks mid-call (its outcome unknown, so the harness quarantines the turn, as
 * a dropped MCP connection would), then an admin settles it (docs/turns.md, "Resolving a
 * quarantined turn").
 */
import { afterEach, describe, expect, it } from '@jest/globals';
import pino from 'pino';
import { decodePayload } from '../../common/event-kinds';
import { ResolveDecision } from '../../proto/gen/polychrome/events/v1/events';
import {
  startRealTurns,
  textReply,
  transferReply,
  unknownFirstTransfer,
  waitFor,
  type RealTurns,
} from '../../test/support/real-turns';
import { lifecycleEvents } from '../controller/lifecycle-events';
import { UNKNOWN_RESULT_TEXT } from './plan-resolve';
import type { Caller, ResolveTurn } from './turn-service';

const OWNER: Caller = {
  identity: 'web:owner',
  identities: ['web:owner'],
  personaId: 'p-owner',
  roles: ['member'],
  sessionId: 's',
};
const ADMIN: Caller = {
  identity: 'web:admin',
  identities: ['web:admin', 'slack:T1:admin'],
  personaId: 'p-admin',
  roles: ['admin'],
  sessionId: 's-admin',
};
const EDGE: Caller = { ...OWNER, identity: 'bot:edge', identities: ['bot:edge'], roles: ['edge'] };
const PARTICIPANT: Caller = { ...OWNER, identity: 'web:bob', identities: ['web:bob'] };

let turns: RealTurns | undefined;
afterEach(async () => {
  await turns?.close();
  turns = undefined;
});

/**
 * A conversation whose agent calls `transfer` (side-effecting) first: the call breaks
 * mid-call, so the turn is quarantined. `outcomes` answer the later calls, in order.
 */
async function quarantined(
  replies: Parameters<typeof startRealTurns>[0]['replies'],
  outcomes: { content: string; isError: boolean }[],
) {
  const { extraTools, calls } = unknownFirstTransfer(outcomes);
  turns = await startRealTurns({
    replies: [transferReply, ...replies],
    logger: pino({ level: 'silent' }),
    spec: { tools: { builtin: ['transfer'] } },
    extraTools,
  });
  const real = turns;
  const uid = real.conversations.add({ owner: OWNER.identity, participants: ['web:bob'] }).metadata
    .uid!;
  const signal = AbortSignal.timeout(20_000);
  const request = { conversationId: uid, text: 'pay 42', idempotencyKey: 'k1' };
  const reply = await real.coordinator.postMessage(OWNER, request, signal);
  expect(reply).toMatchObject({ status: 'ambiguous', ambiguous: { toolCallId: 'toolu_pay' } });
  await waitFor(() => real.conversations.byUid(uid)?.status?.turns?.quarantined?.turnId);
  const entries = () => real.journal.entries(`conv-${uid}`);
  return {
    uid,
    turnId: reply.turnId,
    request,
    signal,
    calls,
    kinds: async () => (await entries()).map((e) => e.kind),
    entries,
    resolve: (caller: Caller, over: Partial<ResolveTurn> = {}) =>
      real.coordinator.resolveTurn(
        caller,
        {
          conversationId: uid,
          turnId: reply.turnId,
          actor: caller.identity,
          decision: { kind: 'did_not_run' },
          ...over,
        },
        signal,
      ),
  };
}

function degradedReason(
  status: { conditions?: { type: string; status: string; reason?: string }[] } | undefined,
): string | undefined {
  const degraded = status?.conditions?.find((c) => c.type === 'Degraded');
  return degraded?.status === 'True' ? degraded.reason : undefined;
}

describe('resolving a quarantined turn on the real coordinator', () => {
  it('refuses everyone but an admin acting as themselves, and a turn of another conversation, committing nothing', async () => {
    const q = await quarantined([], []);
    const before = await q.kinds();
    for (const who of [OWNER, PARTICIPANT, EDGE]) {
      await expect(q.resolve(who)).rejects.toMatchObject({ code: 'permission_denied' });
    }
    await expect(q.resolve(ADMIN, { actor: OWNER.identity })).rejects.toMatchObject({
      code: 'permission_denied',
      message: expect.stringContaining('is not one of your identities') as unknown,
    });
    const other = turns!.conversations.add({ owner: OWNER.identity }).metadata.uid!;
    await expect(q.resolve(ADMIN, { conversationId: other })).rejects.toMatchObject({
      code: 'conflict',
      message: expect.stringContaining(`is not in conversation ${other}'s journal`) as unknown,
    });
    await expect(q.resolve(ADMIN, { conversationId: 'no-such-uid' })).rejects.toMatchObject({
      code: 'not_found',
    });
    expect(await q.kinds()).toEqual(before);
    expect(await turns!.journal.entries(`conv-${other}`)).toEqual([]);
    expect(turns!.conversations.byUid(q.uid)?.status?.turns?.quarantined?.turnId).toBe(q.turnId);
  });

  it('did_not_run: recorded with who; Degraded clears; the retry of the request runs the call again under the turn id and completes', async () => {
    const q = await quarantined([textReply('sent 42')], [{ content: 'ok', isError: false }]);
    const degradedStatus = turns!.conversations.byUid(q.uid)?.status;
    expect(degradedReason(degradedStatus)).toBe('TurnAmbiguous');
    const before = await q.kinds();
    const answer = await q.resolve(ADMIN, { actor: 'slack:T1:admin' });
    expect(answer).toMatchObject({
      conversationId: q.uid,
      turnId: q.turnId,
      decision: 'did_not_run',
      resultUnknown: false,
      actor: 'slack:T1:admin',
      position: before.length,
    });
    expect((await q.kinds()).slice(before.length)).toEqual(['turn_resolved', 'signed_root']);
    const resolved = (await q.entries()).find((e) => e.kind === 'turn_resolved')!;
    expect(decodePayload('turn_resolved', resolved.payload)).toMatchObject({
      turnId: q.turnId,
      decision: ResolveDecision.RESOLVE_DECISION_DID_NOT_RUN,
      toolCallId: 'toolu_pay',
      actor: 'slack:T1:admin',
      caller: ADMIN.identity,
      quarantinePosition: before.indexOf('turn_ambiguous'),
    });
    // The quarantine leaves the status, Degraded clears and the lifecycle Event says so.
    const cleared = await waitFor(() => {
      const status = turns!.conversations.byUid(q.uid)?.status;
      return status?.turns?.quarantined === undefined ? status : undefined;
    });
    expect(degradedReason(cleared)).toBeUndefined();
    const events = lifecycleEvents({
      conversation: turns!.conversations.byUid(q.uid)!,
      previous: degradedStatus,
      next: cleared,
      completed: [],
    });
    expect(events.map((e) => e.reason)).toContain('QuarantineResolved');
    // Resolving twice: 409, nothing committed.
    const head = (await q.kinds()).length;
    await expect(q.resolve(ADMIN)).rejects.toMatchObject({
      code: 'conflict',
      message: expect.stringContaining(
        'already resolved (did_not_run, by slack:T1:admin)',
      ) as unknown,
    });
    expect((await q.kinds()).length).toBe(head);
    // The retry of the original request recovers the turn as an orphan, under its id.
    const reply = await turns!.coordinator.postMessage(OWNER, q.request, q.signal);
    expect(reply).toMatchObject({ turnId: q.turnId, status: 'complete', reply: 'sent 42' });
    expect(q.calls).toEqual(['toolu_pay', 'toolu_pay']);
    const kinds = await q.kinds();
    expect(kinds.filter((k) => k === 'message_received')).toHaveLength(1);
    expect(kinds.filter((k) => k === 'tool_call')).toHaveLength(2);
    expect(kinds.filter((k) => k === 'tool_result')).toHaveLength(1);
    expect(kinds.filter((k) => k === 'turn_complete')).toHaveLength(1);
  });

  it.each([
    ['with its result', 'receipt R-42', 'receipt R-42', false],
    ['with its result unknown', undefined, UNKNOWN_RESULT_TEXT, true],
  ])(
    'ran %s: the result is the call’s tool_result, the call never runs again, and the next message finishes the turn first',
    async (_name, result, content, isError) => {
      const q = await quarantined([textReply('refund done'), textReply('next one')], []);
      const answer = await q.resolve(ADMIN, { decision: { kind: 'ran', result } });
      expect(answer).toMatchObject({ decision: 'ran', resultUnknown: isError });
      const results = (await q.entries()).filter((e) => e.kind === 'tool_result');
      expect(results.map((e) => decodePayload('tool_result', e.payload))).toEqual([
        {
          turnId: q.turnId,
          toolCallId: 'toolu_pay',
          content,
          isError,
          denied: false,
          thread: '',
          delegate: '',
        },
      ]);
      const next = await turns!.coordinator.postMessage(
        OWNER,
        { conversationId: q.uid, text: 'and now?', idempotencyKey: 'k2' },
        q.signal,
      );
      expect(next).toMatchObject({ status: 'complete', reply: 'next one' });
      expect(q.calls).toEqual(['toolu_pay']);
      // The model was told the result the admin recorded, as the call's tool_result.
      const told = JSON.stringify(turns!.harness.model.requests[1]?.messages.at(-1));
      expect(told).toContain(JSON.stringify(content).slice(1, -1));
      const transcript = await turns!.coordinator.transcript(OWNER, q.uid, q.signal);
      expect(transcript.turns.map((t) => [t.turnId, t.status, t.reply])).toEqual([
        [q.turnId, 'complete', 'refund done'],
        [next.turnId, 'complete', 'next one'],
      ]);
    },
  );
});
