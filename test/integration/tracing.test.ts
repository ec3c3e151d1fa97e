import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { pollUntil } from '../../hack/lib/processes';
import { join } from 'node:path';
import { repoRoot } from '../../hack/lib/paths';
import { NO_KEY } from '../../operator/models/provider-model-relay';
import {
  echoReply,
  echoResponder,
  MessagesApiServer,
  systemOf,
  toolDirective,
} from '../support/messages-api-server';
import { OtelCollector, type CollectedSpan } from './support/otel-collector';
import { apiCall } from './support/public-api';
import { startTurnStack, type TurnStack } from './support/turn-stack';

// One turn's trace across the three planes, as a real OpenTelemetry Collector (hack/otelcol)
// receives it over OTLP/HTTP: the caller's traceparent is the API span's parent, and the
// context crosses into the state plane and the harness over gRPC metadata.

/**
 * How closely two spans' times compare. The OpenTelemetry SDK stamps a span's start with
 * `Date.now()` (whole milliseconds) and its end as that start plus a duration read from the
 * performance clock, so each span's times are off by its own part of a millisecond: a span
 * that starts as another ends (a handoff) can read up to 1 ms before that end.
 */
const SPAN_CLOCK_NS = 1_000_000n;
const INTERNAL = 1;
const SERVER = 2;
const CLIENT = 3;

