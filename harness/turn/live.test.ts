/**
 * `--live` scratch runs over a journal the real stack wrote (test/support/real-turns.ts),
 * going on from the departure with the real Anthropic adapter (the real SDK) against the
 * local Messages API server, the real built-in tools and the real turn shell. Nothing is
 * written to the journal.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import pino from 'pino';
import { decodePayload } from '../../common/event-kinds';
import type { JournalEntry } from '../../common/state-journal';
import {
  echoReply,
  echoResponder,
  MessagesApiServer,
  systemOf,
  type Responder,
} from '../../test/support/messages-api-server';
import { crewAgent, startAgentTurns } from '../../test/support/agent-turns';
import { recordApprovedTurns, type RealTurns } from '../../test/support/real-turns';
import { nodeEd25519Signer, nodeEd25519Verifier } from '../crypto/node-ed25519';
import { AnthropicProvider } from '../../common/model/anthropic-provider';
import { builtinToolRunner, builtinTools } from '../tools/builtin-tools';
import {
  livePolicy,
  liveWhatIf,
  recordedResults,
  type LiveToolCall,
  type LiveWhatIf,
} from './live';
import { requestIds } from '../../common/request-ids';
import { ToolEffect } from './turn-records';
import type { WhatIfChange } from './what-if';

let turns: RealTurns;
let entries: JournalEntry[];
let partition = '';
let requestId = '';
let messages: MessagesApiServer;

beforeAll(async () => {
  ({ turns, entries, partition, requestId } = await recordApprovedTurns(pino({ level: 'silent' }), {
    tools: { builtin: ['calculator', 'text_stats'], requireApproval: ['calculator'] },
  }));
  messages = await MessagesApiServer.start({ respond: echoResponder });
}, 60_000);

afterAll(async () => {
  await turns.close();
  await messages.close();
});

function live(
  change: WhatIfChange,
  runnable: ReadonlySet<string> = new Set(builtinTools.map((t) => t.name)),
  recorded: { entries: JournalEntry[]; approvalPublicKey: Uint8Array } = {
    entries,
    approvalPublicKey: turns.approvals.publicKey,
  },
): Promise<LiveWhatIf> {
  return liveWhatIf(recorded.entries, change, {
    ids: requestIds,
    verifier: nodeEd25519Verifier,
    approvalPublicKey: recorded.approvalPublicKey,
    resigner: nodeEd25519Signer(randomBytes(32)),
    modelFor: (model) =>
      new AnthropicProvider({
        apiKey: messages.apiKey,
        baseUrl: messages.url,
        ...(model === '' ? {} : { model }),
        maxAttempts: 1,
      }),
    tools: builtinToolRunner,
    runnable,
    clock: { nowMs: () => 1_000 },
  });
}

const positionOf = (kind: string, index: number): number =>
  entries.filter((e) => e.kind === kind)[index]!.position;

describe('liveWhatIf', () => {
  it('calls the model live from a departure that needs one, and writes nothing', async () => {
    const before = messages.requests.length;
    const run = await live({ kind: 'system_prompt', value: 'Be terse.' });
    expect(run.report.needsModel).toBe(true);
    expect(run.live).toMatchObject({
      turnId: run.report.divergence!.turnId,
      from: run.report.divergence!.position,
      outcome: 'completed',
      text: 'echo: what is 6 * 7?',
      modelCalls: 1,
      toolCalls: [],
    });
    expect(messages.requests.length - before).toBe(1);
    const sent = messages.requests.at(-1)!.body as { system?: unknown };
    expect(JSON.stringify(sent.system)).toContain('Be terse.');
    expect(await turns.journal.entries(partition)).toHaveLength(entries.length);
  });

  it('runs a pure tool the changed model output asks for, then asks the model live', async () => {
    const thanks = positionOf('model_call', 2);
    const run = await live({
      kind: 'model_output',
      position: thanks,
      content: [
        {
          type: 'tool_use',
          toolCallId: 'toolu_live_1',
          name: 'text_stats',
          argsJson: '{"text":"a b"}',
        },
      ],
    });
    expect(run.report.divergence?.position).toBeGreaterThan(thanks);
    expect(run.live?.toolCalls).toEqual([
      {
        name: 'text_stats',
        argsJson: '{"text":"a b"}',
        how: 'ran',
        content: '{"characters":3,"words":2,"lines":1}',
        isError: false,
      },
    ]);
    expect(run.live).toMatchObject({
      outcome: 'completed',
      modelCalls: 1,
      // The echo responder names a call it did not ask for by its id.
      text: 'tool toolu_live_1 said: {"characters":3,"words":2,"lines":1}',
    });
    expect(await turns.journal.entries(partition)).toHaveLength(entries.length);
  });

  it('stops, saying what it would have called, at a tool it may not run and the turn never recorded', async () => {
    const before = messages.requests.length;
    const run = await live(
      {
        kind: 'model_output',
        position: positionOf('model_call', 2),
        content: [
          {
            type: 'tool_use',
            toolCallId: 'toolu_live_3',
            name: 'text_stats',
            argsJson: '{"text":"x"}',
          },
        ],
      },
      new Set(),
    );
    expect(run.live).toMatchObject({
      outcome: 'stopped',
      modelCalls: 0,
      toolCalls: [{ name: 'text_stats', argsJson: '{"text":"x"}', how: 'stopped' }],
    });
    expect(run.live?.message).toContain('it would have called text_stats {"text":"x"}');
    expect(messages.requests.length).toBe(before);
  });

  it('stops where a tool waits for an approval, without calling it', async () => {
    const run = await live({
      kind: 'model_output',
      position: positionOf('model_call', 2),
      content: [
        {
          type: 'tool_use',
          toolCallId: 'toolu_live_2',
          name: 'calculator',
          argsJson: '{"expression":"1+1"}',
        },
      ],
    });
    expect(run.live).toMatchObject({ outcome: 'awaiting_approval', modelCalls: 0, toolCalls: [] });
    expect(run.live?.message).toContain('calculator waits for an approval');
  });

  it('goes on from a denied approval with the model, never running the denied call', async () => {
    const run = await live({ kind: 'approval', requestId, decision: 'denied' });
    expect(run.report.divergence).toBeDefined();
    expect(run.live?.outcome).toBe('completed');
    expect(run.live?.toolCalls).toEqual([]);
    expect(run.live?.modelCalls).toBe(1);
    expect(run.live?.text).toMatch(
      / said: The call to calculator was denied by what-if and did not run/u,
    );
    const denied = entries.find((e) => e.kind === 'approval_response')!;
    expect(decodePayload('approval_response', denied.payload).requestId).toBe(requestId);
  });

  it('has nothing to run when the change alters nothing', async () => {
    const run = await live({ kind: 'max_steps', value: 8 });
    expect(run.report.divergence).toBeUndefined();
    expect(run.live).toBeUndefined();
  });
});

describe("the scratch run's tool policy", () => {
  // The recorded calculator call of the first turn, read as if the tool had side effects.
  const recordedCall = () =>
    decodePayload('tool_call', entries.find((e) => e.kind === 'tool_call')!.payload);
  const callOptions = { signal: new AbortController().signal, timeoutMs: 1_000 };

  /** The policy over the first turn's record; calls it with `argsJson`. */
  async function callWith(argsJson: string) {
    const log: LiveToolCall[] = [];
    let stopped = false;
    const { turnId } = recordedCall();
    const policy = livePolicy(
      [{ name: 'calculator', effect: ToolEffect.SideEffect }],
      recordedResults(entries, turnId),
      { tools: builtinToolRunner, runnable: new Set(builtinTools.map((t) => t.name)) },
      { log, stop: () => (stopped = true) },
    );
    const request = {
      turnId,
      toolCallId: 'toolu_policy',
      name: 'calculator',
      input: JSON.parse(argsJson) as Record<string, string>,
      argsJson,
      step: 1,
      maxSteps: 8,
    };
    const outcome = await policy.call(request, callOptions).catch((error: unknown) => error);
    return { outcome, log, stopped };
  }

  it('reuses the recorded result of a side-effecting call with the same arguments, never running it', async () => {
    const { argsJson } = recordedCall();
    const run = await callWith(argsJson);
    expect(run.outcome).toEqual({ content: '42', isError: false });
    expect(run.log).toEqual([
      { name: 'calculator', argsJson, how: 'reused', content: '42', isError: false },
    ]);
    expect(run.stopped).toBe(false);
  });

  it('stops at a side-effecting call whose arguments the turn never recorded', async () => {
    const run = await callWith('{"expression":"1+1"}');
    expect(String(run.outcome)).toContain('the scratch run does not call calculator');
    expect(run.log).toEqual([
      { name: 'calculator', argsJson: '{"expression":"1+1"}', how: 'stopped' },
    ]);
    expect(run.stopped).toBe(true);
  });
});

