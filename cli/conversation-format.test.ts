import { describe, expect, it } from '@jest/globals';
import { formatEventLine, formatTurnReply } from './conversation-format';

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

describe('formatTurnReply', () => {
  const paused = { conversationId: 'c1', turnId: 't1', status: 'paused', requestedAt: 0 } as const;
  const approval = {
    requestId: 'apr_1',
    toolCallId: 'toolu_calc',
    toolName: 'calculator',
    args: { expression: '6*7' },
    argsSha256: 'ab'.repeat(32),
    reason: '',
    requiredApprover: '',
  };

  it("names the delegate and its thread on a delegate's approval and question card", () => {
    const card = { ...approval, agent: 'clerk', thread: 'toolu_ask_clerk' };
    const { text } = formatTurnReply({ ...paused, approval: card }, { conversationId: 'c1' });
    expect(text).toContain(
      '  tool:      calculator\n  asked by:  clerk on thread toolu_ask_clerk\n',
    );
    const question = { requestId: 'q1', question: 'Which base?', agent: 'clerk', thread: 'd1' };
    expect(formatTurnReply({ ...paused, question }, { conversationId: 'c1' }).text).toContain(
      'asks: Which base?\n  asked by:  clerk on thread d1\n',
    );
  });

  it('says nothing of an agent when the card names none', () => {
    const { text } = formatTurnReply({ ...paused, approval }, { conversationId: 'c1' });
    expect(text).not.toContain('asked by');
    const lead = formatTurnReply(
      { ...paused, approval: { ...approval, agent: 'lead' } },
      {
        conversationId: 'c1',
      },
    );
    expect(lead.text).toContain('  asked by:  lead\n');
  });
});