describe('OpenTelemetry traces across the three planes', () => {
  let collector: OtelCollector | undefined;
  let stack: TurnStack | undefined;
  let token = '';
  let uid = '';

  beforeAll(async () => {
    collector = await OtelCollector.start();
    const env = { OTEL_EXPORTER_OTLP_ENDPOINT: collector.endpoint, OTEL_BSP_SCHEDULE_DELAY: '100' };
    stack = await startTurnStack({
      namespacePrefix: 'traces',
      controlPlaneEnv: env,
      harnessEnv: env,
      stateEnv: env,
    });
    token = await stack.mintToken('test:owner');
    uid = await stack.createConversation('traced', {
      owner: 'test:owner',
      tools: { builtin: ['calculator'] },
    });
  }, 150_000);

  afterAll(async () => {
    await stack?.stop();
    await collector?.stop();
  }, 60_000);

  /**
   * Posts `text` (idempotency key `key`) to the Agent conversation `uid` under a trace of its
   * own, then waits until the collector holds, of that trace, at least `least[prefix]` spans
   * whose name starts with each prefix; resolves with the answer and the trace's spans.
   */
  const tracedPost = async (
    uid: string,
    text: string,
    key: string,
    least: Readonly<Record<string, number>>,
  ): Promise<{ answer: Awaited<ReturnType<typeof apiCall>>; spans: CollectedSpan[] }> => {
    const [s, c] = [stack, collector];
    if (s === undefined || c === undefined) throw new Error('the stack did not start');
    const traceId = randomBytes(16).toString('hex');
    const answer = await apiCall(s.apiUrl, 'POST', `/v1/conversations/${uid}/messages`, {
      token,
      headers: { traceparent: `00-${traceId}-${randomBytes(8).toString('hex')}-01` },
      body: { text, idempotencyKey: key },
    });
    expect(answer.status).toBe(200);
    const spans = await pollUntil(
      `the spans of turn ${key} in the collector’s file`,
      () => {
        const mine = c.spans().filter((span) => span.traceId === traceId);
        const enough = Object.entries(least).every(
          ([prefix, n]) => mine.filter((span) => span.name.startsWith(prefix)).length >= n,
        );
        return Promise.resolve(enough ? mine : undefined);
      },
      { timeoutMs: 30_000, intervalMs: 250 },
    );
    return { answer, spans };
  };

  it('holds spans of all three services in the caller’s trace, with correct parents', async () => {
    const s = stack;
    const c = collector;
    if (s === undefined || c === undefined) throw new Error('the stack did not start');
    await s.withDiagnostics(async () => {
      const traceId = randomBytes(16).toString('hex');
      const callerSpan = randomBytes(8).toString('hex');
      const answer = await apiCall(s.apiUrl, 'POST', `/v1/conversations/${uid}/messages`, {
        token,
        headers: { traceparent: `00-${traceId}-${callerSpan}-01` },
        body: {
          text: `add them ${toolDirective('calculator', { expression: '6*7' })}`,
          idempotencyKey: 'k-traced',
        },
      });
      expect(answer.status).toBe(200);

      // Every plane exports in batches; wait until the harness's last spans and the API's
      // own (it ends when the response closes) have arrived.
      const spans = await pollUntil(
        'the turn’s spans in the collector’s file',
        () => {
          const mine = c.spans().filter((span) => span.traceId === traceId);
          const names = new Set(mine.map((span) => span.name));
          return Promise.resolve(
            names.has('POST /v1/conversations/{conversationId}/messages') &&
              names.has('execute_tool calculator') &&
              names.has('invoke_agent agent') &&
              mine.filter((span) => span.name.startsWith('chat ')).length >= 2 &&
              mine.filter(
                (span) => span.service === 'polychrome-state' && span.name.endsWith('/Append'),
              ).length >= 3
              ? mine
              : undefined,
          );
        },
        { timeoutMs: 30_000, intervalMs: 250 },
      );
      const byId = new Map(spans.map((span) => [span.spanId, span]));
      const parentOf = (span: CollectedSpan): CollectedSpan | undefined =>
        byId.get(span.parentSpanId);
      const one = (name: string, service: string): CollectedSpan => {
        const found = spans.filter((span) => span.name === name && span.service === service);
        expect(found.map((span) => `${span.service} ${span.name}`)).toEqual([`${service} ${name}`]);
        return found[0] as CollectedSpan;
      };

      expect(new Set(spans.map((span) => span.service))).toEqual(
        new Set(['polychrome-control-plane', 'polychrome-state', 'polychrome-harness']),
      );

      const api = one(
        'POST /v1/conversations/{conversationId}/messages',
        'polychrome-control-plane',
      );
      expect(api.kind).toBe(SERVER);
      expect(api.parentSpanId).toBe(callerSpan);
      expect(api.attributes).toMatchObject({
        'http.request.method': 'POST',
        'http.route': '/v1/conversations/{conversationId}/messages',
        'http.response.status_code': 200,
      });

      // The API span is the control plane's one span of the turn: the turn is written onto
      // it, and the journal and harness calls make no CLIENT spans.
      expect(api.attributes).toMatchObject({
        'polychrome.turn.operation': 'postMessage',
        'polychrome.conversation.id': uid,
        'polychrome.turn.status': 'complete',
      });
      expect(String(api.attributes['polychrome.turn.id'])).toMatch(/^.+$/u);
      expect(
        spans.filter((span) => span.service === 'polychrome-control-plane').map((s) => s.name),
      ).toEqual(['POST /v1/conversations/{conversationId}/messages']);

      // Batch one, batch two and the harness's steps are the coordinator's appends: each
      // is the state plane's SERVER span, a child of the API span.
      const appends = spans.filter(
        (span) => span.service === 'polychrome-state' && span.name.endsWith('/Append'),
      );
      expect(appends.length).toBeGreaterThanOrEqual(3);
      for (const append of appends) {
        expect([append.name, append.kind, append.parentSpanId]).toEqual([
          'polychrome.state.v1.Journal/Append',
          SERVER,
          api.spanId,
        ]);
      }

      const runTurn = one('polychrome.harness.v1.Harness/RunTurn', 'polychrome-harness');
      expect(runTurn.kind).toBe(SERVER);
      expect(runTurn.parentSpanId).toBe(api.spanId);
      expect(runTurn.attributes).toMatchObject({
        'polychrome.conversation.id': uid,
        'polychrome.turn.id': api.attributes['polychrome.turn.id'],
        'polychrome.turn.outcome': 'completed',
      });
      // The harness's steps are committed from within the call.
      expect(
        appends.some((span) => span.startNs > runTurn.startNs && span.endNs < runTurn.endNs),
      ).toBe(true);

      // The turn's one agent (its Conversation names none: the default name) is a span of
      // its own inside RunTurn, the parent of its model and tool calls.
      const agent = one('invoke_agent agent', 'polychrome-harness');
      expect(agent.kind).toBe(INTERNAL);
      expect(agent.parentSpanId).toBe(runTurn.spanId);
      expect(agent.attributes).toMatchObject({
        'gen_ai.operation.name': 'invoke_agent',
        'gen_ai.provider.name': 'anthropic',
        'gen_ai.agent.name': 'agent',
        'gen_ai.conversation.id': uid,
        'polychrome.conversation.id': uid,
      });
      expect(String(agent.attributes['gen_ai.request.model'])).not.toBe('');

      // Two model calls (the tool call, then the answer), after the GenAI conventions.
      const chats = spans.filter((span) => span.name.startsWith('chat '));
      expect(chats).toHaveLength(2);
      for (const chat of chats) {
        expect(chat.service).toBe('polychrome-harness');
        expect(chat.kind).toBe(CLIENT);
        expect(parentOf(chat)?.spanId).toBe(agent.spanId);
        expect(chat.name).toBe(`chat ${String(chat.attributes['gen_ai.request.model'])}`);
        expect(chat.attributes).toMatchObject({
          'gen_ai.operation.name': 'chat',
          'gen_ai.provider.name': 'anthropic',
          'gen_ai.usage.input_tokens': 10,
          'gen_ai.usage.output_tokens': 5,
          'gen_ai.conversation.id': uid,
        });
        expect(String(chat.attributes['gen_ai.response.id'])).toMatch(/^msg_/u);
      }
      expect(chats.map((chat) => chat.attributes['gen_ai.response.finish_reasons'])).toEqual(
        expect.arrayContaining([['tool_use'], ['end_turn']]),
      );

      // The tool runs between the two model calls, in the agent: a sibling of the calls.
      const tool = one('execute_tool calculator', 'polychrome-harness');
      expect(tool.kind).toBe(INTERNAL);
      expect(tool.parentSpanId).toBe(agent.spanId);
      expect(tool.attributes).toMatchObject({
        'gen_ai.operation.name': 'execute_tool',
        'gen_ai.tool.name': 'calculator',
        'gen_ai.conversation.id': uid,
      });
      expect(String(tool.attributes['gen_ai.tool.call.id'])).not.toBe('');
      expect(tool.status.code ?? 0).not.toBe(2);

      // The trace id is on the planes' log lines written inside the spans.
      const harness = await s.harness('traced');
      const turnStarted = readFileSync(harness.logPath, 'utf8')
        .split('\n')
        .find((line) => line.includes('"turn started"') && line.includes(uid));
      expect(turnStarted).toContain(`"trace_id":"${traceId}"`);
      expect(turnStarted).toContain(`"span_id":"${runTurn.spanId}"`);
    });
  }, 120_000);

  it('names the agent, counts cached tokens, hands an MCP server the tool span, and names the conversation on every span of both planes', async () => {
    const s = stack;
    const c = collector;
    if (s === undefined || c === undefined) throw new Error('the stack did not start');
    await s.withDiagnostics(async () => {
      const agentUid = await s.createConversation('traced-agent', {
        owner: 'test:owner',
        agent: { name: 'support', systemPrompt: 'You are a test agent. Be brief.' },
        tools: {
          mcpServers: [
            {
              name: 'meta',
              transport: 'stdio',
              command: process.execPath,
              args: [
                '--import',
                'tsx',
                join(repoRoot, 'test', 'support', 'mcp-servers', 'meta-server.ts'),
              ],
            },
          ],
        },
      });
      // The model reports prompt-cache counts, as the Messages API does.
      s.messages.setResponder((request) => ({
        ...echoReply(request.body),
        usage: {
          input_tokens: 10,
          output_tokens: 5,
          cache_read_input_tokens: 1200,
          cache_creation_input_tokens: 30,
        },
      }));
      const traceId = randomBytes(16).toString('hex');
      let reply: unknown;
      try {
        const answer = await apiCall(s.apiUrl, 'POST', `/v1/conversations/${agentUid}/messages`, {
          token,
          headers: { traceparent: `00-${traceId}-${randomBytes(8).toString('hex')}-01` },
          body: { text: `look ${toolDirective('meta/meta')}`, idempotencyKey: 'k-agent' },
        });
        expect(answer.status).toBe(200);
        reply = (answer.body as { reply?: unknown }).reply;
      } finally {
        s.messages.setResponder(echoResponder);
      }

      const spans = await pollUntil(
        'the named agent’s turn in the collector’s file',
        () => {
          const mine = c.spans().filter((span) => span.traceId === traceId);
          const names = new Set(mine.map((span) => span.name));
          return Promise.resolve(
            names.has('execute_tool meta/meta') &&
              names.has('invoke_agent support') &&
              names.has('POST /v1/conversations/{conversationId}/messages') &&
              mine.filter((span) => span.name.startsWith('chat ')).length >= 2
              ? mine
              : undefined,
          );
        },
        { timeoutMs: 30_000, intervalMs: 250 },
      );
      const named = (name: string): CollectedSpan[] => spans.filter((span) => span.name === name);
      const [runTurn] = named('polychrome.harness.v1.Harness/RunTurn');
      const agents = named('invoke_agent support');
      expect(agents).toHaveLength(1);
      const agent = agents[0] as CollectedSpan;
      expect([agent.kind, agent.parentSpanId]).toEqual([INTERNAL, runTurn?.spanId]);
      expect(agent.attributes).toMatchObject({
        'gen_ai.operation.name': 'invoke_agent',
        'gen_ai.agent.name': 'support',
        'gen_ai.conversation.id': agentUid,
      });

      const chats = spans.filter((span) => span.name.startsWith('chat '));
      for (const chat of chats) {
        expect(chat.parentSpanId).toBe(agent.spanId);
        expect(chat.attributes).toMatchObject({
          'gen_ai.usage.cache_read.input_tokens': 1200,
          'gen_ai.usage.cache_creation.input_tokens': 30,
        });
      }

      // The MCP call is the execute_tool span's: the server got its context in _meta.
      const [tool] = named('execute_tool meta/meta');
      expect(tool?.parentSpanId).toBe(agent.spanId);
      expect(tool?.attributes).toMatchObject({
        'mcp.method.name': 'tools/call',
        'network.transport': 'pipe',
        'gen_ai.tool.name': 'meta/meta',
      });
      const sent = /^tool meta\/meta said: (\{.*\})$/u.exec(String(reply))?.[1];
      expect(JSON.parse(sent ?? 'null')).toEqual({
        traceparent: `00-${traceId}-${tool?.spanId}-01`,
      });

      // Every span that names the conversation, in both planes (a reconcile pass, the API
      // request, the harness's), names it twice: Polychrome's key and the GenAI one.
      const ofConversation = await pollUntil(
        'a reconcile pass of the conversation',
        () => {
          const all = c
            .spans()
            .filter(
              (span) =>
                span.attributes['polychrome.conversation.id'] === agentUid ||
                span.attributes['gen_ai.conversation.id'] === agentUid,
            );
          return Promise.resolve(
            all.some((span) => span.name === 'reconcile Conversation') ? all : undefined,
          );
        },
        { timeoutMs: 30_000, intervalMs: 250 },
      );
      expect(new Set(ofConversation.map((span) => span.name))).toEqual(
        new Set([
          'reconcile Conversation',
          'POST /v1/conversations/{conversationId}/messages',
          'polychrome.harness.v1.Harness/RunTurn',
          'invoke_agent support',
          `chat ${String(agent.attributes['gen_ai.request.model'])}`,
          'execute_tool meta/meta',
        ]),
      );
      for (const span of ofConversation) {
        expect([span.name, span.attributes['gen_ai.conversation.id']]).toEqual([
          span.name,
          span.attributes['polychrome.conversation.id'],
        ]);
      }
    });
  }, 150_000);

  it('traces a lead that asks a panel of two agents: one invoke_agent span per agent, each delegate under the agent that asked', async () => {
    const s = stack;
    if (s === undefined) throw new Error('the stack did not start');
    // The Agents' model: a ModelConfig on a Messages API of their own, called by the control
    // plane's relay (which sends its placeholder key). The lead calls the calculator and asks
    // the researcher and the checker in one reply (a panel, docs/turns.md "Delegation"); the
    // researcher's task asks for the calculator too, and the echo responder calls it.
    const models = await MessagesApiServer.start({ apiKey: NO_KEY });
    models.setResponder((request) => {
      const messages = (request.body as { messages: unknown[] }).messages;
      if (!systemOf(request).startsWith('You are lead.')) return echoReply(request.body);
      if (messages.length > 1) {
        return { kind: 'message', content: [{ type: 'text', text: 'lead: both answered' }] };
      }
      const ask = (id: string, agent: string, task: string) =>
        ({ type: 'tool_use', id, name: '__delegate_to', input: { agent, task } }) as const;
      return {
        kind: 'message',
        content: [
          {
            type: 'tool_use',
            id: 'toolu_lead_sum',
            name: 'calculator',
            input: { expression: '1+1' },
          },
          ask(
            'toolu_ask_researcher',
            'researcher',
            `sum ${toolDirective('calculator', { expression: '6*7' })}`,
          ),
          ask('toolu_ask_checker', 'checker', 'Was it paid twice?'),
        ],
      };
    });
    try {
      await s.withDiagnostics(async () => {
        const calculator = { tools: { builtin: ['calculator'] } };
        await s.createAgents(
          { name: 'panel-claude', model: 'claude-panel', baseUrl: models.url },
          {
            researcher: { description: 'Finds figures.', ...calculator },
            checker: { description: 'Checks payments.' },
            lead: { delegates: ['researcher', 'checker'], ...calculator },
          },
        );
        const panelUid = await s.createConversation('traced-panel', {
          owner: 'test:owner',
          agent: undefined,
          agentRef: { name: 'lead' },
        });
        const { answer, spans } = await tracedPost(panelUid, 'Was I charged twice?', 'k-panel', {
          'invoke_agent ': 3,
          'chat ': 5,
          'execute_tool ': 2,
          'polychrome.harness.v1.Harness/RunTurn': 1,
          'POST /v1/conversations/{conversationId}/messages': 1,
        });
        expect(answer.body).toMatchObject({ status: 'complete', reply: 'lead: both answered' });
        // Five model calls: the lead's two, the researcher's two (around its calculator), the
        // checker's one.
        expect(models.requests).toHaveLength(5);

        const harness = spans.filter((span) => span.service === 'polychrome-harness');
        const [runTurn] = harness.filter((span) => span.name.endsWith('/RunTurn'));
        // One invoke_agent span per agent of the turn: the lead under RunTurn, each delegate
        // under the lead's (the agent that asked), open side by side.
        const agents = harness.filter((span) => span.name.startsWith('invoke_agent '));
        expect(agents.map((span) => span.name).sort()).toEqual([
          'invoke_agent checker',
          'invoke_agent lead',
          'invoke_agent researcher',
        ]);
        const agentSpan = (name: string): CollectedSpan =>
          agents.find((span) => span.name === `invoke_agent ${name}`) as CollectedSpan;
        const lead = agentSpan('lead');
        const researcher = agentSpan('researcher');
        const checker = agentSpan('checker');
        expect([lead.kind, lead.parentSpanId]).toEqual([INTERNAL, runTurn?.spanId]);
        for (const [delegate, name] of [
          [researcher, 'researcher'],
          [checker, 'checker'],
        ] as const) {
          expect([delegate.kind, delegate.parentSpanId]).toEqual([INTERNAL, lead.spanId]);
          expect(delegate.attributes).toMatchObject({
            'gen_ai.operation.name': 'invoke_agent',
            'gen_ai.agent.name': name,
            'gen_ai.request.model': 'claude-panel',
          });
        }
        // A panel: the two threads were open at once, inside the lead's span.
        const [r, k] = [researcher, checker];
        expect(r.startNs < k.endNs && k.startNs < r.endNs).toBe(true);
        for (const thread of [r, k]) {
          expect(lead.startNs <= thread.startNs && thread.endNs <= lead.endNs + SPAN_CLOCK_NS).toBe(
            true,
          );
        }

        // Every model and tool call is a child of its thread's agent: the lead's two chats
        // and its calculator, the researcher's two chats and its calculator, the checker's chat.
        const under = (parent: CollectedSpan) =>
          harness
            .filter((span) => span.parentSpanId === parent.spanId)
            .filter((span) => !span.name.startsWith('invoke_agent '))
            .map((span) => span.name)
            .sort();
        expect(under(lead)).toEqual([
          'chat claude-panel',
          'chat claude-panel',
          'execute_tool calculator',
        ]);
        expect(under(researcher)).toEqual([
          'chat claude-panel',
          'chat claude-panel',
          'execute_tool calculator',
        ]);
        expect(under(checker)).toEqual(['chat claude-panel']);
        const toolCallIds = harness
          .filter((span) => span.name === 'execute_tool calculator')
          .map((span) => [
            span.parentSpanId === lead.spanId,
            span.attributes['gen_ai.tool.call.id'],
          ]);
        expect(toolCallIds).toContainEqual([true, 'toolu_lead_sum']);

        // The conversation is named on every span of the turn that the harness made, and on
        // the API's, under both keys.
        for (const span of [...harness, ...spans.filter((x) => x.name.startsWith('POST '))]) {
          expect([span.name, span.attributes['gen_ai.conversation.id']]).toEqual([
            span.name,
            panelUid,
          ]);
          expect([span.name, span.attributes['polychrome.conversation.id']]).toEqual([
            span.name,
            panelUid,
          ]);
        }
      });
    } finally {
      await models.close();
    }
  }, 150_000);

  it('traces a handoff: one invoke_agent span per agent, siblings under the turn, each over its own calls', async () => {
    const s = stack;
    if (s === undefined) throw new Error('the stack did not start');
    // triage hands the turn to billing (docs/turns.md, "Handoffs"), which answers.
    const models = await MessagesApiServer.start({ apiKey: NO_KEY });
    models.setResponder((request) =>
      systemOf(request).startsWith('You are triage.')
        ? {
            kind: 'message',
            content: [
              {
                type: 'tool_use',
                id: 'toolu_handoff',
                name: '__handoff_to',
                input: { agent: 'billing', reason: 'a refund' },
              },
            ],
          }
        : { kind: 'message', content: [{ type: 'text', text: 'billing: refunded' }] },
    );
    try {
      await s.withDiagnostics(async () => {
        await s.createAgents(
          { name: 'handoff-claude', model: 'claude-handoff', baseUrl: models.url },
          { billing: { description: 'Refunds.' }, triage: { handoffs: ['billing'] } },
        );
        const handoffUid = await s.createConversation('traced-handoff', {
          owner: 'test:owner',
          agent: undefined,
          agentRef: { name: 'triage' },
        });
        const { answer, spans } = await tracedPost(handoffUid, 'I was charged twice', 'k-handoff', {
          'invoke_agent ': 2,
          'chat ': 2,
          'polychrome.harness.v1.Harness/RunTurn': 1,
        });
        expect(answer.body).toMatchObject({ status: 'complete', reply: 'billing: refunded' });
        expect(models.requests).toHaveLength(2);

        const harness = spans.filter((span) => span.service === 'polychrome-harness');
        const [runTurn] = harness.filter((span) => span.name.endsWith('/RunTurn'));
        const agents = harness.filter((span) => span.name.startsWith('invoke_agent '));
        expect(agents.map((span) => span.name).sort()).toEqual([
          'invoke_agent billing',
          'invoke_agent triage',
        ]);
        const agentSpan = (name: string): CollectedSpan =>
          agents.find((span) => span.name === `invoke_agent ${name}`) as CollectedSpan;
        const triage = agentSpan('triage');
        const billing = agentSpan('billing');
        // Siblings under the turn's span, one after the other: the handoff ends triage's.
        for (const [span, name] of [
          [triage, 'triage'],
          [billing, 'billing'],
        ] as const) {
          expect([span.kind, span.parentSpanId]).toEqual([INTERNAL, runTurn?.spanId]);
          expect(span.attributes).toMatchObject({
            'gen_ai.operation.name': 'invoke_agent',
            'gen_ai.agent.name': name,
            'gen_ai.conversation.id': handoffUid,
          });
        }
        expect(triage.endNs <= billing.startNs + SPAN_CLOCK_NS).toBe(true);
        // Each agent's model call is a child of its own span.
        const under = (parent: CollectedSpan) =>
          harness.filter((span) => span.parentSpanId === parent.spanId).map((span) => span.name);
        expect(under(triage)).toEqual(['chat claude-handoff']);
        expect(under(billing)).toEqual(['chat claude-handoff']);
        for (const span of harness) {
          expect([span.name, span.attributes['gen_ai.conversation.id']]).toEqual([
            span.name,
            handoffUid,
          ]);
        }
      });
    } finally {
      await models.close();
    }
  }, 150_000);

  it('records a turn call the control plane refuses on the request span, as an exception and not a server fault', async () => {
    const c = collector;
    if (stack === undefined || c === undefined) throw new Error('the stack did not start');
    const traceId = randomBytes(16).toString('hex');
    const missing = '00000000-0000-4000-8000-000000000000';
    const answer = await apiCall(stack.apiUrl, 'POST', `/v1/conversations/${missing}/messages`, {
      token,
      headers: { traceparent: `00-${traceId}-${randomBytes(8).toString('hex')}-01` },
      body: { text: 'nobody is here', idempotencyKey: 'k-missing' },
    });
    expect(answer.status).toBe(404);
    const span = await pollUntil(
      'the refused request’s span in the collector’s file',
      () =>
        Promise.resolve(
          c
            .spans()
            .find(
              (s) =>
                s.traceId === traceId &&
                s.name === 'POST /v1/conversations/{conversationId}/messages',
            ),
        ),
      { timeoutMs: 30_000, intervalMs: 250 },
    );
    expect(span.attributes).toMatchObject({
      'http.response.status_code': 404,
      'polychrome.turn.operation': 'postMessage',
      'polychrome.conversation.id': missing,
    });
    expect(span.attributes['polychrome.turn.id']).toBeUndefined();
    // A 4xx is the caller's: the status stays unset, the refusal is an exception event.
    expect(span.status.code ?? 0).toBe(0);
    expect(span.events.map((event) => [event.name, event.attributes['exception.type']])).toEqual([
      ['exception', 'not_found'],
    ]);
  }, 60_000);
});
