/**
 * An Agent's own MCP servers, end to end (docs/turns.md, "Agents"): the roster records the
 * Agent's `spec.tools.mcpServers`, the control plane dispatches them with the agent, and the
 * real harness server connects to a real MCP server over streamable HTTP
 * (test/support/mcp-servers/http-server.ts) and offers its tools to that agent only. The
 * lead, which has the server, calls its tool; the helper it delegates to, which has not,
 * asks for the same tool and is refused as not offered: recorded, and the server never
 * called. Each model is called by the control plane's relay through the real Anthropic SDK
 * against the local Messages API.
 */
import { afterEach, describe, expect, it } from '@jest/globals';
import pino from 'pino';
import { decodePayload, type EventPayloads } from '../../common/event-kinds';
import { readyStatus } from '../../test/support/in-memory-conversations';
import { startTestHttpMcpServer } from '../../test/support/mcp-servers/http-server';
import {
  MessagesApiServer,
  type RecordedRequest,
  type ScriptedReply,
} from '../../test/support/messages-api-server';
import { noSecrets } from '../../test/support/no-secrets';
import { startRealTurns, TEST_OWNER } from '../../test/support/real-turns';
import type { Agent } from '../api/v1alpha1/agent-resource';
import type { ModelConfig } from '../api/v1alpha1/model-config-resource';
import type { AgentDirectory } from '../controller/agent-resource-reads';
import { NO_KEY, ProviderModelRelay } from '../models/provider-model-relay';

let closers: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const close of closers.reverse()) await close();
  closers = [];
});

/** The wire name of the lead's MCP tool `lookup/echo` (common/model/tool-names.ts). */
const ECHO = 'lookup__echo';

function systemOf(request: RecordedRequest): string {
  const system = (request.body as { system?: unknown }).system;
  return typeof system === 'string'
    ? system
    : Array.isArray(system)
      ? system.map((block: { text?: string }) => block.text ?? '').join('')
      : '';
}

function toolsOf(request: RecordedRequest): string[] {
  const tools = (request.body as { tools?: { name: string }[] }).tools ?? [];
  return tools.map((tool) => tool.name);
}

/** The lead calls its tool and asks the helper; the helper asks for the lead's tool. */
function responder(): (request: RecordedRequest) => ScriptedReply {
  const calls = new Map<string, number>();
  return (request) => {
    const who = systemOf(request).startsWith('You are lead.') ? 'lead' : 'helper';
    const call = (calls.get(who) ?? 0) + 1;
    calls.set(who, call);
    const use = (id: string, name: string, input: Record<string, unknown> = {}) => ({
      type: 'tool_use' as const,
      id,
      name,
      input,
    });
    const text = (t: string): ScriptedReply => ({
      kind: 'message',
      content: [{ type: 'text', text: t }],
    });
    if (who === 'lead') {
      return call === 1
        ? {
            kind: 'message',
            content: [
              use('toolu_lead_echo', ECHO),
              use('toolu_ask_helper', '__delegate_to', { agent: 'helper', task: 'Look it up.' }),
            ],
          }
        : text('lead: done');
    }
    return call === 1
      ? { kind: 'message', content: [use('toolu_helper_echo', ECHO)] }
      : text('helper: I may not use that tool');
  };
}

describe("an Agent's own MCP servers", () => {
  it('offers the server to its agent only: the delegate asking for its tool is refused, and the server never hears of it', async () => {
    const mcp = await startTestHttpMcpServer();
    closers.push(() => mcp.kill());
    const api = await MessagesApiServer.start({ apiKey: NO_KEY, respond: responder() });
    closers.push(() => api.close());
    const agent = (name: string, spec: Partial<Agent['spec']>): Agent => ({
      apiVersion: 'polychrome.dev/v1alpha1',
      kind: 'Agent',
      metadata: { name, namespace: 'any' },
      spec: { modelRef: { name: 'claude' }, systemPrompt: `You are ${name}.`, ...spec },
    });
    const agents = new Map([
      [
        'lead',
        agent('lead', {
          delegates: ['helper'],
          tools: { mcpServers: [{ name: 'lookup', transport: 'http', url: mcp.url }] },
        }),
      ],
      ['helper', agent('helper', {})],
    ]);
    const claude: ModelConfig = {
      apiVersion: 'polychrome.dev/v1alpha1',
      kind: 'ModelConfig',
      metadata: { name: 'claude', namespace: 'any' },
      spec: { provider: 'anthropic', model: 'claude-mcp', baseUrl: api.url },
    };
    const directory: AgentDirectory = {
      agent: (name) => agents.get(name),
      modelConfig: (name) => (name === 'claude' ? claude : undefined),
    };
    const relay = new ProviderModelRelay({
      secrets: noSecrets,
      account: { name: 'polychrome-control-plane', namespace: 'polychrome-system' },
      adapter: { maxAttempts: 1 },
    });
    const turns = await startRealTurns({
      replies: [],
      logger: pino({ level: process.env.TEST_LOG ?? 'silent' }),
      agentMcp: true,
      coordinator: { maxAttempts: 1, modelRelay: relay, agentDirectory: () => directory },
    });
    closers.push(() => turns.close());
    const conversation = turns.conversations.add(
      { owner: TEST_OWNER.identity, agentRef: { name: 'lead' }, tools: {} },
      { status: readyStatus(turns.harness.endpoint) },
    );
    const uid = conversation.metadata.uid ?? '';
    const answer = await turns.coordinator.postMessage(
      TEST_OWNER,
      { conversationId: uid, text: 'look it up', idempotencyKey: 'k1' },
      AbortSignal.timeout(20_000),
    );
    const events = async <K extends keyof EventPayloads>(kind: K): Promise<EventPayloads[K][]> =>
      (await turns.journal.entries(`conv-${uid}`))
        .filter((e) => e.kind === kind)
        .map((e) => decodePayload(kind, e.payload));

    expect(answer).toMatchObject({ status: 'complete', reply: 'lead: done' });
    // Offered: to the lead, not to the helper.
    const offered = api.requests.map((r) => [
      systemOf(r).split('\n')[0],
      toolsOf(r).includes(ECHO),
    ]);
    expect(offered).toEqual([
      ['You are lead.', true],
      ['You are helper.', false],
      ['You are helper.', false],
      ['You are lead.', true],
    ]);
    // The lead's call ran on the server; the helper's was refused and recorded, never run.
    const results = await events('tool_result');
    const byId = new Map(results.map((r) => [r.toolCallId, r]));
    expect(byId.get('toolu_lead_echo')).toMatchObject({
      content: 'echo over http',
      isError: false,
    });
    // Not offered to the helper, so not even its alias maps back to the lead's tool.
    expect(byId.get('toolu_helper_echo')).toMatchObject({
      isError: true,
      content: `Tool ${ECHO} is not available in this conversation.`,
      thread: 'toolu_ask_helper',
    });
    expect(mcp.calls).toEqual(['echo']);
    // The roster records the lead's server, so replay knows which servers it had.
    const [roster] = await events('agent_roster');
    const recorded = JSON.parse(roster?.rosterJson ?? '{}') as {
      agents: { name: string; mcpServers?: unknown }[];
    };
    expect(recorded.agents.map((a) => [a.name, a.mcpServers])).toEqual([
      ['helper', undefined],
      ['lead', [{ name: 'lookup', transport: 'http', url: mcp.url }]],
    ]);
  });
});
