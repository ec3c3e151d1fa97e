/**
 * Replay against journals the real stack wrote (test/support/real-turns.ts: the real
 * coordinator, the real harness over gRPC with the scripted model, the real journal
 * store). Replay itself calls no model and no tool: it has none to call.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import pino from 'pino';
import { decodePayload, encodePayload } from '../../common/event-kinds';
import type { JournalEntry } from '../../common/state-journal';
import { ResolveDecision } from '../../proto/gen/polychrome/events/v1/events';
import { readyStatus } from '../../test/support/in-memory-conversations';
import {
  recordApprovedTurns,
  startRealTurns,
  TEST_CONVERSATION_SPEC,
  TEST_OWNER,
  textReply,
  type RealTurns,
} from '../../test/support/real-turns';
import { nodeEd25519Verifier } from '../crypto/node-ed25519';
import { requestIds } from '../../common/request-ids';
import { type ReplayEntry } from './journal-turns';
import { replayJournal } from './replay';
import { type JournalReplay } from './replay-verdict';

let turns: RealTurns;
let entries: JournalEntry[];
let partition = '';

beforeAll(async () => {
  ({ turns, entries, partition } = await recordApprovedTurns(pino({ level: 'silent' })));
}, 60_000);

afterAll(async () => {
  await turns.close();
});

function replay(journal: readonly ReplayEntry[], key = turns.approvals.publicKey): JournalReplay {
  return replayJournal(journal, {
    ids: requestIds,
    verifier: nodeEd25519Verifier,
    approvalPublicKey: key,
  });
}

/** The journal with the payload at the first event of `kind` (after `skip` of them) rewritten. */
function tampered<K extends 'model_call' | 'tool_result' | 'approval_response'>(
  kind: K,
  change: (payload: ReturnType<typeof decodePayload<K>>) => void,
  skip = 0,
): ReplayEntry[] {
  let seen = 0;
  return entries.map((entry) => {
    if (entry.kind !== kind || seen++ !== skip) return entry;
    const payload = decodePayload(kind, entry.payload);
    change(payload);
    return { ...entry, payload: encodePayload(kind, payload) };
  });
}