describe('liveWhatIf of a panel member asked of another agent (delegate@)', () => {
  // A lead asks the researcher and the checker at once, over the real stack with each
  // agent's model called by the control plane's relay; each delegate echoes its task.
  const ask = (id: string, who: string, task: string) =>
    ({ type: 'tool_use', id, name: '__delegate_to', input: { agent: who, task } }) as const;
  const panel: Responder = (request) => {
    const asked = (request.body as { messages: unknown[] }).messages.length;
    if (!systemOf(request).startsWith('You are lead.')) return echoReply(request.body);
    return asked === 1
      ? {
          kind: 'message',
          content: [
            ask('toolu_ask_researcher', 'researcher', 'How much was billed?'),
            ask('toolu_ask_checker', 'checker', 'Was it paid twice?'),
          ],
        }
      : { kind: 'message', content: [{ type: 'text', text: 'lead: answered' }] };
  };

  it('opens the moved thread under the new agent, and goes on live from its intent', async () => {
    const rig = await startAgentTurns({
      agents: new Map(
        [
          crewAgent('lead', { delegates: ['researcher', 'checker'] }),
          crewAgent('researcher'),
          crewAgent('checker'),
        ].map((a) => [a.metadata.name ?? '', a]),
      ),
      entry: 'lead',
      respond: panel,
    });
    try {
      expect(await rig.post('Was I charged twice?')).toMatchObject({ status: 'complete' });
      const recorded = await rig.turns.journal.entries(`conv-${rig.uid}`);
      const before = messages.requests.length;
      const run = await live(
        { kind: 'delegate', toolCallId: 'toolu_ask_checker', agent: 'researcher' },
        undefined,
        { entries: recorded, approvalPublicKey: rig.turns.approvals.publicKey },
      );
      // The run departs at the moved thread's intent, which now asks the researcher.
      const at = recorded.find((e) => e.position === run.report.divergence?.position);
      expect(at?.kind).toBe('tool_call');
      expect(decodePayload('tool_call', at!.payload).toolCallId).toBe('toolu_ask_checker');
      expect(run.report.divergence?.expected).toContain('researcher');
      expect(run.report.needsModel).toBe(false);
      // Live from there: the researcher is asked the checker's task, and the turn completes.
      expect(run.live).toMatchObject({ outcome: 'completed', from: at?.position });
      const asked = messages.requests.slice(before).map((r) => systemOf(r).split('\n')[0]);
      expect(asked).not.toContain('You are checker.');
      expect(run.live?.text).toContain('echo: Was it paid twice?');
    } finally {
      await rig.close();
    }
  });
});
