/**
 * The runner's `model_request` case (docs/turns.md, "Who calls the model"): the real
 * coordinator over in-memory ports (test/support/real-turns.ts), the real harness server
 * told to relay its agent's calls, and the control plane's relay (operator/models) calling
 * the local protocol servers of both providers through the real SDKs. The harness's own
 * model is never asked. A harness that asks for an agent the turn was not dispatched to
 * relay, or sends a request that is not one, is refused.
 */
import { afterEach, describe, expect, it } from '@jest/globals';
import { Server, type ServerDuplexStream } from '@grpc/grpc-js';
import pino from 'pino';
import { decodePayload, type EventPayloads } from '../../common/event-kinds';
import { ModelApi } from '../../common/model/model-port';
import {
  HarnessService,
  type ModelAnswer,
  type TurnInput,
  type TurnOutput,
} from '../../proto/gen/polychrome/harness/v1/harness';
import { ChatCompletionsServer } from '../../test/support/chat-completions-server';
import { testHarnessServerCredentials } from '../../test/support/harness-tls';
import { readyStatus } from '../../test/support/in-memory-conversations';
import { noSecrets } from '../../test/support/no-secrets';
import { MessagesApiServer } from '../../test/support/messages-api-server';
import { startRealTurns, TEST_OWNER, type RealTurns } from '../../test/support/real-turns';
import { DEFAULT_CONVERSATION_NAMESPACE } from '../config';
import { NO_KEY, ProviderModelRelay } from '../models/provider-model-relay';
import type { ModelRoute } from './model-relay-port';

let closers: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const close of closers.reverse()) await close();
  closers = [];
});

const relay = new ProviderModelRelay({
  secrets: noSecrets,
  account: { name: 'polychrome-control-plane', namespace: 'polychrome-system' },
  adapter: { initialBackoffMs: 1, random: () => 0 },
});

/** Real turns whose conversations' agent (unnamed) is relayed along `route`. */
async function relayedTurns(
  routes: ReadonlyMap<string, ModelRoute>,
  endpoint?: string,
  maxAttempts = 1,
) {
  const turns: RealTurns = await startRealTurns({
    replies: [],
    logger: pino({ level: 'silent' }),
    spec: { tools: { builtin: ['calculator'] } },
    coordinator: { maxAttempts, modelRelay: relay, modelRoutes: { routesFor: () => routes } },
  });
  closers.push(() => turns.close());
  const conversation = turns.conversations.add(
    { owner: TEST_OWNER.identity },
    { status: readyStatus(endpoint ?? turns.harness.endpoint) },
  );
  const uid = conversation.metadata.uid ?? '';
  const deltas: { step: number; text: string }[] = [];
  closers.push(turns.coordinator.onTextDelta(uid, (d) => deltas.push(d)));
  const post = (text: string) =>
    turns.coordinator.postMessage(
      TEST_OWNER,
      { conversationId: uid, text, idempotencyKey: text },
      AbortSignal.timeout(20_000),
    );
  const events = async <K extends keyof EventPayloads>(kind: K): Promise<EventPayloads[K][]> =>
    (await turns.journal.entries(`conv-${uid}`))
      .filter((e) => e.kind === kind)
      .map((e) => decodePayload(kind, e.payload));
  return { turns, post, deltas, events };
}

const namespace = DEFAULT_CONVERSATION_NAMESPACE;