describe('replayJournal on a journal the real stack wrote', () => {
  it('recorded the configuration once and a request digest on every model call', () => {
    const kinds = entries.map((e) => e.kind);
    expect(kinds.filter((k) => k === 'agent_config')).toHaveLength(1);
    const calls = entries.filter((e) => e.kind === 'model_call');
    expect(calls).toHaveLength(3);
    for (const call of calls) {
      expect(decodePayload('model_call', call.payload).requestSha256).toHaveLength(32);
    }
  });

  it('replays every turn ok in full mode, with the transcript, and writes nothing', async () => {
    const headBefore = entries.length;
    const result = replay(entries);
    expect(result.divergence).toBeUndefined();
    expect(result.ok).toBe(true);
    expect(result.turns.map((t) => [t.status, t.mode, t.ok, t.attempts])).toEqual([
      ['complete', 'full', true, 2],
      ['complete', 'full', true, 1],
    ]);
    expect(result.turns[0]?.transcript).toEqual([
      { type: 'user', text: 'what is 6 * 7?' },
      { type: 'approval', toolName: 'calculator', decision: 'approved' },
      { type: 'tool_call', name: 'calculator', argsJson: '{"expression":"6 * 7"}' },
      { type: 'tool_result', content: '42', isError: false },
      { type: 'assistant', text: 'It is 42.' },
    ]);
    expect(await turns.journal.entries(partition)).toHaveLength(headBefore);
    // The model was called three times by the turns and never by replay.
    expect(turns.harness.model.callCount).toBe(3);
  });

  it('finds a changed tool result at the next model call, whose request no longer follows', () => {
    const result = replay(tampered('tool_result', (p) => (p.content = '41')));
    expect(result.ok).toBe(false);
    expect(result.divergence).toMatchObject({ turnId: result.turns[0]?.turnId, step: 2 });
    expect(result.divergence?.expected).toContain('request_sha256');
    expect(result.divergence?.found).toContain('model_call');
    expect(result.turns[1]?.ok).toBe(true);
  });

  it('finds a changed model output where the recorded run stops following from it', () => {
    const result = replay(
      tampered(
        'model_call',
        (p) => {
          p.content = [{ block: { $case: 'text', value: 'It is 43.' } }];
        },
        1,
      ),
    );
    expect(result.divergence).toMatchObject({ step: 2 });
    expect(result.divergence?.expected).toContain('It is 43.');
    expect(result.divergence?.found).toContain('turn_complete');
  });

  it('finds a changed tool call argument in the model output at the approval request', () => {
    const result = replay(
      tampered('model_call', (p) => {
        const block = p.content[0]?.block;
        if (block?.$case === 'toolUse') block.value.argsJson = '{"expression":"6 * 8"}';
      }),
    );
    expect(result.divergence).toMatchObject({ step: 1 });
    expect(result.divergence?.expected).toContain('6 * 8');
    expect(result.divergence?.found).toContain('approval_request');
  });

  it('finds an approval whose signed answer does not match: the call could not have run', () => {
    const result = replay(
      tampered('approval_response', (p) => {
        p.signature = Buffer.alloc(64, 1);
      }),
    );
    expect(result.ok).toBe(false);
    expect(result.divergence?.expected).toContain('approval_request');
    expect(result.divergence?.found).toContain('tool_call');
  });

  it('finds an answer signed by another key the same way', () => {
    const result = replay(entries, new Uint8Array(32).fill(9));
    expect(result.divergence?.found).toContain('tool_call');
  });

  it('reports an orphaned turn as such, and checks the steps it has', () => {
    const result = entries.findIndex((e) => e.kind === 'tool_result');
    const cut = entries.findIndex((e, i) => i > result && e.kind === 'model_call');
    const orphan = replay(entries.slice(0, cut));
    expect(orphan.turns[0]).toMatchObject({ status: 'orphaned', ok: true });
  });

  it('reports a quarantined turn as such', () => {
    const last = entries.findIndex((e) => e.kind === 'turn_complete');
    const turnId = decodePayload(
      'turn_complete',
      entries[last]?.payload ?? new Uint8Array(),
    ).turnId;
    const quarantined = entries.slice(0, last - 1).concat([
      {
        position: last - 1,
        kind: 'turn_ambiguous',
        payload: encodePayload('turn_ambiguous', {
          turnId,
          toolCallId: '',
          reason: 'the harness sent what this turn cannot have produced',
          detectedAtMs: 1,
        }),
      },
    ]);
    const result = replay(quarantined);
    expect(result.turns[0]).toMatchObject({
      status: 'quarantined',
      ok: true,
      note: 'the harness sent what this turn cannot have produced',
    });
  });

  it('reports a quarantine an admin resolved as resolved, with no note, until it runs again', () => {
    const last = entries.findIndex((e) => e.kind === 'turn_complete');
    const turnId = decodePayload(
      'turn_complete',
      entries[last]?.payload ?? new Uint8Array(),
    ).turnId;
    const event = (position: number, kind: 'turn_ambiguous' | 'turn_resolved'): ReplayEntry => ({
      position,
      kind,
      payload:
        kind === 'turn_ambiguous'
          ? encodePayload(kind, {
              turnId,
              toolCallId: '',
              reason: 'the harness sent what this turn cannot have produced',
              detectedAtMs: 1,
            })
          : encodePayload(kind, {
              turnId,
              decision: ResolveDecision.RESOLVE_DECISION_DID_NOT_RUN,
              toolCallId: '',
              result: '',
              resultUnknown: false,
              actor: 'web:admin',
              caller: 'web:admin',
              resolvedAtMs: 2,
              quarantinePosition: last - 1,
              session: '',
            }),
    });
    const resolved = entries
      .slice(0, last - 1)
      .concat([event(last - 1, 'turn_ambiguous'), event(last, 'turn_resolved')]);
    const result = replay(resolved);
    expect(result.turns[0]).toMatchObject({ status: 'resolved', ok: true });
    expect(result.turns[0]?.note).toBeUndefined();
    expect(result.turns[0]?.resolutions).toEqual([
      {
        position: last,
        decision: 'did_not_run',
        toolCallId: '',
        resultUnknown: false,
        actor: 'web:admin',
        caller: 'web:admin',
      },
    ]);
  });

  it('replays a journal without configurations in the weak mode, which says so', () => {
    const old = entries
      .filter((e) => e.kind !== 'agent_config')
      .map((e) => {
        if (e.kind !== 'model_call') return e;
        const p = decodePayload('model_call', e.payload);
        p.configSha256 = Buffer.alloc(0);
        p.requestSha256 = Buffer.alloc(0);
        return { ...e, payload: encodePayload('model_call', p) };
      });
    const result = replay(old);
    expect(result.turns.map((t) => t.mode)).toEqual(['weak', 'weak']);
    expect(result.ok).toBe(true);
  });
});

