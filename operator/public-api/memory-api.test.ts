/**
 * Memory through the public API (docs/api.md, "Memory"), over the real coordinator and the
 * real harness with the scripted model: the agent's `memory` tool commits `memory_set`
 * before the turn's answer, the next turn's request carries it, people read and clear it
 * by the transcript's table, and a clear records who asked.
 */
import { afterEach, describe, expect, it } from '@jest/globals';
import { decodePayload } from '../../common/event-kinds';
import { partitionOf } from '../../common/partition-name';
import {
  ADMIN,
  ALICE,
  call,
  errorOf,
  startApi,
  TOKENS,
  type TestApi,
} from '../../test/support/api-fixtures';
import { memoryReply, textReply } from '../../test/support/real-turns';
import type { Caller } from '../turns/turn-service';

let api: TestApi | undefined;

afterEach(async () => {
  await api?.close();
  api = undefined;
});

const SPEC = { tools: { builtin: ['memory'] } };

/** A conversation of Alice's where turn one kept `city` = Lisbon. */
async function remembered(extraReplies: ReturnType<typeof textReply>[] = []): Promise<{
  a: TestApi;
  id: string;
}> {
  const a = (api = await startApi({
    spec: SPEC,
    replies: [
      memoryReply({ action: 'set', key: 'city', value: 'Lisbon' }),
      textReply('noted'),
      ...extraReplies,
    ],
  }));
  const id = a.seed(ALICE.identity);
  const first = await call(a, 'POST', `/v1/conversations/${id}/messages`, {
    token: TOKENS.alice,
    body: { text: 'I live in Lisbon; remember it' },
  });
  expect(first.status).toBe(200);
  expect(first.json).toMatchObject({ status: 'complete', reply: 'noted' });
  return { a, id };
}

async function journal(a: TestApi, id: string) {
  return a.turns.journal.entries(partitionOf(id));
}

describe('memory: the agent keeps a fact across turns', () => {
  it('commits memory_set between the tool_call and its tool_result, before turn_complete, and the next request carries it', async () => {
    const { a, id } = await remembered([textReply('you live in Lisbon')]);
    const kinds = (await journal(a, id)).map((e) => e.kind).filter((k) => k !== 'signed_root');
    const at = (kind: string) => kinds.indexOf(kind);
    expect(at('tool_call')).toBeLessThan(at('memory_set'));
    expect(at('memory_set')).toBeLessThan(at('tool_result'));
    expect(at('tool_result')).toBeLessThan(at('turn_complete'));
    const set = (await journal(a, id)).find((e) => e.kind === 'memory_set');
    expect(set && decodePayload('memory_set', set.payload)).toMatchObject({
      key: 'city',
      value: 'Lisbon',
      toolCallId: 'toolu_mem_1',
      attribution: { caller: ALICE.identity },
    });

    const second = await call(a, 'POST', `/v1/conversations/${id}/messages`, {
      token: TOKENS.alice,
      body: { text: 'where do I live?' },
    });
    expect(second.json).toMatchObject({ reply: 'you live in Lisbon' });
    const requests = a.turns.harness.model.requests;
    // Turn one's requests had no memory yet; turn two's carries the block after the prompt.
    expect(requests[0]?.system).toBe('You are a test agent.');
    // The fixed block (docs/turns.md, "Memory"): the header line, then one JSON line an entry.
    const system = requests.at(-1)?.system ?? '';
    expect(system.startsWith('You are a test agent.\n\nMemory: facts you kept')).toBe(true);
    expect(system.endsWith('\n{"key":"city","value":"Lisbon"}')).toBe(true);

    const read = await call(a, 'GET', `/v1/conversations/${id}/memory`, { token: TOKENS.alice });
    expect(read.status).toBe(200);
    expect(read.json).toMatchObject({
      conversationId: id,
      entries: [
        {
          key: 'city',
          value: 'Lisbon',
          position: set?.position,
          toolCallId: 'toolu_mem_1',
          turnId: expect.stringMatching(/^turn_/u),
        },
      ],
    });
  });

  it('gives the model an error result for a bad call and commits nothing', async () => {
    const a = (api = await startApi({
      spec: SPEC,
      replies: [memoryReply({ action: 'set', key: 'x'.repeat(200), value: 'v' }), textReply('ok')],
    }));
    const id = a.seed(ALICE.identity);
    await call(a, 'POST', `/v1/conversations/${id}/messages`, {
      token: TOKENS.alice,
      body: { text: 'remember' },
    });
    const entries = await journal(a, id);
    expect(entries.map((e) => e.kind)).not.toContain('memory_set');
    const result = entries.find((e) => e.kind === 'tool_result');
    expect(result && decodePayload('tool_result', result.payload)).toMatchObject({
      isError: true,
      content: expect.stringContaining('longer than 128 bytes'),
    });
  });
});

