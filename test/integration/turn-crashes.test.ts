import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Role } from '../../common/persona-roles';
import { payloadCodecs } from '../../common/event-kinds';
import { join } from 'node:path';
import { repoRoot } from '../../hack/lib/paths';
import { pollUntil } from '../../hack/lib/processes';
import { EventsV1Api } from '@kubernetes/client-node';
import { NO_KEY } from '../../operator/models/provider-model-relay';
import { MessagesApiServer, systemOf } from '../support/messages-api-server';
import { apiCall, postMessage, postUntilSettled, type ApiAnswer } from './support/public-api';
import { startTurnStack, type TurnStack } from './support/turn-stack';

// Crash tests on the real stack: a process is SIGKILLed at a chosen point of a turn, then
// the same message is posted again with the same idempotency key. Afterwards the journal
// verifies, nothing acknowledged is lost, the turn exists once (one message_received, one
// completion) and recorded steps were reused rather than run again.

type Answer = ApiAnswer;

/** The MCP server `ops` over stdio (test/support/mcp-servers/failure-server.ts): `slow` is a side effect. */
const OPS_SERVER = {
  name: 'ops',
  transport: 'stdio',
  command: process.execPath,
  args: ['--import', 'tsx', join(repoRoot, 'test', 'support', 'mcp-servers', 'failure-server.ts')],
};

