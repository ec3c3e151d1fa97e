import { describe, expect, it } from '@jest/globals';
import { ToolEffect } from '../turn/turn-records';
import type { AgentMcpServer } from '../../proto/gen/polychrome/harness/v1/harness';
import type { McpServerConfig } from '../tools/mcp-server-config';
import type { McpServerListing } from '../tools/mcp-tools';
import { mcpServersFromProto, mcpServersToProto } from './agent-mcp-codec';
import { AgentMcpServers, listAgentMcp, type AgentMcpRunner } from './agent-mcp-servers';

const http: AgentMcpServer = {
  name: 'lookup',
  transport: 'http',
  command: '',
  args: [],
  url: 'https://lookup.example/mcp',
  timeoutMs: 0,
};
const stdio: AgentMcpServer = {
  name: 'files',
  transport: 'stdio',
  command: 'npx',
  args: ['-y', 'server'],
  url: '',
  timeoutMs: 9_000,
};

describe('DispatchedAgent.mcp_servers', () => {
  it('reads both transports and writes them back as they came', () => {
    const servers = mcpServersFromProto([http, stdio], 'start.agents[0].mcp_servers');
    expect(servers).toEqual([
      { name: 'lookup', transport: 'http', url: 'https://lookup.example/mcp' },
      {
        name: 'files',
        transport: 'stdio',
        command: 'npx',
        args: ['-y', 'server'],
        timeoutMs: 9_000,
      },
    ]);
    expect(mcpServersToProto(servers)).toEqual([http, stdio]);
  });

  it.each([
    [
      'a URL that is not http(s)',
      { ...http, url: 'file:///etc/passwd' },
      /\[0\]: transport http takes an http:\/\/ or https:\/\/ url/u,
    ],
    ['http with a command', { ...http, command: 'sh' }, /\[0\]: transport http takes/u],
    [
      'stdio without a command',
      { ...stdio, command: '' },
      /\[0\]: transport stdio takes a command/u,
    ],
    [
      'an unknown transport',
      { ...http, transport: 'grpc' },
      /\[0\]\.transport: is "grpc": stdio or http/u,
    ],
    [
      'a name that is not a DNS label',
      { ...http, name: 'My_Server' },
      /\[0\]\.name: is "My_Server", not a DNS label/u,
    ],
  ])('refuses %s, naming the field', (_, server, message) => {
    expect(() => mcpServersFromProto([server], 'start.agents[0].mcp_servers')).toThrow(message);
  });

  it('refuses a name repeated within an agent', () => {
    expect(() => mcpServersFromProto([http, http], 'f')).toThrow(/f\[1\]\.name: repeats lookup/u);
  });
});

/** A runner whose server lists one tool and counts the calls it runs. */
function fakeRunner(server: string, calls: string[]): AgentMcpRunner {
  return {
    serverNames: [server],
    listToolsByServer: (): Promise<readonly McpServerListing[]> =>
      Promise.resolve([
        {
          server,
          tools: [
            {
              name: `${server}/t`,
              server,
              tool: 't',
              description: '',
              inputSchema: { type: 'object' },
              effect: ToolEffect.Pure,
            },
          ],
        },
      ]),
    call: (request) => {
      calls.push(request.name);
      return Promise.resolve({ content: 'ran', isError: false });
    },
    callPaid: (request) => {
      calls.push(`paid ${request.name}`);
      return Promise.resolve({
        content: 'paid',
        isError: false,
        paymentResponse: '',
        paymentNotTaken: false,
        outcomeUnknownReason: '',
      });
    },
    close: () => Promise.resolve(),
  };
}

describe('listAgentMcp', () => {
  it("lists each agent's own servers, leaves out one named as the conversation's, and routes calls by server", async () => {
    const calls: string[] = [];
    const made: string[] = [];
    const pool = new AgentMcpServers((config: McpServerConfig) => {
      made.push(config.name);
      return Promise.resolve(fakeRunner(config.name, calls));
    });
    const lookup = mcpServersFromProto([http], 'f');
    const shadow = mcpServersFromProto([{ ...http, name: 'shared' }], 'f');
    const turn = await listAgentMcp(
      pool,
      new Map([
        ['lead', { servers: lookup, requireApproval: ['lookup/*'] }],
        ['helper', { servers: shadow, requireApproval: [] }],
      ]),
      ['shared'],
      AbortSignal.timeout(5_000),
    );
    expect(turn.listingsOf('lead').map((l) => l.server)).toEqual(['lookup']);
    expect(turn.listingsOf('helper')).toEqual([]);
    expect(turn.listingsOf('nobody')).toEqual([]);
    expect(turn.rulesOf('lead')).toEqual(['lookup/*']);
    expect(turn.shadowed).toEqual([{ agent: 'helper', server: 'shared' }]);
    expect(made).toEqual(['lookup']);
    const fallback = fakeRunner('harness', calls);
    const router = turn.route(fallback);
    const call = (name: string) =>
      router.call(
        { turnId: 't', toolCallId: 'c', name, input: {}, argsJson: '{}', step: 1, maxSteps: 8 },
        { signal: AbortSignal.timeout(1_000), timeoutMs: 1_000 },
      );
    await call('lookup/t');
    await call('shared/t');
    expect(calls).toEqual(['lookup/t', 'shared/t']);
    // Paid calls go the same way; with no fallback, one no server runs is not sent.
    const request = (name: string) =>
      ({
        turnId: 't',
        toolCallId: 'c',
        name,
        input: {},
        argsJson: '{}',
        step: 1,
        maxSteps: 8,
      }) as const;
    const options = { signal: AbortSignal.timeout(1_000), timeoutMs: 1_000 };
    const paid = { payment: '{}', protocol: 'x402' };
    await turn.routePaid(fallback)?.callPaid(request('lookup/t'), paid, options);
    await turn.routePaid(fallback)?.callPaid(request('shared/t'), paid, options);
    expect(calls.slice(2)).toEqual(['paid lookup/t', 'paid shared/t']);
    const unsent = await turn.routePaid(undefined)?.callPaid(request('shared/t'), paid, options);
    expect(unsent).toMatchObject({ paymentNotTaken: true, isError: true });
    calls.length = 2;
    // A later turn reuses the connection of the same configuration.
    await listAgentMcp(
      pool,
      new Map([['lead', { servers: lookup, requireApproval: [] }]]),
      [],
      AbortSignal.timeout(5_000),
    );
    expect(made).toEqual(['lookup']);
    await pool.close();
  });
});
