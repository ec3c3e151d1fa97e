import { createHash, type Hash } from 'node:crypto';
import { sha256 } from '@noble/hashes/sha2.js';
import { canonicalJson, isJsonObject, type JsonObject } from '../../common/canonical-json';
import { AppError } from '../../common/errors';
import {
  ModelApi,
  type ContentBlock,
  type Message,
  type ModelParameters,
  type ModelRequest,
} from '../../common/model/model-port';
import type { MessageSequence } from './message-list';
import { effectiveMaxSteps, type StepBudget } from './step-budget';
import type { TurnTool } from './turn-records';

/**
 * The agent configuration a turn runs under and the request digest of each model call: what
 * replay needs to check a recorded run follows from its inputs (docs/replay.md: bytes, a vector). Pure.
 */

/** Version of both layouts; a change of bytes gets a new number. */
export const REPLAY_BYTES_VERSION = 1;

/** Everything besides history, message, recorded steps and answers that decides a turn. */
export interface AgentConfig {
  readonly model: ModelParameters;
  readonly system: string;
  /** In the order offered to the model, with the policy the machine enforces. */
  readonly tools: readonly TurnTool[];
  readonly budget: StepBudget;
  /** Empty: any admin. */
  readonly requiredApprover: string;
  /**
   * Bytes of the conversation's memory a request may carry (docs/turns.md, "Memory");
   * absent when the memory tool is not offered, and then left out of the bytes, so a
   * configuration without memory keeps its digest.
   */
  readonly memoryBudgetBytes?: number;
  /** The agent's name (docs/turns.md, "Handoffs"); absent for an unnamed agent, and then left out. */
  readonly agent?: string;
  /**
   * Agents it may hand the turn to, in the order given. Absent: a `__handoff_to` call ends
   * the turn (configurations recorded before handoffs continued); left out of the bytes.
   */
  readonly handoffs?: readonly string[];
  /** Agents it may delegate to (docs/turns.md "Delegation"); none: left out of the bytes. */
  readonly delegates?: readonly string[];
}

/** A configuration with its canonical text and digest. */
export interface EncodedAgentConfig {
  readonly config: AgentConfig;
  /** Canonical JSON (docs/replay.md, "Agent configuration bytes"). */
  readonly json: string;
  /** SHA-256 of `json`'s UTF-8 bytes. */
  readonly sha256: Uint8Array;
}

const encoder = new TextEncoder();

/** The canonical JSON object of `config` (docs/replay.md). */
export function agentConfigObject(config: AgentConfig): JsonObject {
  return {
    version: REPLAY_BYTES_VERSION,
    model: {
      name: config.model.model,
      max_tokens: config.model.maxTokens,
      // Absent for Anthropic, so configurations recorded before there was a choice keep
      // their digests.
      ...(config.model.provider === undefined || config.model.provider === ModelApi.Anthropic
        ? {}
        : { provider: config.model.provider }),
    },
    system: config.system,
    tools: config.tools.map((tool) => ({
      name: tool.name,
      description: tool.description,
      input_schema: tool.inputSchema,
      effect: tool.effect,
      needs_approval: tool.needsApproval,
      approval_reason: tool.approvalReason ?? '',
      host: tool.host ?? 'harness',
    })),
    budget: {
      deployment: config.budget.deployment ?? 0,
      conversation: config.budget.conversation ?? 0,
      directive: config.budget.directive ?? 0,
      max_steps: effectiveMaxSteps(config.budget),
    },
    required_approver: config.requiredApprover,
    ...(config.memoryBudgetBytes === undefined
      ? {}
      : { memory_budget_bytes: config.memoryBudgetBytes }),
    ...(config.agent === undefined ? {} : { agent: config.agent }),
    ...(config.handoffs === undefined ? {} : { handoffs: [...config.handoffs] }),
    ...(config.delegates?.length ? { delegates: [...config.delegates] } : {}),
  };
}

/**
 * Encodes `config`: canonical JSON and its SHA-256.
 *
 * @throws AppError `invalid_argument` when a budget limit is not a positive integer or a
 *   schema holds a value JSON cannot carry.
 */
export function encodeAgentConfig(config: AgentConfig): EncodedAgentConfig {
  const json = canonicalJson(agentConfigObject(config));
  return { config, json, sha256: sha256(encoder.encode(json)) };
}

/**
 * Reads a recorded configuration back. The text must be exactly the canonical JSON of what
 * it decodes to, so one configuration has one digest.
 *
 * @throws AppError `data_loss` naming what is wrong: not JSON, not version 1, a field of
 *   the wrong type, a model provider it does not know, or text that is not canonical.
 */