describe('relayed model calls in the turn runner', () => {
  it('anthropic: a tool call and streamed text through the relay, a 429 retried', async () => {
    const api = await MessagesApiServer.start({ apiKey: NO_KEY });
    closers.push(() => api.close());
    api.enqueue(
      { kind: 'error', status: 429, retryAfter: '0' },
      {
        kind: 'message',
        content: [
          { type: 'tool_use', id: 'toolu_1', name: 'calculator', input: { expression: '6*7' } },
        ],
      },
      {
        kind: 'message',
        content: [{ type: 'text', text: 'It is 42.', chunks: ['It is ', '42.'] }],
      },
    );
    const route: ModelRoute = {
      provider: ModelApi.Anthropic,
      model: 'claude-relayed',
      baseUrl: api.url,
      maxTokens: 300,
      namespace,
    };
    const { turns, post, deltas, events } = await relayedTurns(new Map([['', route]]));
    const reply = await post('what is 6*7?');
    expect(reply).toMatchObject({ status: 'complete', reply: 'It is 42.' });
    expect(turns.harness.model.callCount).toBe(0);
    // 429, then the two round trips, each with the route's model and max_tokens.
    expect(api.requests.map((r) => r.path)).toEqual(Array(3).fill('/v1/messages'));
    expect(api.bodies.slice(1)).toEqual([
      expect.objectContaining({ model: 'claude-relayed', max_tokens: 300 }),
      expect.objectContaining({ model: 'claude-relayed', max_tokens: 300 }),
    ]);
    expect(deltas.filter((d) => d.step === 2).map((d) => d.text)).toEqual(['It is ', '42.']);
    const calls = await events('model_call');
    expect(calls).toHaveLength(2);
    expect((await events('tool_result'))[0]?.content).toBe('42');
    const [config] = await events('agent_config');
    expect(JSON.parse(config?.configJson ?? '{}')).toMatchObject({
      model: { name: 'claude-relayed', max_tokens: 300 },
    });
  });

  it('openai: a tool call and streamed text through the relay, a 429 retried', async () => {
    const api = await ChatCompletionsServer.start({ apiKey: NO_KEY });
    closers.push(() => api.close());
    api.enqueue(
      { kind: 'error', status: 429, retryAfter: '0' },
      {
        kind: 'completion',
        toolCalls: [{ id: 'call_1', name: 'calculator', arguments: '{"expression":"6*7"}' }],
      },
      { kind: 'completion', text: 'It is 42.', chunks: ['It is ', '42.'] },
    );
    const route: ModelRoute = {
      provider: ModelApi.OpenAi,
      model: 'qwen-relayed',
      baseUrl: api.url,
      namespace,
    };
    const { turns, post, deltas, events } = await relayedTurns(new Map([['', route]]));
    const reply = await post('what is 6*7?');
    expect(reply).toMatchObject({ status: 'complete', reply: 'It is 42.' });
    expect(turns.harness.model.callCount).toBe(0);
    expect(api.bodies).toHaveLength(3);
    expect(api.bodies[2]).toMatchObject({ model: 'qwen-relayed' });
    expect(deltas.filter((d) => d.step === 2).map((d) => d.text)).toEqual(['It is ', '42.']);
    expect((await events('tool_result'))[0]?.content).toBe('42');
    const [config] = await events('agent_config');
    expect(JSON.parse(config?.configJson ?? '{}')).toMatchObject({
      model: { name: 'qwen-relayed', max_tokens: 8192, provider: 'openai' },
    });
  });

  it('a model call cut short on every try fails the attempt as retryable; the retry asks the model again', async () => {
    const api = await MessagesApiServer.start({ apiKey: NO_KEY });
    closers.push(() => api.close());
    // The adapter's 4 tries all cut: the relay answers `unavailable`, and nothing is committed.
    api.enqueue(
      { kind: 'drop' },
      { kind: 'drop' },
      { kind: 'drop' },
      { kind: 'drop' },
      { kind: 'message', content: [{ type: 'text', text: 'back again' }] },
    );
    const route: ModelRoute = {
      provider: ModelApi.Anthropic,
      model: 'm',
      baseUrl: api.url,
      namespace,
    };
    const { post, events } = await relayedTurns(new Map([['', route]]), undefined, 2);
    await expect(post('hello')).rejects.toMatchObject({ code: 'unavailable' });
    expect(await events('model_call')).toEqual([]);
    // The same message again recovers the turn: attempt 2 asks the model again.
    expect(await post('hello')).toMatchObject({ status: 'complete', reply: 'back again' });
    expect((await events('turn_dispatched')).map((d) => d.attempt)).toEqual([1, 2]);
    expect(api.requests).toHaveLength(5);
  });

  it('a harness gone mid-call stops the relayed model call', async () => {
    const { api, route } = await anthropicRoute();
    api.enqueue({
      kind: 'message',
      content: [{ type: 'text', text: 'a long answer that never ends' }],
      holdAfterEvents: 3,
    });
    const { turns, post } = await relayedTurns(new Map([['', route]]));
    const posted = post('hello').then(
      () => 'settled',
      () => 'failed',
    );
    for (let i = 0; i < 500 && api.requests.length === 0; i++) {
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    // The harness stops (a pod deleted): its running turn is cancelled and the call ends.
    await turns.harness.close();
    for (let i = 0; i < 500 && api.requests[0]?.aborted !== true; i++) {
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    expect(api.requests[0]?.aborted).toBe(true);
    await posted;
  });

  it('quarantines a turn whose harness asks for an agent it was not dispatched to relay, and calls no model', async () => {
    const { api, route } = await anthropicRoute();
    const peer = await startPeer(() => ({ step: 1, agent: 'admin-agent', requestJson: REQUEST, thread: '' }));
    const { post, events } = await relayedTurns(new Map([['', route]]), peer.endpoint);
    const reply = await post('hello');
    expect(reply.status).toBe('ambiguous');
    expect(reply.ambiguous?.reason).toContain('"admin-agent"');
    expect(await events('model_call')).toEqual([]);
    expect(api.requests).toEqual([]);
  });

  it('answers a request that is not a ModelRequest with invalid_argument naming the field, and calls no model', async () => {
    const { api, route } = await anthropicRoute();
    const peer = await startPeer(() => ({
      step: 1,
      agent: '',
      requestJson: '{"messages":[{"role":"system","content":[]}],"tools":[],"toolChoice":"auto"}',
      thread: '',
    }));
    const { post } = await relayedTurns(new Map([['', route]]), peer.endpoint);
    const reply = await post('hello');
    expect(reply).toMatchObject({ status: 'complete', fallback: true });
    const failure = peer.answers[0]?.answer;
    expect(failure?.$case).toBe('failure');
    expect(failure?.$case === 'failure' ? failure.value : undefined).toMatchObject({
      code: 'invalid_argument',
      retryable: false,
      message: expect.stringContaining('model_request.request_json.messages.0.role') as unknown,
    });
    expect(api.requests).toEqual([]);
  });
});

/** A Messages API server that must not be called, and a route to it. */
async function anthropicRoute(): Promise<{ api: MessagesApiServer; route: ModelRoute }> {
  const api = await MessagesApiServer.start({ apiKey: NO_KEY });
  closers.push(() => api.close());
  return { api, route: { provider: ModelApi.Anthropic, model: 'm', baseUrl: api.url, namespace } };
}

const REQUEST = JSON.stringify({
  messages: [{ role: 'user', content: [{ type: 'text', text: 'hello' }] }],
  tools: [],
  toolChoice: 'auto',
});

/**
 * A harness peer with a genuine certificate of the namespace that sends one model request
 * and ends the turn failed with what it was answered (it reports no turn of its own).
 */
async function startPeer(
  ask: () => { step: number; agent: string; requestJson: string; thread: string },
): Promise<{ endpoint: string; answers: ModelAnswer[] }> {
  const credentials = await testHarnessServerCredentials(namespace, pino({ level: 'silent' }));
  const answers: ModelAnswer[] = [];
  const server = new Server();
  server.addService(HarnessService, {
    runTurn: (call: ServerDuplexStream<TurnInput, TurnOutput>) => {
      call.on('data', (input: TurnInput) => {
        if (input.input?.$case === 'start') {
          call.write({ output: { $case: 'modelRequest', value: ask() } });
        }
        if (input.input?.$case === 'modelAnswer') {
          answers.push(input.input.value);
          const failure = input.input.value.answer;
          const message = failure?.$case === 'failure' ? failure.value.message : 'answered';
          call.write({
            output: {
              $case: 'result',
              value: {
                outcome: {
                  $case: 'failed',
                  value: { code: 'invalid_argument', message, retryable: false },
                },
              },
            },
          });
        }
      });
      call.on('error', () => undefined);
      call.on('end', () => call.end());
    },
  });
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', credentials, (error, bound) =>
      error === null ? resolve(bound) : reject(error),
    ),
  );
  closers.push(() => new Promise<void>((resolve) => server.tryShutdown(() => resolve())));
  return { endpoint: `127.0.0.1:${String(port)}`, answers };
}
