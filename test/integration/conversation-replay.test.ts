import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Role } from '../../common/persona-roles';
import { echoResponder, MessagesApiServer } from '../support/messages-api-server';
import { polychrome } from './support/polychrome-cli';
import { apiCall, type ApiAnswer } from './support/public-api';
import { startTurnStack, type TurnStack } from './support/turn-stack';

// docs/replay.md, point 2 of the replay issue: a conversation's replay needs no model. Real
// turns on the real stack (the harness process recording its agent configuration, as it
// does by default), then the Messages API server is stopped, and the real CLI process
// (bin/polychrome.js) replays and verifies the conversation through the real control-plane
// process with no model key in its environment; the journal is the same afterwards.

describe('conversation replay and verify with the model endpoint down (real CLI process)', () => {
  let stack: TurnStack;
  let messages: MessagesApiServer;
  let owner: string;
  let admin: string;
  let uid: string;

  const post = (text: string, key: string): Promise<ApiAnswer> =>
    apiCall(stack.apiUrl, 'POST', `/v1/conversations/${uid}/messages`, {
      token: owner,
      body: { text, idempotencyKey: key },
    });

  beforeAll(async () => {
    messages = await MessagesApiServer.start({ respond: echoResponder });
    stack = await startTurnStack({ namespacePrefix: 'replay', messages });
    owner = await stack.mintToken('test:replay-owner');
    admin = await stack.mintToken('test:replay-admin', [Role.Admin]);
    uid = await stack.createConversation('replayed', {
      owner: 'test:replay-owner',
      tools: { builtin: ['calculator', 'text_stats'], requireApproval: ['calculator'] },
    });
  }, 180_000);
  afterAll(async () => {
    await stack?.stop();
    await messages?.close();
  });

  it('replays (exit 0, the transcript printed) and verifies with no model key and the model down; the journal head is unchanged', async () => {
    await stack.withDiagnostics(async () => {
      // A plain turn, a turn with a tool, and a turn whose tool waits for an approval.
      expect((await post('hello there', 'k-1')).body).toMatchObject({
        status: 'complete',
        reply: 'echo: hello there',
      });
      expect((await post('count [[tool:text_stats {"text":"a b c"}]]', 'k-2')).body).toMatchObject({
        status: 'complete',
        reply: expect.stringContaining('tool text_stats said:'),
      });
      const paused = await post('compute [[tool:calculator {"expression":"6*7"}]]', 'k-3');
      expect(paused.body).toMatchObject({ status: 'paused' });
      const requestId = String((paused.body.approval as { requestId: string }).requestId);
      const approved = await apiCall(
        stack.apiUrl,
        'POST',
        `/v1/conversations/${uid}/approvals/${requestId}`,
        { token: admin, body: { decision: 'approve' } },
      );
      expect(approved.body).toMatchObject({
        status: 'complete',
        reply: 'tool calculator said: 42',
      });
      const journal = await stack.journal(uid);
      // Recorded by default: replay can check every request, not only the outputs.
      expect(journal.filter((e) => e.kind === 'agent_config')).toHaveLength(1);
      const head = journal.length;
      const object = (await stack.waitConversation(
        'replayed',
        (obj) =>
          (obj as { status?: { journal?: { head?: number } } }).status?.journal?.head === head,
      )) as { status: { journal: { keyId: string; publicKeys?: { keyId: string }[] } } };
      // The control plane recorded the state plane's key (learned over the real gRPC link).
      const keyId = object.status.journal.keyId;
      expect(object.status.journal.publicKeys?.map((k) => k.keyId)).toEqual([keyId]);

      // The model endpoint goes down.
      const modelUrl = messages.url;
      const modelCalls = messages.requests.length;
      await messages.close();
      await expect(fetch(modelUrl)).rejects.toThrow();

      const actor = ['--actor', 'test:replay-admin', '--api', stack.apiUrl];
      const replay = await polychrome(['conversation', 'replay', uid, ...actor], admin);
      expect(replay.stderr).toBe('');
      expect(replay.code).toBe(0);
      expect(replay.stdout).toContain('user: hello there');
      expect(replay.stdout).toContain('assistant: echo: hello there');
      expect(replay.stdout).toContain('tool text_stats {"text":"a b c"}');
      expect(replay.stdout).toContain('approval: calculator approved');
      expect(replay.stdout).toContain('assistant: tool calculator said: 42');
      // Full mode on every turn: the configuration and request digests were recorded.
      expect(replay.stdout.match(/ok \(full\)/gu)).toHaveLength(3);
      expect(replay.stdout).toContain('from the export header');
      expect(replay.stdout).toContain('OK: 3 turns replayed');
      expect(replay.stdout).toContain(
        `journal key(s): ${keyId}, pinned from the Conversation status`,
      );

      const json = await polychrome(['conversation', 'replay', uid, ...actor, '--json'], admin);
      expect(json.code).toBe(0);
      const report = JSON.parse(json.stdout) as {
        ok: boolean;
        events: number;
        turns: { ok: boolean; mode: string }[];
      };
      expect(report).toMatchObject({ ok: true, events: head });
      expect(report.turns.map((t) => [t.ok, t.mode])).toEqual([
        [true, 'full'],
        [true, 'full'],
        [true, 'full'],
      ]);

      const verify = await polychrome(['conversation', 'verify', uid, ...actor], admin);
      expect(verify.stderr).toBe('');
      expect(verify.code).toBe(0);
      expect(verify.stdout).toContain(`OK: ${String(head)} events`);
      expect(verify.stdout).toContain(
        `checked against the Conversation status (head ${String(head)})`,
      );
      expect(verify.stdout).toContain(
        `journal key(s): ${keyId}, pinned from the Conversation status`,
      );

      // Nothing was written and no model was asked.
      const after = await stack.journal(uid);
      expect(after).toHaveLength(head);
      expect(Buffer.from(after.at(-1)!.payload).equals(Buffer.from(journal.at(-1)!.payload))).toBe(
        true,
      );
      expect((await stack.verify(uid)).ok).toBe(true);
      expect(messages.requests.length).toBe(modelCalls);
    });
  }, 300_000);

  it('after an erasure, replay lists the erased positions as not checkable instead of diverging, and verify lists them as erased', async () => {
    await stack.withDiagnostics(async () => {
      const journal = await stack.journal(uid);
      const [firstMessage] = journal.filter((e) => e.kind === 'message_received');
      const [toolResult] = journal.filter((e) => e.kind === 'tool_result');
      const positions = [firstMessage!.position, toolResult!.position];
      const actor = ['--actor', 'test:replay-admin', '--api', stack.apiUrl];
      const erase = await polychrome(
        ['conversation', 'erase', uid, ...positions.map(String), ...actor, '--reason', 'request 9'],
        admin,
      );
      expect(erase.stderr).toBe('');
      expect(erase.code).toBe(0);
      const replay = await polychrome(['conversation', 'replay', uid, ...actor], admin);
      expect(replay.stderr).toBe('');
      expect(replay.code).toBe(0);
      // The message is gone; the model's echo of it is in its answer, which was not erased.
      expect(replay.stdout).not.toContain('user: hello there');
      expect(replay.stdout).toContain('user: [erased]');
      for (const position of positions) {
        expect(replay.stdout).toMatch(
          new RegExp(
            `position ${String(position)} \\((message_received|tool_result) of turn \\S+\\): erased on request \\(an admin's erasure or a memory clear\\), cannot be checked`,
            'u',
          ),
        );
        expect(replay.stdout).toContain(
          `not checkable because of erased position ${String(position)}`,
        );
      }
      expect(replay.stdout.match(/the request held the erased message_received/gu)).toHaveLength(5);
      expect(replay.stdout).toContain('OK: 3 turns replayed');
      expect(replay.stdout).not.toContain('DIVERGED');

      const json = await polychrome(['conversation', 'replay', uid, ...actor, '--json'], admin);
      expect(json.code).toBe(0);
      const report = JSON.parse(json.stdout) as {
        ok: boolean;
        erased: { position: number; kind: string }[];
        skipped: unknown[];
        turns: { ok: boolean; unchecked?: { erasedPosition: number }[] }[];
      };
      expect(report.ok).toBe(true);
      expect(report.erased.map((e) => [e.position, e.kind])).toEqual([
        [positions[0], 'message_received'],
        [positions[1], 'tool_result'],
      ]);
      expect(report.skipped).toEqual([]);
      // Every later turn's history held the erased message: none of their requests is checkable.
      expect(report.turns.map((t) => t.unchecked?.[0]?.erasedPosition)).toEqual([
        positions[0],
        positions[0],
        positions[0],
      ]);

      // What-if over the erased journal: a changed answer in the last turn departs there,
      // and the erased positions are named.
      const lastCall = journal.filter((e) => e.kind === 'model_call').at(-1)!.position;
      const whatIf = await polychrome(
        [
          'conversation',
          'replay',
          uid,
          ...actor,
          '--what-if',
          `model-output@${String(lastCall)}=no`,
        ],
        admin,
      );
      expect(whatIf.stderr).toBe('');
      expect(whatIf.code).toBe(1);
      expect(whatIf.stdout).toContain(
        `erased on request (an admin's erasure or a memory clear), cannot be checked in either run: ${String(positions[0])} (message_received), ${String(positions[1])} (tool_result)`,
      );
      expect(whatIf.stdout).toContain(`position ${String(lastCall + 1)}`);

      const verify = await polychrome(['conversation', 'verify', uid, ...actor], admin);
      expect(verify.stderr).toBe('');
      expect(verify.code).toBe(0);
      expect(verify.stdout).toContain(
        `erased on request, by an admin's erasure or a memory clear (checked by their kept leaf digests; content gone): ${positions.join(', ')}`,
      );
    });
  }, 300_000);
});