export function decodeAgentConfig(json: string): EncodedAgentConfig {
  let value: unknown;
  try {
    value = JSON.parse(json);
  } catch {
    throw corrupt('is not JSON');
  }
  if (!isJsonObject(value)) throw corrupt('is not a JSON object');
  if (value.version !== REPLAY_BYTES_VERSION) {
    throw corrupt(`has version ${JSON.stringify(value.version)}; this reader knows version 1`);
  }
  const model = object(value.model, 'model');
  const budget = object(value.budget, 'budget');
  const tools = value.tools;
  if (!Array.isArray(tools)) throw corrupt('tools is not an array');
  const config: AgentConfig = {
    model: {
      model: string(model.name, 'model.name'),
      maxTokens: int(model.max_tokens, 'model.max_tokens'),
      ...modelApi(model.provider),
    },
    system: string(value.system, 'system'),
    tools: tools.map((entry, i): TurnTool => {
      const tool = object(entry, `tools[${i}]`);
      const effect = string(tool.effect, `tools[${i}].effect`);
      const host = string(tool.host, `tools[${i}].host`);
      if (effect !== 'pure' && effect !== 'side_effect')
        throw corrupt(`tools[${i}].effect is ${effect}`);
      if (host !== 'harness' && host !== 'control_plane')
        throw corrupt(`tools[${i}].host is ${host}`);
      const reason = string(tool.approval_reason, `tools[${i}].approval_reason`);
      return {
        name: string(tool.name, `tools[${i}].name`),
        description: string(tool.description, `tools[${i}].description`),
        inputSchema: object(tool.input_schema, `tools[${i}].input_schema`),
        effect,
        needsApproval: bool(tool.needs_approval, `tools[${i}].needs_approval`),
        ...(reason === '' ? {} : { approvalReason: reason }),
        host,
      };
    }),
    budget: {
      ...limit(budget.deployment, 'deployment'),
      ...limit(budget.conversation, 'conversation'),
      ...limit(budget.directive, 'directive'),
    },
    requiredApprover: string(value.required_approver, 'required_approver'),
    ...(value.memory_budget_bytes === undefined
      ? {}
      : { memoryBudgetBytes: int(value.memory_budget_bytes, 'memory_budget_bytes') }),
    ...(value.agent === undefined ? {} : { agent: string(value.agent, 'agent') }),
    ...(value.handoffs === undefined ? {} : { handoffs: names(value.handoffs, 'handoffs') }),
    ...(value.delegates === undefined ? {} : { delegates: names(value.delegates, 'delegates') }),
  };
  const encoded = encodeAgentConfig(config);
  if (encoded.json !== json) throw corrupt('is not the canonical JSON of what it says');
  return encoded;
}

/**
 * What a request digest reads: a model request whose messages may be any
 * {@link MessageSequence} (the turn machine passes its message list, so a digest never
 * needs the whole array built).
 */
export type HashedRequest = Omit<ModelRequest, 'messages'> & {
  readonly messages: MessageSequence;
};

/** The canonical JSON object of a model request (docs/replay.md, "Model request bytes"). */
export function modelRequestObject(request: HashedRequest, configSha256: Uint8Array): JsonObject {
  const messages: JsonObject[] = [];
  for (let i = 0; i < request.messages.length; i++) {
    const message = request.messages.at(i);
    if (message !== undefined) messages.push(messageObject(message));
  }
  return {
    version: REPLAY_BYTES_VERSION,
    config_sha256: hex(configSha256),
    system: request.system ?? '',
    messages,
    tools: request.tools.map((tool) => ({
      name: tool.name,
      description: tool.description,
      input_schema: tool.inputSchema,
    })),
    tool_choice: request.toolChoice,
  };
}

/** SHA-256 of the canonical bytes of `request` made under the configuration `configSha256`. */
export function modelRequestSha256(request: HashedRequest, configSha256: Uint8Array): Uint8Array {
  return sha256(encoder.encode(canonicalJson(modelRequestObject(request, configSha256))));
}

/** Computes request digests; see {@link createPrefixRequestHasher}. */
export type RequestHasher = (request: HashedRequest, configSha256: Uint8Array) => Uint8Array;

/**
 * A {@link modelRequestSha256} that hashes each message once: the SHA-256 state after a
 * message is kept, keyed by the message object, its index and the configuration, and a
 * later request that extends the same messages starts from it. Replay of a long
 * conversation hashes its history once instead of once per model call.
 *
 * Sound only where message objects are never reused at the same index after different
 * predecessors: true inside one replay (each request extends the history array, and
 * messages are immutable), so make one hasher per replay run.
 */
export function createPrefixRequestHasher(): RequestHasher {
  interface Saved {
    readonly index: number;
    readonly config: string;
    readonly previous: Message | undefined;
    readonly state: Hash;
  }
  const saved = new WeakMap<Message, Saved>();
  return (request, configSha256) => {
    const config = hex(configSha256);
    const messages = request.messages;
    let state: Hash | undefined;
    let next = 0;
    for (let i = messages.length - 1; i >= 0; i--) {
      const message = messages.at(i);
      const entry = message === undefined ? undefined : saved.get(message);
      if (
        entry !== undefined &&
        entry.index === i &&
        entry.config === config &&
        entry.previous === (i === 0 ? undefined : messages.at(i - 1))
      ) {
        state = entry.state.copy();
        next = i + 1;
        break;
      }
    }
    if (state === undefined) {
      state = createHash('sha256');
      state.update(`{"config_sha256":${JSON.stringify(config)},"messages":[`);
    }
    for (let i = next; i < messages.length; i++) {
      const message = messages.at(i);
      if (message === undefined) continue;
      state.update((i === 0 ? '' : ',') + canonicalJson(messageObject(message)));
      const previous = i === 0 ? undefined : messages.at(i - 1);
      saved.set(message, { index: i, config, previous, state: state.copy() });
    }
    return finishRequestHash(state, request, configSha256);
  };
}

