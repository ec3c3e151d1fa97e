import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { decodePayload } from '../../common/event-kinds';
import { echoResponder, MessagesApiServer } from '../support/messages-api-server';
import { polychrome } from './support/polychrome-cli';
import { apiCall, type ApiAnswer } from './support/public-api';
import { startTurnStack, type TurnStack } from './support/turn-stack';

// Memory end to end (docs/turns.md, "Memory"): the real control plane, state plane and
// harness processes, the Anthropic provider against the local Messages API server. The
// model calls the memory tool in one turn; the next turn's request to the model carries the
// fact; an owner's clear through the public API takes it out of the next request, and the
// journal records memory_cleared with who asked, and erases the memory_set in the same batch.
// Replay through the real CLI rebuilds every request it still can, memory included, and the
// export verifies with the erased position listed.

const FACT = '{"key":"city","value":"Lisbon"}';

describe('memory across turns (real processes, Messages API server)', () => {
  let stack: TurnStack;
  let messages: MessagesApiServer;
  let owner: string;
  let stranger: string;
  let admin: string;
  let uid: string;

  const post = (text: string, key: string): Promise<ApiAnswer> =>
    apiCall(stack.apiUrl, 'POST', `/v1/conversations/${uid}/messages`, {
      token: owner,
      body: { text, idempotencyKey: key },
    });
  /** The system prompt of the model request made after `from` requests. */
  const systemsSince = (from: number): string[] =>
    messages.requests.slice(from).map((r) => {
      const system: unknown = (r.body as { system?: unknown } | undefined)?.system;
      return typeof system === 'string' ? system : JSON.stringify(system ?? '');
    });

  beforeAll(async () => {
    messages = await MessagesApiServer.start({ respond: echoResponder });
    stack = await startTurnStack({ namespacePrefix: 'memory', messages });
    owner = await stack.mintToken('test:memory-owner');
    stranger = await stack.mintToken('test:memory-stranger');
    admin = await stack.mintToken('test:memory-admin', ['admin']);
    uid = await stack.createConversation('remembering', {
      owner: 'test:memory-owner',
      tools: { builtin: ['memory'] },
    });
  }, 180_000);
  afterAll(async () => {
    await stack?.stop();
    await messages?.close();
  });

  it('keeps a fact for the next turn, shows it, refuses a stranger, and a clear takes it out of the next request', async () => {
    await stack.withDiagnostics(async () => {
      const set = await post(
        'remember [[tool:memory {"action":"set","key":"city","value":"Lisbon"}]]',
        'k-1',
      );
      expect(set.body).toMatchObject({
        status: 'complete',
        reply: expect.stringContaining('tool memory said: kept "city" for later turns'),
      });
      const journal = await stack.journal(uid);
      const kinds = journal.map((e) => e.kind);
      expect(kinds.indexOf('memory_set')).toBeGreaterThan(kinds.indexOf('tool_call'));
      expect(kinds.indexOf('memory_set')).toBeLessThan(kinds.indexOf('turn_complete'));
      for (const system of systemsSince(0)) expect(system).not.toContain(FACT);

      const before = messages.requests.length;
      expect((await post('where do I live?', 'k-2')).body).toMatchObject({ status: 'complete' });
      const second = systemsSince(before);
      expect(second.length).toBeGreaterThan(0);
      for (const system of second) expect(system).toContain(FACT);

      const read = await apiCall(stack.apiUrl, 'GET', `/v1/conversations/${uid}/memory`, {
        token: owner,
      });
      expect(read.status).toBe(200);
      expect(read.body).toMatchObject({ entries: [{ key: 'city', value: 'Lisbon' }] });
      for (const [method, path] of [
        ['GET', `/v1/conversations/${uid}/memory`],
        ['DELETE', `/v1/conversations/${uid}/memory/city`],
      ] as const) {
        const body = method === 'DELETE' ? { body: {} } : {};
        const refused = await apiCall(stack.apiUrl, method, path, { token: stranger, ...body });
        expect(refused.status).toBe(403);
      }

      const cleared = await apiCall(
        stack.apiUrl,
        'DELETE',
        `/v1/conversations/${uid}/memory/city`,
        {
          token: owner,
          body: {},
        },
      );
      expect(cleared.status).toBe(200);
      const setAt = kinds.indexOf('memory_set');
      expect(cleared.body).toMatchObject({
        cleared: ['city'],
        clearedBy: 'test:memory-owner',
        erasedPositions: [setAt],
      });
      const afterClear = await stack.journal(uid);
      const event = afterClear.find((e) => e.kind === 'memory_cleared');
      expect(event && decodePayload('memory_cleared', event.payload)).toMatchObject({
        key: 'city',
        attribution: { caller: 'test:memory-owner' },
        setPositions: [setAt],
      });
      // The clear erased the memory_set in the same batch: excised, recorded by who asked.
      expect(afterClear[setAt]).toMatchObject({ kind: '', excised: true });
      const record = afterClear
        .filter((e) => e.kind === 'excision')
        .map((e) => decodePayload('excision', e.payload))
        .find((r) => r.position === setAt);
      expect(record).toMatchObject({
        erased: true,
        erasedKind: 'memory_set',
        actor: 'test:memory-owner',
        reason: 'memory clear of "city"',
      });
      expect(afterClear.indexOf(event!)).toBeLessThan(
        afterClear.indexOf(afterClear.find((e) => e.kind === 'excision')!),
      );

      const after = messages.requests.length;
      expect((await post('and now?', 'k-3')).body).toMatchObject({ status: 'complete' });
      const third = systemsSince(after);
      expect(third.length).toBeGreaterThan(0);
      for (const system of third) expect(system).not.toContain(FACT);

      // Replay rebuilds every request, the memory each turn started from included.
      const actor = ['--actor', 'test:memory-admin', '--api', stack.apiUrl];
      const replay = await polychrome(['conversation', 'replay', uid, ...actor], admin);
      expect(replay.stderr).toBe('');
      expect(replay.code).toBe(0);
      // The second turn started with the fact the clear erased: its requests cannot be
      // checked any more, and replay says so; the others replay in full.
      expect(replay.stdout.match(/ok \(full\)/gu)).toHaveLength(2);
      expect(replay.stdout).toContain(
        `ok (weak: the memory it started from was erased by the memory clear at ${String(afterClear.indexOf(event!))}`,
      );
      // The export still verifies offline, the erased position listed.
      const verify = await polychrome(['conversation', 'verify', uid, ...actor], admin);
      expect(verify.stderr).toBe('');
      expect(verify.code).toBe(0);
      expect(verify.stdout).toContain(
        `a memory clear (checked by their kept leaf digests; content gone): ${String(setAt)}`,
      );
    });
  }, 300_000);
});
