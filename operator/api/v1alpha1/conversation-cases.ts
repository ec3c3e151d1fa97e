/**
 * Conversation specs for tests: a valid minimal and a valid full spec, and invalid specs
 * each paired with the error the API server must return (field path and reason). The
 * integration tests apply every case to a real kube-apiserver with the generated CRD; the
 * unit tests check the OpenAPI-level cases locally and that CEL-level cases reach CEL.
 */
import type { ConversationSpec } from './conversation-spec';

/** An invalid spec and the API server's expected rejection. */
export interface InvalidConversationCase {
  readonly name: string;
  /**
   * The whole `spec` to send; `undefined` means send the object without a spec. Typed
   * `unknown` because invalid specs do not fit {@link ConversationSpec}.
   */
  readonly spec: unknown;
  /** Matches the API server's message: the field path, then why it was rejected. */
  readonly expectMessage: RegExp;
  /**
   * Which layer rejects it: `openapi` (type, enum, pattern, bounds, list keys) or `cel`
   * (an `x-kubernetes-validations` rule; only a real API server evaluates those).
   */
  readonly rejectedBy: 'openapi' | 'cel';
}

/** An invalid update: `oldSpec` is created first, then updated to `spec`. */
export interface InvalidConversationUpdateCase extends InvalidConversationCase {
  readonly oldSpec: ConversationSpec;
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/**
 * A pattern for the API server's field error: `<path>: ...<why>` on one line. `why` is a
 * literal fragment of the message (a CEL rule's `message`, or the OpenAPI wording).
 */
export function fieldError(path: string, why: string): RegExp {
  return new RegExp(`${escapeRegExp(path)}: [^\\n]*${escapeRegExp(why)}`);
}

/** The smallest valid spec: everything else takes its default. */
export const validMinimalConversationSpec: ConversationSpec = {
  agent: { systemPrompt: 'You are a helpful assistant.' },
};

/** A valid spec that sets every spec field. */
export const validFullConversationSpec: ConversationSpec = {
  agent: {
    name: 'support',
    model: 'claude-sonnet-5-5',
    systemPrompt: 'You are the support agent. Hand billing questions to the billing agent.',
    maxSteps: 12,
    historyTokens: 20000,
    handoffTargets: ['billing'],
  },
  tools: {
    mcpServers: [
      {
        name: 'everything',
        transport: 'stdio',
        command: 'npx',
        args: ['-y', '@modelcontextprotocol/server-everything'],
        timeoutMs: 30000,
      },
      {
        name: 'tickets',
        transport: 'http',
        url: 'http://tickets.support.svc:8080/mcp',
        timeoutMs: 10000,
      },
    ],
    builtin: ['calculator', 'text_stats'],
    requireApproval: ['calculator', 'tickets/close_ticket', 'everything/*'],
  },
  idleTimeout: '1h30m',
  retention: '72h',
  journalRetention: 'checkpoint',
  visibility: 'shared',
  owner: 'slack:T024BE7LD:U012AB3CD',
  participants: ['slack:T024BE7LD:U045EF6GH', 'email:bob@example.com'],
  sandbox: {
    backend: 'agent-sandbox',
    warmPool: 'polychrome-harness',
    template: 'polychrome-harness',
    resources: {
      requests: { cpu: '250m', memory: '256Mi', 'ephemeral-storage': '1Gi' },
      limits: { cpu: 1, memory: '1Gi', 'ephemeral-storage': '2Gi' },
    },
  },
};

const prompt = 'Be brief.';
const stdioServer = { name: 'everything', transport: 'stdio', command: 'npx' };

/** Specs the API server must reject, each with the message it must give. */
export const invalidConversationCases: readonly InvalidConversationCase[] = [
  {
    name: 'missing spec',
    spec: undefined,
    expectMessage: fieldError('spec', 'Required value'),
    rejectedBy: 'openapi',
  },
  {
    name: 'maxSteps zero',
    spec: { agent: { maxSteps: 0 } },
    expectMessage: fieldError('spec.agent.maxSteps', 'should be greater than or equal to 1'),
    rejectedBy: 'openapi',
  },
  {
    name: 'maxSteps negative',
    spec: { agent: { maxSteps: -3 } },
    expectMessage: fieldError('spec.agent.maxSteps', 'should be greater than or equal to 1'),
    rejectedBy: 'openapi',
  },
  {
    name: 'maxSteps too large',
    spec: { agent: { maxSteps: 65 } },
    expectMessage: fieldError('spec.agent.maxSteps', 'should be less than or equal to 64'),
    rejectedBy: 'openapi',
  },
  {
    name: 'historyTokens below the least',
    spec: { agent: { historyTokens: 255 } },
    expectMessage: fieldError('spec.agent.historyTokens', 'should be greater than or equal to 256'),
    rejectedBy: 'openapi',
  },
  {
    name: 'historyTokens over the most',
    spec: { agent: { historyTokens: 1_000_001 } },
    expectMessage: fieldError(
      'spec.agent.historyTokens',
      'should be less than or equal to 1000000',
    ),
    rejectedBy: 'openapi',
  },
  {
    name: 'maxSteps not an integer',
    spec: { agent: { maxSteps: 'eight' } },
    expectMessage: fieldError('spec.agent.maxSteps', 'integer'),
    rejectedBy: 'openapi',
  },
  {
    name: 'empty model',
    spec: { agent: { model: '' } },
    expectMessage: fieldError('spec.agent.model', 'should be at least 1 chars long'),
    rejectedBy: 'openapi',
  },
  {
    name: 'system prompt too long',
    spec: { agent: { systemPrompt: 'x'.repeat(32769) } },
    expectMessage: fieldError('spec.agent.systemPrompt', 'Too long'),
    rejectedBy: 'openapi',
  },
  {
    name: 'agentRef and an inline agent',
    spec: { agentRef: { name: 'triage' }, agent: { systemPrompt: 'Be brief.' } },
    expectMessage: fieldError(
      'spec.agentRef',
      'spec.agentRef names an Agent, so spec.agent must be left out (its systemPrompt, name, model, maxSteps, historyTokens and handoffTargets come from the Agent and its ModelConfig): set agentRef or agent, not both',
    ),
    rejectedBy: 'cel',
  },
  {
    name: 'agent hands off to itself',
    spec: { agent: { name: 'support', handoffTargets: ['billing', 'support'] } },
    expectMessage: fieldError(
      'spec.agent.handoffTargets',
      'handoffTargets must not include the agent itself (agent.name)',
    ),
    rejectedBy: 'cel',
  },
  {
    name: 'malformed idleTimeout',
    spec: { agent: { systemPrompt: prompt }, idleTimeout: '30 minutes' },
    expectMessage: fieldError('spec.idleTimeout', 'should match'),
    rejectedBy: 'openapi',
  },
  {
    name: 'negative idleTimeout',
    spec: { agent: { systemPrompt: prompt }, idleTimeout: '-5m' },
    expectMessage: fieldError('spec.idleTimeout', 'should match'),
    rejectedBy: 'openapi',
  },
  {
    name: 'malformed retention (days are not a Go duration unit)',
    spec: { agent: { systemPrompt: prompt }, retention: '1d' },
    expectMessage: fieldError('spec.retention', 'should match'),
    rejectedBy: 'openapi',
  },
  {
    name: 'idleTimeout never (never is a retention, not a timeout: omit idleTimeout or set 0s)',
    spec: { agent: { systemPrompt: prompt }, idleTimeout: 'never' },
    expectMessage: fieldError('spec.idleTimeout', 'should match'),
    rejectedBy: 'openapi',
  },
  {
    name: 'retention Never (the keyword is lower case)',
    spec: { agent: { systemPrompt: prompt }, retention: 'Never' },
    expectMessage: fieldError('spec.retention', 'should match'),
    rejectedBy: 'openapi',
  },
  {
    name: 'retention never mixed with a duration',
    spec: { agent: { systemPrompt: prompt }, retention: 'never1h' },
    expectMessage: fieldError('spec.retention', 'should match'),
    rejectedBy: 'openapi',
  },
  {
    name: 'unknown visibility',
    spec: { agent: { systemPrompt: prompt }, visibility: 'public' },
    expectMessage: fieldError('spec.visibility', 'Unsupported value: "public"'),
    rejectedBy: 'openapi',
  },
  {
    name: 'participant without provider',
    spec: { visibility: 'shared', participants: ['alice'] },
    expectMessage: fieldError('spec.participants[0]', 'should match'),
    rejectedBy: 'openapi',
  },
  {
    name: 'participant with too many segments',
    spec: { visibility: 'shared', participants: ['slack:T1:U1:extra'] },
    expectMessage: fieldError('spec.participants[0]', 'should match'),
    rejectedBy: 'openapi',
  },
  {
    name: 'owner with upper-case provider',
    spec: { owner: 'Slack:U012AB3CD' },
    expectMessage: fieldError('spec.owner', 'should match'),
    rejectedBy: 'openapi',
  },
  {
    name: 'duplicate participant',
    spec: { visibility: 'shared', participants: ['email:a@example.com', 'email:a@example.com'] },
    expectMessage: fieldError('spec.participants[1]', 'Duplicate value'),
    rejectedBy: 'openapi',
  },
  {
    name: 'mcp server whose url has no host',
    spec: {
      tools: { mcpServers: [{ name: 'tickets', transport: 'http', url: 'http:///mcp' }] },
    },
    expectMessage: fieldError(
      'spec.tools.mcpServers[0].url',
      'url must be an absolute URL with scheme https (or http) and a host, such as https://mcp.example.com/mcp',
    ),
    rejectedBy: 'cel',
  },
  {
    name: 'mcp server with both command and url',
    spec: {
      tools: { mcpServers: [{ ...stdioServer, url: 'http://mcp.example:8080/mcp' }] },
    },
    expectMessage: fieldError(
      'spec.tools.mcpServers[0].url',
      'set either command (transport stdio) or url (transport http), not both',
    ),
    rejectedBy: 'cel',
  },
  {
    name: 'mcp server with neither command nor url',
    spec: { tools: { mcpServers: [{ name: 'everything', transport: 'stdio' }] } },
    expectMessage: fieldError(
      'spec.tools.mcpServers[0]',
      'one of command (transport stdio) or url (transport http) is required',
    ),
    rejectedBy: 'cel',
  },
  {
    name: 'mcp server over http with a command',
    spec: { tools: { mcpServers: [{ name: 'everything', transport: 'http', command: 'npx' }] } },
    expectMessage: fieldError(
      'spec.tools.mcpServers[0].transport',
      'transport stdio takes command and args; transport http takes url',
    ),
    rejectedBy: 'cel',
  },
  {
    name: 'mcp server with args but no command',
    spec: {
      tools: {
        mcpServers: [
          { name: 'tickets', transport: 'http', url: 'http://t.example/mcp', args: ['-v'] },
        ],
      },
    },
    expectMessage: fieldError(
      'spec.tools.mcpServers[0].args',
      'args is only used with transport stdio',
    ),
    rejectedBy: 'cel',
  },
  {
    name: 'unknown mcp transport',
    spec: { tools: { mcpServers: [{ ...stdioServer, transport: 'grpc' }] } },
    expectMessage: fieldError('spec.tools.mcpServers[0].transport', 'Unsupported value: "grpc"'),
    rejectedBy: 'openapi',
  },
  {
    name: 'duplicate mcp server names',
    spec: { tools: { mcpServers: [stdioServer, stdioServer] } },
    expectMessage: fieldError('spec.tools.mcpServers[1]', 'Duplicate value'),
    rejectedBy: 'openapi',
  },
  {
    name: 'mcp server name not a DNS label',
    spec: { tools: { mcpServers: [{ ...stdioServer, name: 'My_Server' }] } },
    expectMessage: fieldError('spec.tools.mcpServers[0].name', 'should match'),
    rejectedBy: 'openapi',
  },
  {
    name: 'mcp timeout zero',
    spec: { tools: { mcpServers: [{ ...stdioServer, timeoutMs: 0 }] } },
    expectMessage: fieldError(
      'spec.tools.mcpServers[0].timeoutMs',
      'should be greater than or equal to 1',
    ),
    rejectedBy: 'openapi',
  },
  {
    name: 'requireApproval names an undeclared tool',
    spec: { tools: { builtin: ['memory'], requireApproval: ['shell'] } },
    expectMessage: fieldError(
      'spec.tools.requireApproval',
      'every requireApproval entry must name a tool in builtin, or <server>/<tool> or <server>/* of a server in mcpServers',
    ),
    rejectedBy: 'cel',
  },
  {
    name: 'requireApproval names an undeclared mcp server',
    spec: { tools: { mcpServers: [stdioServer], requireApproval: ['github/create_issue'] } },
    expectMessage: fieldError(
      'spec.tools.requireApproval',
      'every requireApproval entry must name a tool in builtin, or <server>/<tool> or <server>/* of a server in mcpServers',
    ),
    rejectedBy: 'cel',
  },
  {
    name: 'unknown sandbox backend',
    spec: { sandbox: { backend: 'vm' } },
    expectMessage: fieldError('spec.sandbox.backend', 'Unsupported value: "vm"'),
    rejectedBy: 'openapi',
  },
  {
    name: 'warm pool with the pod backend',
    spec: { sandbox: { backend: 'pod', warmPool: 'polychrome-harness' } },
    expectMessage: fieldError(
      'spec.sandbox.warmPool',
      'warmPool is only used by backend agent-sandbox',
    ),
    rejectedBy: 'cel',
  },
  {
    name: 'malformed cpu quantity',
    spec: { sandbox: { resources: { limits: { cpu: 'lots' } } } },
    expectMessage: fieldError('spec.sandbox.resources.limits.cpu', 'should match'),
    rejectedBy: 'openapi',
  },
  {
    name: 'too many participants',
    spec: {
      visibility: 'shared',
      participants: Array.from({ length: 65 }, (_, i) => `email:user${i}@example.com`),
    },
    expectMessage: fieldError('spec.participants', 'must have at most 64 items'),
    rejectedBy: 'openapi',
  },
];

/** Updates the API server must reject (transition rules). */
export const invalidConversationUpdateCases: readonly InvalidConversationUpdateCase[] = [
  {
    name: 'changing the sandbox backend',
    oldSpec: { sandbox: { backend: 'agent-sandbox' } },
    spec: { sandbox: { backend: 'pod' } },
    expectMessage: fieldError('spec.sandbox.backend', 'sandbox.backend is immutable'),
    rejectedBy: 'cel',
  },
];
