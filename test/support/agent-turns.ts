import pino from 'pino';
import { decodePayload, type EventPayloads } from '../../common/event-kinds';
import type { Agent } from '../../operator/api/v1alpha1/agent-resource';
import type { ConversationSpec } from '../../operator/api/v1alpha1/conversation-spec';
import type {
  ModelConfig,
  ModelConfigSpec,
} from '../../operator/api/v1alpha1/model-config-resource';
import type { AgentDirectory } from '../../operator/controller/agent-resource-reads';
import { NO_KEY, ProviderModelRelay } from '../../operator/models/provider-model-relay';
import { readyStatus } from './in-memory-conversations';
import { MessagesApiServer, type Responder } from './messages-api-server';
import { noSecrets } from './no-secrets';
import { startRealTurns, TEST_OWNER, type RealTurns } from './real-turns';

/**
 * A Conversation that names an Agent, over real turns (real-turns.ts): the Agents a test
 * gives, one ModelConfig `claude` on the local Messages API answering with `respond`, and
 * every model call made by the control plane's relay through the real Anthropic SDK (no
 * `secretKeyRef`: the relay sends its placeholder key, which the server expects).
 */

/**
 * An Agent named `name` on the ModelConfig `claude` with the system prompt `You are
 * <name>.`, `spec` over that.
 */
export function crewAgent(name: string, spec: Partial<Agent['spec']> = {}): Agent {
  return {
    apiVersion: 'polychrome.dev/v1alpha1',
    kind: 'Agent',
    metadata: { name, namespace: 'any' },
    spec: { modelRef: { name: 'claude' }, systemPrompt: `You are ${name}.`, ...spec },
  };
}

/** Options of {@link startAgentTurns}. */
export interface AgentTurnsOptions {
  /** The namespace's Agents, by name. */
  readonly agents: ReadonlyMap<string, Agent>;
  /** The Conversation's `spec.agentRef.name`. */
  readonly entry: string;
  readonly respond: Responder;
  /** Over `{provider: anthropic, model: claude-crew}`; its `baseUrl` is always the server's. */
  readonly model?: Partial<ModelConfigSpec>;
  /** Over `{owner, agentRef}` (and real-turns.ts's defaults). */
  readonly spec?: Partial<ConversationSpec>;
  /** Connect agents' own MCP servers in the harness (scripted-harness.ts). */
  readonly agentMcp?: boolean;
  /** Identities linked to admin personas (who may answer approvals). */
  readonly admins?: readonly string[];
  /** The control plane's and the harness's clock (real-turns.ts). @default Date.now */
  readonly nowMs?: () => number;
}

/** The running turns, the conversation, and how to post to it and read its journal. */
export interface AgentTurns {
  readonly api: MessagesApiServer;
  readonly turns: RealTurns;
  readonly uid: string;
  /** Posts `text` as the test's owner, `key` (default the text) as the idempotency key. */
  post(text: string, key?: string): ReturnType<RealTurns['coordinator']['postMessage']>;
  /** The conversation's journal events of `kind`, decoded. */
  events<K extends keyof EventPayloads>(kind: K): Promise<EventPayloads[K][]>;
  /** Closes the turns and the server. */
  close(): Promise<void>;
}

/** A crew's models: the local Messages API and the coordinator options that reach it. */
export interface CrewModels {
  readonly api: MessagesApiServer;
  /** The directory (any namespace) and the control plane's relay, for the coordinator. */
  readonly coordinator: {
    readonly modelRelay: ProviderModelRelay;
    readonly agentDirectory: () => AgentDirectory;
  };
}

/**
 * Starts the local Messages API answering with `respond`, and the coordinator options that
 * give a turn `agents` on the ModelConfig `claude` there (`model` over its spec); close
 * `api` after the turns.
 */
export async function startCrewModels(
  options: Pick<AgentTurnsOptions, 'agents' | 'respond' | 'model'>,
): Promise<CrewModels> {
  const api = await MessagesApiServer.start({ apiKey: NO_KEY, respond: options.respond });
  const claude: ModelConfig = {
    apiVersion: 'polychrome.dev/v1alpha1',
    kind: 'ModelConfig',
    metadata: { name: 'claude', namespace: 'any' },
    spec: { provider: 'anthropic', model: 'claude-crew', ...options.model, baseUrl: api.url },
  };
  const directory: AgentDirectory = {
    agent: (name) => options.agents.get(name),
    modelConfig: (name) => (name === 'claude' ? claude : undefined),
  };
  const modelRelay = new ProviderModelRelay({
    secrets: noSecrets,
    account: { name: 'polychrome-control-plane', namespace: 'polychrome-system' },
    adapter: { maxAttempts: 1 },
  });
  return { api, coordinator: { modelRelay, agentDirectory: () => directory } };
}

/** Starts the turns and adds the conversation. */
export async function startAgentTurns(options: AgentTurnsOptions): Promise<AgentTurns> {
  const { api, coordinator } = await startCrewModels(options);
  const turns = await startRealTurns({
    replies: [],
    logger: pino({ level: process.env.TEST_LOG ?? 'silent' }),
    ...(options.agentMcp === true ? { agentMcp: true } : {}),
    ...(options.admins === undefined ? {} : { admins: options.admins }),
    coordinator: {
      maxAttempts: 1,
      ...coordinator,
      ...(options.nowMs === undefined ? {} : { nowMs: options.nowMs }),
    },
  });
  const conversation = turns.conversations.add(
    { owner: TEST_OWNER.identity, agentRef: { name: options.entry }, ...options.spec },
    { status: readyStatus(turns.harness.endpoint) },
  );
  const uid = conversation.metadata.uid ?? '';
  return {
    api,
    turns,
    uid,
    post: (text, key = text) =>
      turns.coordinator.postMessage(
        TEST_OWNER,
        { conversationId: uid, text, idempotencyKey: key },
        AbortSignal.timeout(30_000),
      ),
    events: async (kind) =>
      (await turns.journal.entries(`conv-${uid}`))
        .filter((e) => e.kind === kind)
        .map((e) => decodePayload(kind, e.payload)),
    close: async () => {
      await turns.close();
      await api.close();
    },
  };
}
