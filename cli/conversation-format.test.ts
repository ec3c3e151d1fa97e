import { describe, expect, it } from '@jest/globals';
import { formatEventLine } from './conversation-format';

// `polychrome stream` lines for a turn that delegated (docs/turns.md, "Delegation"): a
// delegate's steps say which thread they ran on, and the result closing a thread who
// answered on it.

describe('formatEventLine', () => {
  it('marks the steps of a delegate thread, and names who answered on it', () => {
    const lines = [
      {
        position: 4,
        kind: 'tool_call',
        payload: {
          toolName: '__delegate_to',
          toolCallId: 'd1',
          argsJson: '{"agent":"researcher","task":"find March"}',
        },
      },
      {
        position: 6,
        kind: 'tool_call',
        payload: { toolName: 'lookup', toolCallId: 'l1', argsJson: '{}', thread: 'd1', depth: 1 },
      },
      {
        position: 8,
        kind: 'tool_result',
        payload: { toolCallId: 'd1', content: '40 billed', delegate: 'researcher' },
      },
      { position: 9, kind: 'tool_result', payload: { toolCallId: 'c2', content: 'x' } },
    ].map(formatEventLine);
    expect(lines).toEqual([
      '[4] tool_call: __delegate_to {"agent":"researcher","task":"find March"}\n',
      '[6] tool_call: [thread d1] lookup {}\n',
      '[8] tool_result: d1 answered by researcher: 40 billed\n',
      '[9] tool_result: c2: x\n',
    ]);
  });
});
