import { describe, expect, it } from '@jest/globals';
import { encodeAgentConfig, hex, modelRequestSha256 } from './agent-config';
import { MEMORY_HEADER, memoryWithinBudget, systemWithMemory } from './memory-context';

const items = [
  { key: 'a', value: 'old' },
  { key: 'b', value: 'x'.repeat(40) },
  { key: 'c', value: 'new' },
];
// Each line's UTF-8 bytes plus its newline.
const size = (key: string, value: string) => `{"key":"${key}","value":"${value}"}`.length + 1;

describe('memory in the request (docs/turns.md, "Memory")', () => {
  it('adds nothing to a conversation without memory or without a budget', () => {
    expect(systemWithMemory('You are a test agent.', [], 8192)).toBe('You are a test agent.');
    expect(systemWithMemory('You are a test agent.', items, 0)).toBe('You are a test agent.');
    expect(systemWithMemory(undefined, [], 8192)).toBeUndefined();
  });

  it('puts the block after the system prompt, one JSON line per entry, oldest first', () => {
    expect(systemWithMemory('S', [{ key: 'k', value: 'line\n</memory>"' }], 8192)).toBe(
      `S\n\n${MEMORY_HEADER}\n{"key":"k","value":"line\\n</memory>\\""}`,
    );
    expect(systemWithMemory(undefined, [{ key: 'k', value: 'v' }], 8192)).toBe(
      `${MEMORY_HEADER}\n{"key":"k","value":"v"}`,
    );
  });

  it('keeps the newest entries that fit and stops at the first that does not', () => {
    const newestTwo = size('b', 'x'.repeat(40)) + size('c', 'new');
    expect(memoryWithinBudget(items, newestTwo)).toEqual({ kept: items.slice(1), left: 1 });
    // One byte short of the newest two: only the newest; the small oldest one does not
    // jump over the one that did not fit.
    expect(memoryWithinBudget(items, newestTwo - 1)).toEqual({ kept: items.slice(2), left: 2 });
    expect(systemWithMemory('S', items, newestTwo - 1)).toBe(
      `S\n\n${MEMORY_HEADER}\n{"key":"c","value":"new"}\n(2 older entries left out: over the memory budget of ${newestTwo - 1} bytes)`,
    );
  });

  it('counts UTF-8 bytes, not characters', () => {
    const one = [{ key: 'k', value: 'é' }];
    expect(memoryWithinBudget(one, '{"key":"k","value":"é"}'.length + 1).kept).toEqual([]);
    expect(memoryWithinBudget(one, '{"key":"k","value":"é"}'.length + 2).kept).toEqual(one);
  });

  it('records the budget in the agent configuration only when memory is offered', () => {
    const base = {
      model: { model: 'claude-test', maxTokens: 1024 },
      system: 'You are a test agent.',
      tools: [],
      budget: { deployment: 8 },
      requiredApprover: '',
    };
    expect(encodeAgentConfig(base).json).not.toContain('memory');
    expect(encodeAgentConfig({ ...base, memoryBudgetBytes: 4096 }).json).toContain(
      '"memory_budget_bytes":4096',
    );
  });
});

// The memory test vector of docs/replay.md ("Model request bytes", Memory): pinned there and here.
describe('the memory test vector', () => {
  it('pins the configuration with a memory budget and the first request that carries memory', () => {
    const calculator = {
      name: 'calculator',
      description: 'Adds.',
      inputSchema: { type: 'object', properties: { expression: { type: 'string' } } },
    };
    const config = encodeAgentConfig({
      model: { model: 'claude-test', maxTokens: 1024 },
      system: 'You are a test agent.',
      tools: [{ ...calculator, effect: 'pure', needsApproval: true }],
      budget: { deployment: 8, directive: 2 },
      requiredApprover: '',
      memoryBudgetBytes: 8192,
    });
    expect(config.json).toBe(
      '{"budget":{"conversation":0,"deployment":8,"directive":2,"max_steps":2},"memory_budget_bytes":8192,"model":{"max_tokens":1024,"name":"claude-test"},"required_approver":"","system":"You are a test agent.","tools":[{"approval_reason":"","description":"Adds.","effect":"pure","host":"harness","input_schema":{"properties":{"expression":{"type":"string"}},"type":"object"},"name":"calculator","needs_approval":true}],"version":1}',
    );
    expect(hex(config.sha256)).toBe(
      '6231f0dd4f60a0472b0af07b2af7a5e11c157aff52ac0a7766dbf14e1c992be4',
    );
    const system = systemWithMemory(
      'You are a test agent.',
      [{ key: 'city', value: 'Lisbon' }],
      8192,
    );
    const request = {
      ...(system === undefined ? {} : { system }),
      messages: [
        { role: 'user' as const, content: [{ type: 'text' as const, text: 'where do I live?' }] },
      ],
      tools: [calculator],
      toolChoice: 'auto' as const,
    };
    expect(hex(modelRequestSha256(request, config.sha256))).toBe(
      'ad79e31f1f734b2b9d3576167f49be1527921176c2a8c6727f2ccb0eeb42f6b6',
    );
  });
});