describe('turns survive crashes', () => {
  let stack: TurnStack;
  let token: string;

  const post = (uid: string, text: string, key: string): Promise<Answer> =>
    postMessage(stack.apiUrl, token, uid, text, key);
  /** Posts without waiting; a crash of the server ends it with a network error. */
  const postInBackground = (uid: string, text: string, key: string): Promise<Answer | Error> =>
    post(uid, text, key).catch((error: unknown) =>
      error instanceof Error ? error : new Error(String(error)),
    );
  const settle = (uid: string, text: string, key: string): Promise<Answer> =>
    postUntilSettled(stack.apiUrl, token, uid, text, key);
  const waitForKind = async (uid: string, kind: string, count = 1): Promise<void> => {
    await pollUntil(
      `${count} ${kind} in conv-${uid}`,
      async () =>
        (await stack.journalKinds(uid)).filter((k) => k === kind).length >= count
          ? true
          : undefined,
      { timeoutMs: 30_000, intervalMs: 50 },
    );
  };
  /** A Conversation of the test's owner that names the entry Agent `entry`. */
  const agentConversation = (name: string, entry: string): Promise<string> =>
    stack.createConversation(name, {
      owner: 'test:crash-owner',
      agent: undefined,
      agentRef: { name: entry },
    });
  /** The conversation's committed `tool_call`s, decoded. */
  const toolCalls = async (uid: string) =>
    (await stack.journal(uid))
      .filter((e) => e.kind === 'tool_call')
      .map((e) => payloadCodecs.tool_call.decode(e.payload));
  const count = (kinds: string[], kind: string): number => kinds.filter((k) => k === kind).length;
  const assertOneTurn = async (uid: string, dispatches: number): Promise<string[]> => {
    const kinds = await stack.journalKinds(uid);
    expect(count(kinds, 'message_received')).toBe(1);
    expect(count(kinds, 'turn_dispatched')).toBe(dispatches);
    expect(count(kinds, 'turn_complete')).toBe(1);
    expect(kinds.at(-1)).toBe('signed_root');
    const check = await stack.verify(uid);
    expect(check.ok).toBe(true);
    const attempts = (await stack.journal(uid))
      .filter((e) => e.kind === 'turn_dispatched')
      .map((e) => payloadCodecs.turn_dispatched.decode(e.payload).attempt);
    expect(attempts).toEqual(Array.from({ length: dispatches }, (_, i) => i + 1));
    return kinds;
  };

  beforeAll(async () => {
    stack = await startTurnStack({
      namespacePrefix: 'crash',
      // A dead harness is found quickly; the turn waits for the restarted pod.
      controlPlaneEnv: { POLYCHROME_TURN_SANDBOX_WAIT_MS: '60000' },
    });
    token = await stack.mintToken('test:crash-owner');
  }, 120_000);
  afterAll(async () => {
    await stack?.stop();
  });

  it('retries a dispatch orphaned by a control-plane SIGKILL after batch one, under its turn id', async () => {
    await stack.withDiagnostics(async () => {
      const uid = await stack.createConversation('cp-after-batch-one', {
        owner: 'test:crash-owner',
      });
      const text = '[[slow:3000]] survive me';
      const pending = postInBackground(uid, text, 'k1');
      await waitForKind(uid, 'turn_dispatched');
      await stack.controlPlane(0).kill('SIGKILL');
      expect(await pending).toBeInstanceOf(Error);
      const kinds = await stack.journalKinds(uid);
      expect(kinds).not.toContain('turn_complete');

      stack.controlPlane(0).start();
      await stack.controlPlane(0).waitReady();
      const answer = await settle(uid, text, 'k1');
      expect(answer.status).toBe(200);
      expect(answer.body).toMatchObject({ status: 'complete', reply: `echo: ${text}` });
      await assertOneTurn(uid, 2);
    });
  });

  it('reuses a committed pure tool step after a control-plane SIGKILL instead of running it again', async () => {
    await stack.withDiagnostics(async () => {
      const uid = await stack.createConversation('cp-after-tool', {
        owner: 'test:crash-owner',
        tools: { builtin: ['calculator'] },
      });
      const text = 'compute [[tool:calculator {"expression":"2+3"}]] [[slow:3000]]';
      const pending = postInBackground(uid, text, 'k2');
      await waitForKind(uid, 'tool_result');
      const modelCallsBefore = stack.messages.requests.length;
      await stack.controlPlane(0).kill('SIGKILL');
      await pending;

      stack.controlPlane(0).start();
      await stack.controlPlane(0).waitReady();
      const answer = await settle(uid, text, 'k2');
      expect(answer.body).toMatchObject({ status: 'complete', reply: 'tool calculator said: 5' });
      const kinds = await assertOneTurn(uid, 2);
      expect(count(kinds, 'tool_call')).toBe(1);
      expect(count(kinds, 'tool_result')).toBe(1);
      // The recorded first model call was reused: only the closing reply was asked again.
      expect(count(kinds, 'model_call')).toBe(2);
      expect(stack.messages.requests.length - modelCallsBefore).toBeLessThanOrEqual(2);
    });
  });

  it('quarantines a turn whose side-effecting call was committed when the control plane died', async () => {
    await stack.withDiagnostics(async () => {
      const uid = await stack.createConversation('cp-after-side-effect', {
        owner: 'test:crash-owner',
        tools: {
          mcpServers: [OPS_SERVER],
        },
      });
      const text = 'do it [[tool:ops/slow {"ms":5000}]]';
      const pending = postInBackground(uid, text, 'k-side');
      await waitForKind(uid, 'tool_call');
      const call = (await stack.journal(uid)).find((e) => e.kind === 'tool_call')!;
      const committed = payloadCodecs.tool_call.decode(call.payload);
      expect(committed.toolName).toBe('ops/slow');
      expect(committed.effect).toBe(2);
      await stack.controlPlane(0).kill('SIGKILL');
      await pending;

      stack.controlPlane(0).start();
      await stack.controlPlane(0).waitReady();
      const answer = await settle(uid, text, 'k-side');
      expect(answer.status).toBe(200);
      expect(answer.body).toMatchObject({
        status: 'ambiguous',
        ambiguous: { toolCallId: committed.toolCallId },
      });
      let kinds = await stack.journalKinds(uid);
      expect(count(kinds, 'turn_ambiguous')).toBe(1);
      expect(count(kinds, 'tool_result')).toBe(0);
      expect(count(kinds, 'turn_complete')).toBe(0);
      // Quarantined: a retry answers the same and dispatches nothing.
      const dispatched = count(kinds, 'turn_dispatched');
      const again = await post(uid, text, 'k-side');
      expect(again.body).toMatchObject({ status: 'ambiguous', turnId: answer.body.turnId });
      kinds = await stack.journalKinds(uid);
      expect(count(kinds, 'turn_dispatched')).toBe(dispatched);
      const degraded = await stack.waitConversation('cp-after-side-effect', (obj) => {
        const conditions = (
          obj as { status?: { conditions?: { type: string; status: string; reason: string }[] } }
        ).status?.conditions;
        return (
          conditions?.some(
            (c) => c.type === 'Degraded' && c.status === 'True' && c.reason === 'TurnAmbiguous',
          ) === true
        );
      });
      expect(degraded).toBeDefined();

      // An admin resolves it (docs/turns.md, "Resolving a quarantined turn"): the owner may
      // not, and nothing is committed; the admin's "ran" with the result clears Degraded,
      // the reconciler records QuarantineResolved, and the retry finishes the turn with it.
      const turnId = String(answer.body.turnId);
      const resolvePath = `/v1/conversations/${uid}/turns/${turnId}/resolve`;
      const before = (await stack.journalKinds(uid)).length;
      const refused = await apiCall(stack.apiUrl, 'POST', resolvePath, {
        token,
        body: { actor: 'test:crash-owner', decision: 'did_not_run' },
      });
      expect(refused.status).toBe(403);
      expect((await stack.journalKinds(uid)).length).toBe(before);
      const adminToken = await stack.mintToken('test:crash-admin', [Role.Admin]);
      const resolved = await apiCall(stack.apiUrl, 'POST', resolvePath, {
        token: adminToken,
        body: { actor: 'test:crash-admin', decision: 'ran', result: 'refund R-42 sent' },
      });
      expect(resolved).toMatchObject({
        status: 200,
        body: { turnId, decision: 'ran', actor: 'test:crash-admin' },
      });
      await stack.waitConversation('cp-after-side-effect', (obj) => {
        const status = (
          obj as {
            status?: {
              turns?: { quarantined?: unknown };
              conditions?: { type: string; status: string; reason: string }[];
            };
          }
        ).status;
        return (
          status?.turns?.quarantined === undefined &&
          status?.conditions?.some(
            (c) => c.type === 'Degraded' && c.status === 'True' && c.reason === 'TurnAmbiguous',
          ) !== true
        );
      });
      const eventsApi = stack.admin.makeApiClient(EventsV1Api);
      await pollUntil(
        'Event QuarantineResolved on cp-after-side-effect',
        async () =>
          (await eventsApi.listNamespacedEvent({ namespace: stack.namespace })).items.find(
            (e) =>
              e.regarding?.name === 'cp-after-side-effect' && e.reason === 'QuarantineResolved',
          ),
        { timeoutMs: 30_000, intervalMs: 200 },
      );
      const finished = await settle(uid, text, 'k-side');
      expect(finished.body).toMatchObject({
        turnId,
        status: 'complete',
        reply: 'tool ops/slow said: refund R-42 sent',
      });
      kinds = await stack.journalKinds(uid);
      expect(count(kinds, 'turn_resolved')).toBe(1);
      expect(count(kinds, 'tool_call')).toBe(1);
      expect(count(kinds, 'turn_complete')).toBe(1);

      // The conversation still takes new turns.
      const next = await settle(uid, 'are you there?', 'k-next');
      expect(next.body).toMatchObject({ status: 'complete', reply: 'echo: are you there?' });
      expect((await stack.verify(uid)).ok).toBe(true);
    });
  });

  it('recovers a turn whose harness was SIGKILLed mid-model-stream, on the restarted pod', async () => {
    await stack.withDiagnostics(async () => {
      const uid = await stack.createConversation('harness-mid-stream', {
        owner: 'test:crash-owner',
      });
      const text = '[[slow:3000]] the harness dies';
      const pending = postInBackground(uid, text, 'k3');
      await waitForKind(uid, 'turn_dispatched');
      // Let the stream start, then kill the harness process under it.
      await new Promise((resolve) => setTimeout(resolve, 500));
      await stack.killHarness('harness-mid-stream', 'SIGKILL');
      const first = await pending;
      expect(first).not.toBeInstanceOf(Error);
      expect((first as Answer).status).toBe(503);
      expect(await stack.journalKinds(uid)).not.toContain('turn_complete');

      const answer = await settle(uid, text, 'k3');
      expect(answer.body).toMatchObject({ status: 'complete', reply: `echo: ${text}` });
      await assertOneTurn(uid, 2);
    });
  });

  it("recovers a turn whose harness was SIGKILLed in the middle of a delegate's model call, reusing every recorded step", async () => {
    // A lead Agent delegates to a researcher (docs/turns.md, "Delegation"); their model is a
    // ModelConfig's endpoint, called by the control plane's relay. The harness dies while
    // the researcher's reply streams; the retry runs the thread again from the journal.
    const models = await MessagesApiServer.start({ apiKey: NO_KEY });
    let researcherCalls = 0;
    models.setResponder((request) => {
      const messages = (request.body as { messages: unknown[] }).messages;
      if (systemOf(request).startsWith('You are researcher.')) {
        researcherCalls += 1;
        // The first reply streams for long enough to kill the harness under it.
        return {
          kind: 'message',
          content: [{ type: 'text', text: 'March: 40 billed once' }],
          durationMs: researcherCalls === 1 ? 5_000 : 0,
        };
      }
      return messages.length === 1
        ? {
            kind: 'message',
            content: [
              {
                type: 'tool_use',
                id: 'toolu_ask_researcher',
                name: '__delegate_to',
                input: { agent: 'researcher', task: 'What was billed in March?' },
              },
            ],
          }
        : { kind: 'message', content: [{ type: 'text', text: 'Checked: billed once.' }] };
    });
    try {
      await stack.withDiagnostics(async () => {
        await stack.createAgents(
          { name: 'crash-claude', model: 'claude-crash', baseUrl: models.url },
          {
            researcher: { description: 'Finds figures.' },
            'crash-lead': { delegates: ['researcher'] },
          },
        );
        const uid = await agentConversation('harness-mid-delegate', 'crash-lead');
        const text = 'Was I billed twice in March?';
        const pending = postInBackground(uid, text, 'k-delegate');
        await pollUntil(
          "the researcher's model call in flight",
          () => Promise.resolve(researcherCalls >= 1 ? true : undefined),
          { timeoutMs: 60_000, intervalMs: 50 },
        );
        await new Promise((resolve) => setTimeout(resolve, 500));
        await stack.killHarness('harness-mid-delegate', 'SIGKILL');
        const first = await pending;
        expect(first).not.toBeInstanceOf(Error);
        expect((first as Answer).status).toBe(503);
        const before = await stack.journal(uid);
        expect(before.map((e) => e.kind)).not.toContain('turn_complete');
        // The thread's intent was committed before its delegate asked its model.
        const intents = before
          .filter((e) => e.kind === 'tool_call')
          .map((e) => payloadCodecs.tool_call.decode(e.payload));
        expect(intents.map((c) => [c.toolName, c.toolCallId, c.agent])).toEqual([
          ['__delegate_to', 'toolu_ask_researcher', 'crash-lead'],
        ]);

        const answer = await settle(uid, text, 'k-delegate');
        expect(answer.body).toMatchObject({ status: 'complete', reply: 'Checked: billed once.' });
        const kinds = await assertOneTurn(uid, 2);
        // Nothing recorded ran twice: one intent, the lead's first reply reused; only the
        // researcher's cut call was asked again.
        expect(count(kinds, 'tool_call')).toBe(1);
        expect(researcherCalls).toBe(2);
        const calls = (await stack.journal(uid))
          .filter((e) => e.kind === 'model_call')
          .map((e) => payloadCodecs.model_call.decode(e.payload));
        expect(calls.map((c) => [c.agent, c.thread, c.depth, c.step])).toEqual([
          ['crash-lead', '', 0, 1],
          ['researcher', 'toolu_ask_researcher', 1, 1],
          ['crash-lead', '', 0, 2],
        ]);
        const results = (await stack.journal(uid))
          .filter((e) => e.kind === 'tool_result')
          .map((e) => payloadCodecs.tool_result.decode(e.payload));
        expect(results.map((r) => [r.toolCallId, r.delegate, r.content])).toEqual([
          ['toolu_ask_researcher', 'researcher', 'March: 40 billed once'],
        ]);
      });
    } finally {
      await models.close();
    }
  });

  it("quarantines a turn whose harness was SIGKILLed after a delegate's side-effecting call was committed, naming the thread's call", async () => {
    // A lead Agent delegates to an operator whose own MCP server's `slow` tool is a side
    // effect (docs/turns.md, "Delegation": quarantine as at the top). The harness dies
    // while that call runs: its outcome is unknown, so the retry quarantines the turn.
    const models = await MessagesApiServer.start({ apiKey: NO_KEY });
    models.setResponder((request) => {
      const first = (request.body as { messages: unknown[] }).messages.length === 1;
      const use = (id: string, name: string, input: Record<string, unknown>) =>
        ({ kind: 'message', content: [{ type: 'tool_use', id, name, input }] }) as const;
      if (systemOf(request).startsWith('You are operator.')) {
        return first
          ? use('toolu_refund', 'ops/slow', { ms: 5_000 })
          : { kind: 'message', content: [{ type: 'text', text: 'refunded' }] };
      }
      return first
        ? use('toolu_ask_operator', '__delegate_to', { agent: 'operator', task: 'Refund R-42.' })
        : { kind: 'message', content: [{ type: 'text', text: 'Done.' }] };
    });
    try {
      await stack.withDiagnostics(async () => {
        await stack.createAgents(
          { name: 'crash-ops-claude', model: 'claude-crash-ops', baseUrl: models.url },
          {
            operator: {
              description: 'Runs refunds.',
              tools: {
                mcpServers: [OPS_SERVER],
              },
            },
            'ops-lead': { delegates: ['operator'] },
          },
        );
        const uid = await agentConversation('harness-delegate-side-effect', 'ops-lead');
        const text = 'Please refund R-42.';
        const pending = postInBackground(uid, text, 'k-delegate-side');
        await pollUntil(
          "the operator's side-effecting call committed",
          async () => (await toolCalls(uid)).find((c) => c.toolName === 'ops/slow'),
          { timeoutMs: 60_000, intervalMs: 50 },
        );
        await stack.killHarness('harness-delegate-side-effect', 'SIGKILL');
        const first = await pending;
        expect(first).not.toBeInstanceOf(Error);
        expect((first as Answer).status).toBe(503);
        const calls = await toolCalls(uid);
        expect(calls.map((c) => [c.toolName, c.toolCallId, c.agent, c.thread, c.effect])).toEqual([
          ['__delegate_to', 'toolu_ask_operator', 'ops-lead', '', 1],
          ['ops/slow', 'toolu_refund', 'operator', 'toolu_ask_operator', 2],
        ]);

        const answer = await settle(uid, text, 'k-delegate-side');
        expect(answer.body).toMatchObject({
          status: 'ambiguous',
          ambiguous: { toolCallId: 'toolu_refund' },
        });
        const kinds = await stack.journalKinds(uid);
        expect(count(kinds, 'turn_ambiguous')).toBe(1);
        expect(count(kinds, 'tool_result')).toBe(0);
        expect(count(kinds, 'turn_complete')).toBe(0);
        // The side effect ran at most once: the retry did not call the tool again.
        expect(count(kinds, 'tool_call')).toBe(2);
        // Quarantined: a retry answers the same and dispatches nothing.
        const dispatched = count(kinds, 'turn_dispatched');
        const again = await post(uid, text, 'k-delegate-side');
        expect(again.body).toMatchObject({ status: 'ambiguous', turnId: answer.body.turnId });
        expect(count(await stack.journalKinds(uid), 'turn_dispatched')).toBe(dispatched);
        expect((await stack.verify(uid)).ok).toBe(true);
      });
    } finally {
      await models.close();
    }
  });

  it('recovers a turn whose batch two was in flight when the state plane was SIGKILLed', async () => {
    await stack.withDiagnostics(async () => {
      const uid = await stack.createConversation('state-batch-two', { owner: 'test:crash-owner' });
      // Hold every append that carries a turn_complete, so the kill lands inside batch two.
      stack.state.env.STATE_FAULT_APPEND_DELAY = 'turn_complete:5000';
      try {
        await stack.state.restart('SIGTERM');
        await stack.controlPlane(0).waitReady();
        const text = 'batch two never lands';
        const pending = postInBackground(uid, text, 'k-b2');
        await pollUntil(
          'the held batch two',
          () =>
            Promise.resolve(
              stack.state.logs.some((line) => line.includes('fault injection: holding an append'))
                ? true
                : undefined,
            ),
          { timeoutMs: 30_000, intervalMs: 50 },
        );
        const acknowledged = await stack.journal(uid);
        // The reply that ends the turn travels with batch two: none of it is durable yet.
        // The agent configuration, recorded before the model call, is.
        expect(acknowledged.map((e) => e.kind)).toEqual([
          'message_received',
          'turn_dispatched',
          'signed_root',
          'agent_config',
          'signed_root',
        ]);
        const modelCallsBefore = stack.messages.requests.length;
        await stack.state.kill('SIGKILL');
        const first = await pending;
        expect(first).not.toBeInstanceOf(Error);
        expect((first as Answer).status).toBe(503);
        delete stack.state.env.STATE_FAULT_APPEND_DELAY;
        await stack.state.start();
        await stack.controlPlane(0).waitReady();
        // Nothing of the unacknowledged batch is visible.
        expect(await stack.journal(uid)).toHaveLength(acknowledged.length);

        const answer = await settle(uid, text, 'k-b2');
        expect(answer.body).toMatchObject({ status: 'complete', reply: `echo: ${text}` });
        const after = await stack.journal(uid);
        for (const entry of acknowledged) {
          expect(
            Buffer.from(after[entry.position]!.payload).equals(Buffer.from(entry.payload)),
          ).toBe(true);
        }
        const kinds = await assertOneTurn(uid, 2);
        // The lost batch held the reply, so the retry asked the model again (a model call
        // has no side effect); the journal holds that one reply.
        expect(stack.messages.requests.length - modelCallsBefore).toBeGreaterThanOrEqual(1);
        expect(count(kinds, 'model_call')).toBe(1);
      } finally {
        delete stack.state.env.STATE_FAULT_APPEND_DELAY;
        if (!stack.state.running) await stack.state.start();
      }
    });
  });

  it('loses nothing when the state plane is SIGKILLed while a turn runs, and finishes it after', async () => {
    await stack.withDiagnostics(async () => {
      const uid = await stack.createConversation('state-mid-turn', { owner: 'test:crash-owner' });
      const text = '[[slow:2000]] the state plane dies';
      const pending = postInBackground(uid, text, 'k4');
      await waitForKind(uid, 'turn_dispatched');
      const acknowledged = await stack.journal(uid);
      await stack.state.kill('SIGKILL');
      const first = await pending;
      expect(first).not.toBeInstanceOf(Error);
      expect([503, 500]).toContain((first as Answer).status);
      await stack.state.start();
      await stack.controlPlane(0).waitReady();

      const answer = await settle(uid, text, 'k4');
      expect(answer.body).toMatchObject({ status: 'complete', reply: `echo: ${text}` });
      const after = await stack.journal(uid);
      // Every event acknowledged before the crash is still there, unchanged.
      for (const entry of acknowledged) {
        expect(Buffer.from(after[entry.position]!.payload).equals(Buffer.from(entry.payload))).toBe(
          true,
        );
      }
      await assertOneTurn(uid, 2);
    });
  });
});
