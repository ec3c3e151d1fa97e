import { describe, expect, it } from '@jest/globals';
import type { ToolCallRequest, ToolRunner } from '../turn/ports/tool-port';
import { createToolRouter } from './tool-router';

function runner(label: string): ToolRunner {
  return {
    call: (request) => Promise.resolve({ content: `${label}:${request.name}`, isError: false }),
  };
}

function request(name: string): ToolCallRequest {
  return { turnId: 't', toolCallId: 'c', name, input: {}, argsJson: '{}', step: 1, maxSteps: 8 };
}

const options = { signal: new AbortController().signal, timeoutMs: 1_000 };

describe('createToolRouter', () => {
  it('routes by name, then to the fallback', async () => {
    const router = createToolRouter(
      [{ names: new Set(['calculator']), runner: runner('builtin') }],
      runner('mcp'),
    );
    expect(await router.call(request('calculator'), options)).toEqual({
      content: 'builtin:calculator',
      isError: false,
    });
    expect(await router.call(request('everything/echo'), options)).toEqual({
      content: 'mcp:everything/echo',
      isError: false,
    });
  });

  it('answers a known error, not a rejection, when no runner owns the tool', async () => {
    const router = createToolRouter([{ names: new Set(['calculator']), runner: runner('b') }]);
    expect(await router.call(request('everything/echo'), options)).toEqual({
      content:
        "Tool everything/echo is offered in this turn but the harness has no runner for it; check the harness's MCP server configuration.",
      isError: true,
    });
  });
});
