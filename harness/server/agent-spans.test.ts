import { describe, expect, it } from '@jest/globals';
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';

// AgentSpans with tracing on, in a process of its own (testdata/agent-spans-probe.ts): a
// turn's agents are sibling invoke_agent spans under RunTurn, a handoff ends one and starts
// the next, each agent's model and tool calls are children of its span, and an agent on a
// delegated thread is a child of the agent that asked, until the thread closes.

const run = promisify(execFile);

interface ProbeSpan {
  readonly name: string;
  readonly kind: number;
  readonly spanId: string;
  readonly parentSpanId: string;
  readonly attributes: Record<string, unknown>;
}

async function probe(): Promise<ProbeSpan[]> {
  const clean = Object.fromEntries(
    Object.entries(process.env).filter(([name]) => !name.startsWith('OTEL_')),
  );
  const { stdout } = await run(
    process.execPath,
    ['--import', 'tsx', join(__dirname, 'testdata', 'agent-spans-probe.ts')],
    { env: clean, timeout: 60_000 },
  );
  return (JSON.parse(stdout.trim().split('\n').at(-1) ?? '') as { spans: ProbeSpan[] }).spans;
}

describe('AgentSpans', () => {
  it('one invoke_agent span per agent: a handoff ends one and starts the next under RunTurn, the delegates of a panel nest side by side under the agent that asked', async () => {
    const spans = await probe();
    const byName = (name: string): ProbeSpan => {
      const found = spans.filter((span) => span.name === name);
      expect(found.map((span) => span.name)).toEqual([name]);
      return found[0] as ProbeSpan;
    };
    const runTurn = byName('RunTurn');
    const first = byName('invoke_agent agent');
    const second = byName('invoke_agent billing');
    expect(spans).toHaveLength(12);
    for (const [agent, name] of [
      [first, 'agent'],
      [second, 'billing'],
    ] as const) {
      expect([agent.kind, agent.parentSpanId]).toEqual([1, runTurn.spanId]);
      expect(agent.attributes).toEqual({
        'gen_ai.operation.name': 'invoke_agent',
        'gen_ai.provider.name': 'probe',
        'gen_ai.agent.name': name,
        'gen_ai.request.model': 'm-1',
        'gen_ai.conversation.id': 'c-1',
        'polychrome.conversation.id': 'c-1',
      });
    }
    // The probe ends only the last agent's span itself: the first was exported, so the
    // handoff (enter) ended it. (Start and end times are not compared: the SDK anchors
    // each span's clock apart, so they may be out of order by a little under load.)
    // A panel: each delegate's span is a child of the agent that asked, open side by side;
    // each thread's model and tool calls are children of its own delegate's span, however
    // they interleave, and once the threads close the asking agent's calls are its own.
    const researcher = byName('invoke_agent researcher');
    const skeptic = byName('invoke_agent skeptic');
    for (const delegate of [researcher, skeptic]) {
      expect([delegate.parentSpanId, delegate.attributes['gen_ai.request.model']]).toEqual([
        second.spanId,
        'm-2',
      ]);
    }
    const chats = spans.filter((span) => span.name === 'chat scripted');
    expect(chats.map((chat) => chat.parentSpanId).sort()).toEqual(
      [first.spanId, skeptic.spanId, researcher.spanId, skeptic.spanId].sort(),
    );
    const calculators = spans.filter((span) => span.name === 'execute_tool calculator');
    expect(calculators.map((span) => span.parentSpanId).sort()).toEqual(
      [second.spanId, researcher.spanId, second.spanId].sort(),
    );
  }, 60_000);
});