describe('replayJournal of turns given a window of their history', () => {
  const reply = (n: number): string => `reply ${n} `.padEnd(500, '.');
  let windowed: RealTurns;
  let journal: JournalEntry[] = [];

  beforeAll(async () => {
    // 256 estimated tokens hold one earlier turn of a short question and a 500-byte reply
    // (7 + 129 tokens), not two.
    windowed = await startRealTurns({
      replies: [1, 2, 3, 4].map((n) => textReply(reply(n))),
      logger: pino({ level: 'silent' }),
      spec: { agent: { ...TEST_CONVERSATION_SPEC.agent, historyTokens: 256 } },
    });
    const conversation = windowed.conversations.add(
      { owner: TEST_OWNER.identity },
      { status: readyStatus(windowed.harness.endpoint) },
    );
    const conversationId = conversation.metadata.uid ?? '';
    for (const n of [1, 2, 3, 4]) {
      const done = await windowed.coordinator.postMessage(
        TEST_OWNER,
        { conversationId, text: `question ${n}`, idempotencyKey: `k${n}` },
        AbortSignal.timeout(20_000),
      );
      if (done.status !== 'complete') throw new Error(`turn ${n} ended ${done.status}`);
    }
    journal = await windowed.journal.entries(`conv-${conversationId}`);
  }, 60_000);

  afterAll(async () => {
    await windowed?.close();
  });

  const dispatches = (): { position: number; historyFrom: number }[] =>
    journal
      .filter((e) => e.kind === 'turn_dispatched')
      .map((e) => ({ position: e.position, ...decodePayload('turn_dispatched', e.payload) }));

  it('the model was given the window the dispatch recorded, not the whole history', () => {
    const requests = windowed.harness.model.requests;
    expect(requests.map((r) => r.messages.length)).toEqual([1, 3, 3, 3]);
    const messages = journal.filter((e) => e.kind === 'message_received');
    expect(dispatches().map((d) => d.historyFrom)).toEqual([
      0,
      0,
      messages[1]?.position,
      messages[2]?.position,
    ]);
    expect(requests[3]?.messages[0]?.content).toEqual([{ type: 'text', text: 'question 3' }]);
  });

  it('replays ok: each request follows from the window its dispatch records', () => {
    const result = replay(journal, windowed.approvals.publicKey);
    expect(result.turns.map((t) => [t.mode, t.ok])).toEqual(Array(4).fill(['full', true]));
  });

  it('a dispatch whose recorded window was widened no longer explains its request', () => {
    const last = dispatches().at(-1)?.position;
    const widened = journal.map((entry) => {
      if (entry.position !== last) return entry;
      const payload = decodePayload('turn_dispatched', entry.payload);
      return {
        ...entry,
        payload: encodePayload('turn_dispatched', { ...payload, historyFrom: 0 }),
      };
    });
    const result = replay(widened, windowed.approvals.publicKey);
    expect(result.turns.map((t) => t.ok)).toEqual([true, true, true, false]);
    expect(result.divergence?.turnId).toBe(result.turns[3]?.turnId);
  });
});
