import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from '@jest/globals';
import type { Message, ModelRequest } from '../../common/model/model-port';
import {
  createHistoryRequestHasher,
  createPrefixRequestHasher,
  decodeAgentConfig,
  encodeAgentConfig,
  hex,
  modelRequestSha256,
  type AgentConfig,
} from './agent-config';
import { MessageList } from './message-list';

// The test vector of docs/replay.md: both texts and digests are pinned there and here.
const CONFIG: AgentConfig = {
  model: { model: 'claude-test', maxTokens: 1024 },
  system: 'You are a test agent.',
  tools: [
    {
      name: 'calculator',
      description: 'Adds.',
      inputSchema: { type: 'object', properties: { expression: { type: 'string' } } },
      effect: 'pure',
      needsApproval: true,
    },
  ],
  budget: { deployment: 8, directive: 2 },
  requiredApprover: '',
};
const CONFIG_JSON =
  '{"budget":{"conversation":0,"deployment":8,"directive":2,"max_steps":2},"model":{"max_tokens":1024,"name":"claude-test"},"required_approver":"","system":"You are a test agent.","tools":[{"approval_reason":"","description":"Adds.","effect":"pure","host":"harness","input_schema":{"properties":{"expression":{"type":"string"}},"type":"object"},"name":"calculator","needs_approval":true}],"version":1}';
const CONFIG_SHA256 = '7a3f49e50fad6cf228435c50306535fae71defd96e6177f85e8c783e7fe9836d';
const REQUEST: ModelRequest = {
  system: 'You are a test agent.',
  messages: [{ role: 'user', content: [{ type: 'text', text: 'what is 6 * 7?' }] }],
  tools: [
    {
      name: 'calculator',
      description: 'Adds.',
      inputSchema: { type: 'object', properties: { expression: { type: 'string' } } },
    },
  ],
  toolChoice: 'auto',
};
const REQUEST_SHA256 = '7fbcbbed294f2058e5f9a393000046179b2d4584b0f0336463a2adfca013b17e';

describe('agent configuration and request bytes (docs/replay.md)', () => {
  it('encodes the test vector: canonical JSON and its SHA-256', () => {
    const encoded = encodeAgentConfig(CONFIG);
    expect(encoded.json).toBe(CONFIG_JSON);
    expect(hex(encoded.sha256)).toBe(CONFIG_SHA256);
  });

  it('hashes the test vector request under its configuration', () => {
    const digest = modelRequestSha256(REQUEST, Buffer.from(CONFIG_SHA256, 'hex'));
    expect(hex(digest)).toBe(REQUEST_SHA256);
  });

  it('changes the request digest when any part of the request or the configuration changes', () => {
    const config = Buffer.from(CONFIG_SHA256, 'hex');
    const other = Buffer.from(CONFIG_SHA256.replace(/^7a/, '7b'), 'hex');
    expect(hex(modelRequestSha256({ ...REQUEST, toolChoice: 'none' }, config))).not.toBe(
      REQUEST_SHA256,
    );
    expect(hex(modelRequestSha256({ ...REQUEST, system: 'You are evil.' }, config))).not.toBe(
      REQUEST_SHA256,
    );
    expect(hex(modelRequestSha256(REQUEST, other))).not.toBe(REQUEST_SHA256);
  });

  it('decodes a recorded configuration back to the same configuration', () => {
    const decoded = decodeAgentConfig(CONFIG_JSON);
    expect(hex(decoded.sha256)).toBe(CONFIG_SHA256);
    expect(decoded.config.tools[0]).toMatchObject({ name: 'calculator', needsApproval: true });
    expect(decoded.config.budget).toEqual({ deployment: 8, directive: 2 });
  });

  it('refuses a recorded configuration that is not canonical or claims a wrong budget', () => {
    expect(() => decodeAgentConfig(` ${CONFIG_JSON}`)).toThrow('not the canonical JSON');
    expect(() => decodeAgentConfig(CONFIG_JSON.replace('"max_steps":2', '"max_steps":9'))).toThrow(
      'not the canonical JSON',
    );
    expect(() => decodeAgentConfig(CONFIG_JSON.replace('"version":1', '"version":2'))).toThrow(
      'version 2',
    );
  });
});