/** The streaming request digest after its messages: the rest of the request, then the digest. */
function finishRequestHash(
  state: Hash,
  request: HashedRequest,
  configSha256: Uint8Array,
): Uint8Array {
  const rest = modelRequestObject({ ...request, messages: [] }, configSha256);
  state.update(
    `],"system":${canonicalJson(rest.system)},"tool_choice":${canonicalJson(rest.tool_choice)},"tools":${canonicalJson(rest.tools)},"version":${String(REPLAY_BYTES_VERSION)}}`,
  );
  return new Uint8Array(state.digest());
}

/**
 * The digests {@link modelRequestSha256} gives, for a process that hashes one
 * conversation's requests turn after turn (the harness, one per conversation). Each turn's
 * history arrives decoded anew, so {@link createPrefixRequestHasher}'s cache by object
 * never hits across turns and every model call would hash the whole conversation again.
 * This one keeps the SHA-256 state after each message of the last request by position,
 * with the message's JSON text as the check that it is the same message: that text is far
 * cheaper to make than the canonical form and its hash. Only the messages after the
 * longest unchanged prefix are hashed; a changed configuration or an edited earlier
 * message starts over from there. Memory: one entry per message of the last request.
 */
export function createHistoryRequestHasher(): RequestHasher {
  let config = '';
  let saved: { readonly key: string; readonly state: Hash }[] = [];
  return (request, configSha256) => {
    const digestHex = hex(configSha256);
    if (digestHex !== config) {
      config = digestHex;
      saved = [];
    }
    const messages = request.messages;
    const keys: string[] = [];
    let same = 0;
    while (same < messages.length && same < saved.length) {
      const key = JSON.stringify(messages.at(same));
      keys.push(key);
      if (saved[same]?.key !== key) break;
      same += 1;
    }
    saved.length = same;
    const resumed = same === 0 ? undefined : saved[same - 1]?.state.copy();
    const state = resumed ?? createHash('sha256');
    if (resumed === undefined) {
      state.update(`{"config_sha256":${JSON.stringify(config)},"messages":[`);
    }
    for (let i = same; i < messages.length; i++) {
      const message = messages.at(i);
      if (message === undefined) break;
      state.update((i === 0 ? '' : ',') + canonicalJson(messageObject(message)));
      saved.push({ key: keys[i] ?? JSON.stringify(message), state: state.copy() });
    }
    return finishRequestHash(state, request, configSha256);
  };
}

/** Lowercase hex of `bytes`. */
export function hex(bytes: Uint8Array): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('hex');
}

function messageObject(message: Message): JsonObject {
  return { role: message.role, content: message.content.map(blockObject) };
}

function blockObject(block: ContentBlock): JsonObject {
  switch (block.type) {
    case 'text':
      return { type: 'text', text: block.text };
    case 'tool_use':
      return { type: 'tool_use', id: block.id, name: block.name, input: block.input };
    case 'tool_result':
      return {
        type: 'tool_result',
        tool_use_id: block.toolUseId,
        content: block.content,
        is_error: block.isError,
      };
  }
}

function corrupt(what: string): AppError {
  return new AppError(
    'data_loss',
    `recorded agent_config ${what}; the configuration cannot be read, so the journal's turns cannot be replayed against it`,
  );
}

function object(value: unknown, field: string): JsonObject {
  if (!isJsonObject(value)) throw corrupt(`${field} is not an object`);
  return value;
}

function string(value: unknown, field: string): string {
  if (typeof value !== 'string') throw corrupt(`${field} is not a string`);
  return value;
}

function names(value: unknown, field: string): string[] {
  if (!Array.isArray(value)) throw corrupt(`${field} is not an array`);
  return value.map((entry, i) => string(entry, `${field}[${i}]`));
}

function bool(value: unknown, field: string): boolean {
  if (typeof value !== 'boolean') throw corrupt(`${field} is not a boolean`);
  return value;
}

function int(value: unknown, field: string): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 0) {
    throw corrupt(`${field} is not a whole number`);
  }
  return value;
}

/** `model.provider`: absent (Anthropic) or a protocol other than Anthropic's. */
function modelApi(value: unknown): { provider?: ModelApi } {
  if (value === undefined) return {};
  const known = Object.values(ModelApi).filter((api) => api !== ModelApi.Anthropic);
  const found = known.find((api) => api === value);
  if (found === undefined) {
    throw corrupt(
      `model.provider is ${JSON.stringify(value)}; this reader knows ${known.join(', ')} (an Anthropic configuration has no provider)`,
    );
  }
  return { provider: found };
}

function limit(value: unknown, source: 'deployment' | 'conversation' | 'directive'): StepBudget {
  const n = int(value, `budget.${source}`);
  return n === 0 ? {} : { [source]: n };
}
