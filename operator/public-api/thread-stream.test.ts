/**
 * A panel's threads on the public API's event stream, over HTTP (docs/api.md, "Streaming";
 * docs/turns.md, "Delegation"): the real PublicApiServer over the real coordinator and
 * harness (test/support/api-fixtures.ts), each agent's model called by the control plane's
 * relay through the real Anthropic SDK against the local Messages API
 * (test/support/agent-turns.ts). A client that follows the stream sees each thread open
 * (its agent, its id), its text live under its id, each thread close with its answer, and
 * then the lead's final answer.
 */
import { afterEach, describe, expect, it } from '@jest/globals';
import { startCrewModels, type CrewModels } from '../../test/support/agent-turns';
import {
  ALICE,
  call,
  dataOf,
  pollUntil,
  SseClient,
  startApi,
  TOKENS,
  type SseMessage,
  type TestApi,
} from '../../test/support/api-fixtures';
import { panelCrew, panelResponder } from '../../test/support/crew-replies';

let api: TestApi | undefined;
let crew: CrewModels | undefined;
let client: SseClient | undefined;

afterEach(async () => {
  client?.close();
  await api?.close();
  await crew?.api.close();
  [api, crew, client] = [undefined, undefined, undefined];
});

/** The `data` of the messages named `event`. */
function named(messages: readonly SseMessage[], event: string): Record<string, unknown>[] {
  return messages.filter((m) => m.event === event).map(dataOf);
}

describe('a panel on the event stream', () => {
  it('opens a thread per delegate, streams each under its id, closes each with its answer, then the lead answers', async () => {
    crew = await startCrewModels({ agents: panelCrew(), respond: panelResponder() });
    api = await startApi({ coordinator: { maxAttempts: 1, ...crew.coordinator } });
    const id = api.seed(ALICE.identity, { agentRef: { name: 'lead' } });
    client = await SseClient.open(api, `/v1/conversations/${id}/stream`, {
      authorization: `Bearer ${TOKENS.alice}`,
    });
    const stream = client;
    await pollUntil('the delta subscription', () => api?.service.deltaListeners(id) === 1);
    const answer = await call(api, 'POST', `/v1/conversations/${id}/messages`, {
      token: TOKENS.alice,
      body: { text: 'Was I charged twice in March?', idempotencyKey: 'panel-1' },
    });
    expect(answer.status).toBe(200);
    const { turnId, reply } = answer.json as { turnId: string; reply: string };
    await stream.waitFor('turn_complete', (m) => m.some((e) => e.event === 'turn_complete'));
    const messages = stream.messages;

    // Each thread opens once, naming its agent, who asked, its task and its depth, in the
    // same frame (same id) as the `__delegate_to` call it derives from.
    const started = named(messages, 'thread_started');
    expect(started).toEqual([
      expect.objectContaining({
        turnId,
        thread: 'toolu_ask_researcher',
        agent: 'researcher',
        by: 'lead',
        parentThread: '',
        depth: 1,
        task: 'How much was billed in March?',
      }),
      expect.objectContaining({
        turnId,
        thread: 'toolu_ask_checker',
        agent: 'checker',
        by: 'lead',
      }),
    ]);
    for (const thread of messages.filter((m) => m.event === 'thread_started')) {
      const call = messages.find((m) => m.id === thread.id && m.event === 'tool_call');
      expect(dataOf(call)).toMatchObject({ payload: { toolName: '__delegate_to' } });
    }
    // Each delegate's text streams live under its thread, the lead's under none.
    const deltas = named(messages, 'delta');
    const live = (thread: string | undefined) =>
      deltas
        .filter((d) => d.thread === thread)
        .map((d) => d.text)
        .join('');
    expect(live('toolu_ask_researcher')).toBe('researcher says: 29 chars');
    expect(live('toolu_ask_checker')).toBe('checker says: 33 chars');
    expect(live(undefined)).toBe(reply);
    // Each thread closes once with the answer its agent gave.
    const closed = named(messages, 'thread_closed');
    expect(closed.map((c) => [c.thread, c.agent, c.answer, c.isError]).sort()).toEqual([
      ['toolu_ask_checker', 'checker', 'checker says: 33 chars', false],
      ['toolu_ask_researcher', 'researcher', 'researcher says: 29 chars', false],
    ]);
    // The final answer is the lead's: it comes after both threads closed, from the turn's
    // own thread, and the turn's last model call there names the lead (docs/api.md).
    const order = messages.map((m) => m.event);
    const complete = order.indexOf('turn_complete');
    expect(order.lastIndexOf('thread_closed')).toBeLessThan(complete);
    expect(dataOf(messages[complete])).toMatchObject({ payload: { turnId, text: reply } });
    expect(reply).toMatch(/^lead: .*researcher says: 29 chars.*checker says: 33 chars/u);
    const ownCalls = named(messages.slice(0, complete), 'model_call')
      .map((c) => c.payload as { agent?: string; thread?: string })
      .filter((p) => (p.thread ?? '') === '');
    expect(ownCalls.map((p) => p.agent)).toEqual(['lead', 'lead']);
  });
});