// The same configuration under the OpenAI-compatible provider (docs/replay.md, "Test
// vector"): `"provider":"openai"` in `model`; recompute with
// `printf '%s' '<json>' | sha256sum`.
const OPENAI_CONFIG_JSON = CONFIG_JSON.replace(
  '"name":"claude-test"}',
  '"name":"claude-test","provider":"openai"}',
);
const OPENAI_CONFIG_SHA256 = '0f46f26130c79d721675a517d01964ec7da412bd5944d6d23729055a87663fe9';
const OPENAI_REQUEST_SHA256 = 'b09943460056d80ae6ba184be0df5d0677aa49ed1d76611d8ee375349447e8a6';

describe('the model provider in the configuration bytes', () => {
  it('the same neutral request gets different digests under the two providers; Anthropic keeps its vector', () => {
    const anthropic = encodeAgentConfig({
      ...CONFIG,
      model: { ...CONFIG.model, provider: 'anthropic' },
    });
    const openai = encodeAgentConfig({ ...CONFIG, model: { ...CONFIG.model, provider: 'openai' } });
    expect(anthropic.json).toBe(CONFIG_JSON);
    expect(hex(anthropic.sha256)).toBe(CONFIG_SHA256);
    expect(openai.json).toBe(OPENAI_CONFIG_JSON);
    expect(hex(openai.sha256)).toBe(OPENAI_CONFIG_SHA256);
    expect(hex(modelRequestSha256(REQUEST, anthropic.sha256))).toBe(REQUEST_SHA256);
    expect(hex(modelRequestSha256(REQUEST, openai.sha256))).toBe(OPENAI_REQUEST_SHA256);
  });

  it('docs/replay.md gives the same vector', () => {
    const doc = readFileSync(join(__dirname, '..', '..', 'docs', 'replay.md'), 'utf8');
    expect(doc).toContain(`${OPENAI_CONFIG_JSON}\nsha256 ${OPENAI_CONFIG_SHA256}`);
    expect(doc).toContain(`request sha256 ${OPENAI_REQUEST_SHA256}`);
  });

  it('decodes the provider back, and refuses one it does not know or an explicit anthropic', () => {
    const decoded = decodeAgentConfig(OPENAI_CONFIG_JSON);
    expect(decoded.config.model).toEqual({
      model: 'claude-test',
      maxTokens: 1024,
      provider: 'openai',
    });
    expect(hex(decoded.sha256)).toBe(OPENAI_CONFIG_SHA256);
    expect(decodeAgentConfig(CONFIG_JSON).config.model).toEqual(CONFIG.model);
    expect(() => decodeAgentConfig(OPENAI_CONFIG_JSON.replace('"openai"', '"gemini"'))).toThrow(
      'recorded agent_config model.provider is "gemini"; this reader knows openai (an Anthropic configuration has no provider); the configuration cannot be read, so the journal\'s turns cannot be replayed against it',
    );
    expect(() => decodeAgentConfig(OPENAI_CONFIG_JSON.replace('"openai"', '"anthropic"'))).toThrow(
      'model.provider is "anthropic"',
    );
  });
});