describe('memory: who may read and clear it (the transcript table)', () => {
  it('refuses another member both reading and clearing, and commits nothing', async () => {
    const { a, id } = await remembered();
    const head = a.head(id);
    const read = await call(a, 'GET', `/v1/conversations/${id}/memory`, { token: TOKENS.bob });
    expect(read.status).toBe(403);
    for (const path of [`/v1/conversations/${id}/memory`, `/v1/conversations/${id}/memory/city`]) {
      const clear = await call(a, 'DELETE', path, { token: TOKENS.bob, body: {} });
      expect(clear.status).toBe(403);
      expect(errorOf(clear).code).toBe('permission_denied');
    }
    expect(a.head(id)).toBe(head);
    // An admin reads it, as an admin reads the transcript.
    const admin = await call(a, 'GET', `/v1/conversations/${id}/memory`, { token: TOKENS.admin });
    expect(admin.status).toBe(200);
  });

  it('refuses a Kubernetes reader (get on conversations/memory) a clear, and commits nothing', async () => {
    const { a, id } = await remembered();
    const head = a.head(id);
    const reader = (verb: string): Caller => ({
      identity: 'kubernetes:auditor',
      identities: ['kubernetes:auditor'],
      personaId: '',
      roles: [],
      sessionId: '',
      kubernetes: { conversationId: id, subresource: 'memory', verb, groups: [] },
    });
    const signal = new AbortController().signal;
    const view = await a.turns.coordinator.memory(reader('get'), id, signal);
    expect(view.entries.map((e) => e.key)).toEqual(['city']);
    await expect(
      a.turns.coordinator.clearMemory(reader('get'), { conversationId: id }, signal),
    ).rejects.toMatchObject({ code: 'permission_denied' });
    expect(a.head(id)).toBe(head);
    // With delete on conversations/memory the same caller may.
    const cleared = await a.turns.coordinator.clearMemory(
      reader('delete'),
      { conversationId: id },
      signal,
    );
    expect(cleared.cleared).toEqual(['city']);
  });

  it('records a clear as memory_cleared naming who asked and the positions it takes out', async () => {
    const { a, id } = await remembered();
    const set = (await journal(a, id)).find((e) => e.kind === 'memory_set');
    const answer = await call(a, 'DELETE', `/v1/conversations/${id}/memory/city`, {
      token: TOKENS.alice,
      body: {},
    });
    expect(answer.status).toBe(200);
    expect(answer.json).toMatchObject({
      conversationId: id,
      key: 'city',
      cleared: ['city'],
      clearedBy: ALICE.identity,
      erasedPositions: [set?.position],
    });
    // The clear erased the memory_set in its batch.
    const entries = await journal(a, id);
    expect(entries[set?.position ?? -1]).toMatchObject({ kind: '', excised: true });
    const cleared = entries.filter((e) => e.kind === 'memory_cleared');
    expect(cleared).toHaveLength(1);
    expect(cleared[0] && decodePayload('memory_cleared', cleared[0].payload)).toMatchObject({
      key: 'city',
      setPositions: [set?.position],
      attribution: { caller: ALICE.identity, persona: ALICE.personaId, session: ALICE.sessionId },
    });
    const read = await call(a, 'GET', `/v1/conversations/${id}/memory`, { token: TOKENS.alice });
    expect(read.json).toMatchObject({ entries: [] });
    // Nothing left to clear: nothing is committed.
    const head = a.head(id);
    const again = await call(a, 'DELETE', `/v1/conversations/${id}/memory`, {
      token: TOKENS.admin,
      body: {},
    });
    expect(again.json).toMatchObject({ cleared: [], clearedBy: ADMIN.identity });
    expect(a.head(id)).toBe(head);
  });

  it('a memory_set an admin erased is out of memory too: a clear then finds nothing to take out', async () => {
    const { a, id } = await remembered();
    const set = (await journal(a, id)).find((e) => e.kind === 'memory_set');
    // As `conversation erase` does: holding the conversation, under its lease.
    const conversation = a.turns.conversations.byUid(id)!;
    await a.turns.coordinator.exclusive(conversation, AbortSignal.timeout(10_000), (lease) =>
      a.turns.journal.store.erase(partitionOf(id), {
        positions: [set?.position ?? -1],
        actor: ADMIN.identity,
        reason: 'erasure request 3',
        fencingToken: lease.fencingToken,
      }),
    );
    const read = await call(a, 'GET', `/v1/conversations/${id}/memory`, { token: TOKENS.alice });
    expect(read.json).toMatchObject({ entries: [] });
    const head = a.head(id);
    const answer = await call(a, 'DELETE', `/v1/conversations/${id}/memory`, {
      token: TOKENS.alice,
      body: {},
    });
    expect(answer.status).toBe(200);
    expect(answer.json).toMatchObject({ cleared: [] });
    expect(a.head(id)).toBe(head);
  });

  it('refuses a key that cannot be a memory key, and a DELETE not declared JSON', async () => {
    const { a, id } = await remembered();
    const bad = await call(a, 'DELETE', `/v1/conversations/${id}/memory/%20city`, {
      token: TOKENS.alice,
      body: {},
    });
    expect(bad.status).toBe(400);
    expect(String(errorOf(bad).message)).toMatch(
      /memory key: the key starts or ends with a space/u,
    );
    const head = a.head(id);
    const notJson = await call(a, 'DELETE', `/v1/conversations/${id}/memory`, {
      token: TOKENS.alice,
      rawBody: '',
      headers: { 'content-type': 'text/plain' },
    });
    expect(notJson.status).toBe(415);
    expect(a.head(id)).toBe(head);
  });
});
