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
import { crewAgent, startAgentTurns } from '../../test/support/agent-turns';
import { startTestHttpMcpServer } from '../../test/support/mcp-servers/http-server';
import {
  systemOf,
  type RecordedRequest,
  type ScriptedReply,
} from '../../test/support/messages-api-server';

let closers: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const close of closers.reverse()) await close();
  closers = [];
});

/** The wire name of the lead's MCP tool `lookup/echo` (common/model/tool-names.ts). */
const ECHO = 'lookup__echo';

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
    const agent = crewAgent;
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
    const { api, post, events, close } = await startAgentTurns({
      agents,
      entry: 'lead',
      respond: responder(),
      spec: { tools: {} },
      agentMcp: true,
    });
    closers.push(close);
    const answer = await post('look it up');

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
