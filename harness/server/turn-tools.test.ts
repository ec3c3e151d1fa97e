import { describe, expect, it } from '@jest/globals';
import { AppError } from '../../common/errors';
import type { McpTool } from '../tools/mcp-connection';
import type { McpServerListing } from '../tools/mcp-tools';
import type { TurnTool } from '../turn/turn-records';
import type { ToolReference } from './tool-spec-codec';
import { isToolOfServers, offeredTools } from './turn-tools';

function mcpTool(server: string, tool: string, effect: McpTool['effect']): McpTool {
  return {
    name: `${server}/${tool}`,
    server,
    tool,
    description: `${tool} on ${server}`,
    inputSchema: { type: 'object' },
    effect,
  };
}

const calculator: TurnTool = {
  name: 'calculator',
  description: 'Arithmetic.',
  inputSchema: { type: 'object' },
  effect: 'pure',
  needsApproval: false,
};

const files: McpServerListing = {
  server: 'files',
  tools: [mcpTool('files', 'read', 'pure'), mcpTool('files', 'write', 'side_effect')],
};
const down: McpServerListing = {
  server: 'down',
  error: new AppError('unavailable', 'MCP server down could not be reached'),
};

describe('isToolOfServers', () => {
  it.each([
    ['files/read', true],
    ['files/dir/read', true],
    ['other/read', false],
    ['files/', false],
    ['/read', false],
    ['files', false],
  ])('%s → %s', (name, expected) => {
    expect(isToolOfServers(name, ['files', 'down'])).toBe(expected);
  });
});

describe('offeredTools', () => {
  type Row = [
    label: string,
    fromControlPlane: TurnTool[],
    references: ToolReference[],
    rules: string[],
    expected: [name: string, effect: string, needsApproval: boolean, reason?: string][],
  ];
  it.each<Row>([
    [
      'control-plane tools first, then each listed MCP tool with its effect',
      [calculator],
      [],
      [],
      [
        ['calculator', 'pure', false],
        ['files/read', 'pure', false],
        ['files/write', 'side_effect', false],
      ],
    ],
    [
      'a deployment rule for one tool',
      [],
      [],
      ['files/write'],
      [
        ['files/read', 'pure', false],
        ['files/write', 'side_effect', true],
      ],
    ],
    [
      'a deployment rule for the whole server',
      [],
      [],
      ['files/*'],
      [
        ['files/read', 'pure', true],
        ['files/write', 'side_effect', true],
      ],
    ],
    [
      'a by-reference entry adds an approval and its reason',
      [],
      [{ name: 'files/read', needsApproval: true, approvalReason: 'reads secrets' }],
      [],
      [
        ['files/read', 'pure', true, 'reads secrets'],
        ['files/write', 'side_effect', false],
      ],
    ],
    [
      'a by-reference entry cannot lift a deployment rule',
      [],
      [{ name: 'files/write', needsApproval: false }],
      ['files/write'],
      [
        ['files/read', 'pure', false],
        ['files/write', 'side_effect', true],
      ],
    ],
    [
      "the control plane's full spec wins over an MCP tool of the same name",
      [{ ...calculator, name: 'files/read', effect: 'side_effect', host: 'control_plane' }],
      [],
      [],
      [
        ['files/read', 'side_effect', false],
        ['files/write', 'side_effect', false],
      ],
    ],
  ])('%s', (_label, fromControlPlane, references, rules, expected) => {
    const offered = offeredTools(fromControlPlane, [files], references, rules);
    expect(
      offered.tools.map((tool) => [
        tool.name,
        tool.effect,
        tool.needsApproval,
        ...(tool.approvalReason === undefined ? [] : [tool.approvalReason]),
      ]),
    ).toEqual(expected);
    expect(offered.unlisted).toEqual([]);
    expect(offered.unresolved).toEqual([]);
  });

  it('leaves out a server that failed, and reports it and the references it left unresolved', () => {
    const references: ToolReference[] = [
      { name: 'down/anything', needsApproval: true },
      { name: 'files/missing', needsApproval: false },
      { name: 'files/read', needsApproval: true },
    ];
    const offered = offeredTools([calculator], [down, files], references, []);
    expect(offered.tools.map((tool) => tool.name)).toEqual([
      'calculator',
      'files/read',
      'files/write',
    ]);
    expect(offered.unlisted).toEqual([{ server: 'down', error: down.error }]);
    expect(offered.unresolved).toEqual([references[0], references[1]]);
  });
});
