/**
 * An Agent's MCP servers in the roster (docs/turns.md, "Agents"): recorded when it has
 * some, left out of the bytes when it has none (a roster recorded before keeps its digest),
 * one name one server across the roster, and dispatched to the harness with the agent's
 * approval rules.
 */
import { describe, expect, it } from '@jest/globals';
import type { Agent } from '../api/v1alpha1/agent-resource';
import type { McpServerSpec } from '../api/v1alpha1/conversation-spec';
import type { ModelConfig } from '../api/v1alpha1/model-config-resource';
import type { AgentDirectory } from '../controller/agent-resource-reads';
import { recorded, resolveRoster, rosterFromJson } from './agent-roster';
import { dispatchedAgentsOf } from './plan-agents';

const claude: ModelConfig = {
  apiVersion: 'polychrome.dev/v1alpha1',
  kind: 'ModelConfig',
  metadata: { name: 'claude' },
  spec: { provider: 'anthropic', model: 'claude-x' },
};

function agent(name: string, spec: Partial<Agent['spec']>): Agent {
  return {
    apiVersion: 'polychrome.dev/v1alpha1',
    kind: 'Agent',
    metadata: { name },
    spec: { modelRef: { name: 'claude' }, ...spec },
  };
}

function directory(...agents: Agent[]): AgentDirectory {
  return {
    agent: (name) => agents.find((a) => a.metadata.name === name),
    modelConfig: (name) => (name === 'claude' ? claude : undefined),
  };
}

const lookup: McpServerSpec = {
  name: 'lookup',
  transport: 'http',
  url: 'https://lookup.example/mcp',
  timeoutMs: 5_000,
};

/** A lead with the server `lookup`, gated, and a helper without servers. */
const withLookup = directory(
  agent('lead', {
    delegates: ['helper'],
    tools: { mcpServers: [lookup], requireApproval: ['lookup/*'] },
  }),
  agent('helper', {}),
);

describe('an Agent with MCP servers, in the roster', () => {
  it('keeps the digest of a roster without MCP servers (pinned before they were recorded)', () => {
    const roster = resolveRoster(
      'lead',
      directory(
        agent('lead', {
          systemPrompt: 'Lead.',
          delegates: ['helper'],
          tools: { builtin: ['calculator'] },
        }),
        agent('helper', { systemPrompt: 'Help.' }),
      ),
      'ns',
    );
    expect(roster.json).not.toContain('mcpServers');
    expect(roster.sha256).toBe('1459fca56f3abf460445de4f08fd3ff2c82855b0e7894904ac104f186b015343');
  });

  it('records the servers of the Agent that has them, and reads them back from the journal', () => {
    const roster = resolveRoster('lead', withLookup, 'ns');
    expect(roster.roster.agents.map((a) => [a.name, a.mcpServers])).toEqual([
      ['helper', undefined],
      ['lead', [lookup]],
    ]);
    expect(rosterFromJson(roster.json, roster.sha256).roster).toEqual(roster.roster);
    // A changed server is another roster: later turns see the change, this one does not.
    const moved = recorded({
      ...roster.roster,
      agents: roster.roster.agents.map((a) =>
        a.name === 'lead'
          ? { ...a, mcpServers: [{ ...lookup, url: 'https://elsewhere.example/mcp' }] }
          : a,
      ),
    });
    expect(moved.sha256).not.toBe(roster.sha256);
  });

  it('dispatches the servers with their agent only, and that agent its approval rules', () => {
    const { roster } = resolveRoster('lead', withLookup, 'ns', ['calculator']);
    const dispatched = dispatchedAgentsOf(roster);
    expect(dispatched.map((d) => [d.name, d.mcpServers, d.requireApproval])).toEqual([
      ['helper', [], []],
      [
        'lead',
        [
          {
            name: 'lookup',
            transport: 'http',
            command: '',
            args: [],
            url: lookup.url,
            timeoutMs: 5_000,
          },
        ],
        ['calculator', 'lookup/*'],
      ],
    ]);
  });

  it('refuses two Agents that give one server name to different servers, naming both', () => {
    const run = () =>
      resolveRoster(
        'lead',
        directory(
          agent('lead', { delegates: ['helper'], tools: { mcpServers: [lookup] } }),
          agent('helper', {
            tools: { mcpServers: [{ ...lookup, url: 'https://other.example/mcp' }] },
          }),
        ),
        'ns',
      );
    expect(run).toThrow(
      /Agents helper and lead in namespace ns both declare an MCP server named lookup .*rename one of them/u,
    );
    // The same server under one name is one server: accepted.
    expect(() =>
      resolveRoster(
        'lead',
        directory(
          agent('lead', { delegates: ['helper'], tools: { mcpServers: [lookup] } }),
          agent('helper', { tools: { mcpServers: [{ ...lookup }] } }),
        ),
        'ns',
      ),
    ).not.toThrow();
  });
});