describe('createPrefixRequestHasher', () => {
  it('gives the digest of modelRequestSha256 for requests that extend each other, and for others', () => {
    const hasher = createPrefixRequestHasher();
    const config = Buffer.from(CONFIG_SHA256, 'hex');
    const other = Buffer.from(CONFIG_SHA256.replace(/^7a/, '7b'), 'hex');
    const history: Message[] = [];
    for (let turn = 0; turn < 5; turn++) {
      const request: ModelRequest = {
        ...REQUEST,
        messages: [...history, { role: 'user', content: [{ type: 'text', text: `m${turn}` }] }],
      };
      expect(hex(hasher(request, config))).toBe(hex(modelRequestSha256(request, config)));
      // Same messages under another configuration: the cached prefix must not be reused.
      expect(hex(hasher(request, other))).toBe(hex(modelRequestSha256(request, other)));
      const closing: ModelRequest = { ...request, toolChoice: 'none' };
      expect(hex(hasher(closing, config))).toBe(hex(modelRequestSha256(closing, config)));
      history.push(...request.messages.slice(history.length), {
        role: 'assistant',
        content: [{ type: 'text', text: `r${turn}` }],
      });
    }
    // A message object seen at another index is hashed afresh.
    const moved: ModelRequest = { ...REQUEST, messages: history.slice(2) };
    expect(hex(hasher(moved, config))).toBe(hex(modelRequestSha256(moved, config)));
    expect(hex(hasher(REQUEST, config))).toBe(REQUEST_SHA256);
  });

  it('gives the same digests for a message list as for its array', () => {
    const hasher = createPrefixRequestHasher();
    const config = Buffer.from(CONFIG_SHA256, 'hex');
    expect(
      hex(modelRequestSha256({ ...REQUEST, messages: MessageList.of(REQUEST.messages) }, config)),
    ).toBe(REQUEST_SHA256);
    let list = MessageList.of(REQUEST.messages.slice(0, 0));
    for (let turn = 0; turn < 4; turn++) {
      list = list.append({ role: 'user', content: [{ type: 'text', text: `m${turn}` }] });
      const expected = hex(modelRequestSha256({ ...REQUEST, messages: list.toArray() }, config));
      expect(hex(hasher({ ...REQUEST, messages: list }, config))).toBe(expected);
      list = list.append({ role: 'assistant', content: [{ type: 'text', text: `r${turn}` }] });
    }
  });
});

describe('createHistoryRequestHasher', () => {
  /** A fresh copy of `messages`, as each turn's history is decoded anew in the harness. */
  const decodedAgain = (messages: readonly Message[]): Message[] =>
    JSON.parse(JSON.stringify(messages)) as Message[];

  it('gives the digest of modelRequestSha256 turn after turn, when each turn brings new objects', () => {
    const hasher = createHistoryRequestHasher();
    const config = Buffer.from(CONFIG_SHA256, 'hex');
    const other = Buffer.from(CONFIG_SHA256.replace(/^7a/, '7b'), 'hex');
    const history: Message[] = [];
    for (let turn = 0; turn < 6; turn++) {
      const request: ModelRequest = {
        ...REQUEST,
        messages: [
          ...decodedAgain(history),
          { role: 'user', content: [{ type: 'text', text: `m${turn}` }] },
        ],
      };
      expect(hex(hasher(request, config))).toBe(hex(modelRequestSha256(request, config)));
      const closing: ModelRequest = { ...request, toolChoice: 'none' };
      expect(hex(hasher(closing, config))).toBe(hex(modelRequestSha256(closing, config)));
      history.push(...request.messages.slice(history.length), {
        role: 'assistant',
        content: [{ type: 'text', text: `r${turn}` }],
      });
    }
    // Another configuration, then the first again: nothing cached under one serves the other.
    const last: ModelRequest = { ...REQUEST, messages: decodedAgain(history) };
    expect(hex(hasher(last, other))).toBe(hex(modelRequestSha256(last, other)));
    expect(hex(hasher(last, config))).toBe(hex(modelRequestSha256(last, config)));
  });

  it('hashes afresh from a message that changed, was removed or moved, and from an empty history', () => {
    const hasher = createHistoryRequestHasher();
    const config = Buffer.from(CONFIG_SHA256, 'hex');
    const messages: Message[] = Array.from({ length: 8 }, (_, i) => ({
      role: i % 2 === 0 ? 'user' : 'assistant',
      content: [{ type: 'text', text: `t${i}` }],
    }));
    const check = (list: readonly Message[]): void => {
      const request: ModelRequest = { ...REQUEST, messages: decodedAgain(list) };
      expect(hex(hasher(request, config))).toBe(hex(modelRequestSha256(request, config)));
    };
    check(messages);
    // One text changed in the middle: the digest follows it, not the cached state.
    const edited = decodedAgain(messages);
    edited[3] = { role: 'assistant', content: [{ type: 'text', text: 'changed' }] };
    check(edited);
    check(messages);
    check(messages.slice(0, 5)); // shorter
    check(messages.slice(1)); // shifted: every position differs
    check([]);
    check(messages);
    expect(hex(hasher(REQUEST, config))).toBe(REQUEST_SHA256);
  });
});
