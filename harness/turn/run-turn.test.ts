import type { TextDelta } from './effect-calls';
import { describe, expect, it } from '@jest/globals';
import { approvalArgsSha256 } from '../../common/approval-bytes';
import { AppError } from '../../common/errors';
import { nodeEd25519Signer, nodeEd25519Verifier } from '../crypto/node-ed25519';
import { ScriptedProvider, type ScriptReply } from '../model/scripted-provider';
import { builtinToolRunner, builtinTools } from '../tools/builtin-tools';
import type { ToolRunner } from './ports/tool-port';
import { signApproval, type ApprovalSigner } from './approval-token';
import { requestIds } from '../../common/request-ids';
import { askUserTool, delegateToolFor, handoffTool } from './reserved-tools';
import { runTurn, type RunTurnDeps, type StepSink, type ThreadChange } from './run-turn';
import { CLOSING_INSTRUCTION, FALLBACK_REPLY, type TurnInput } from './turn-machine';
import type { ApprovalAnswer, TurnStep, TurnTool } from './turn-records';

const approvalKey = nodeEd25519Signer(new Uint8Array(32).fill(7));
const intruderKey = nodeEd25519Signer(new Uint8Array(32).fill(9));

const sendEmail: TurnTool = {
  name: 'send_email',
  description: 'Send an email.',
  inputSchema: { type: 'object' },
  effect: 'side_effect',
  needsApproval: false,
};
const refund: TurnTool = {
  name: 'refund_payment',
  description: 'Refund a payment.',
  inputSchema: { type: 'object' },
  effect: 'side_effect',
  needsApproval: true,
  approvalReason: 'Refunds move money.',
};
const charge: TurnTool = {
  name: 'charge_card',
  description: 'Charge a card (runs on the control plane).',
  inputSchema: { type: 'object' },
  effect: 'side_effect',
  needsApproval: false,
  host: 'control_plane',
};
/** A pure tool that answers after `ticks` macrotasks, or waits for the signal when ticks is -1. */
const slowEcho: TurnTool = {
  name: 'slow_echo',
  description: 'Echo after a delay.',
  inputSchema: { type: 'object' },
  effect: 'pure',
  needsApproval: false,
};
const allTools: TurnTool[] = [
  ...builtinTools,
  sendEmail,
  refund,
  charge,
  slowEcho,
  handoffTool,
  askUserTool,
];

const tick = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

function stepLabel(step: TurnStep): string {
  switch (step.kind) {
    case 'model_call':
      return `commit model_call ${step.record.step}${step.record.closing ? ' closing' : ''}`;
    case 'tool_call':
      return `commit tool_call ${step.record.toolCallId}`;
    case 'tool_result':
      return `commit tool_result ${step.record.toolCallId}`;
    case 'agent_config':
      return `commit agent_config`;
    case 'agent_handoff':
      return `commit agent_handoff ${step.record.toAgent}`;
  }
}

interface Rig {
  model: ScriptedProvider;
  log: string[];
  committed: TurnStep[];
  deltas: string[];
  deps: RunTurnDeps;
}

function rig(replies: ScriptReply[], options: { commitTicks?: number; sink?: StepSink } = {}): Rig {
  const log: string[] = [];
  const committed: TurnStep[] = [];
  const deltas: string[] = [];
  const model = new ScriptedProvider({ replies }, 'test-script');
  const tools: ToolRunner = {
    async call(request, { signal }) {
      log.push(`run ${request.name} ${request.toolCallId}`);
      if (request.name === 'slow_echo') {
        const ticks = Number(request.input.ticks ?? 0);
        if (ticks < 0) {
          await new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve()));
          log.push(`aborted ${request.toolCallId}`);
          throw new AppError('cancelled', 'aborted');
        }
        for (let i = 0; i < ticks; i++) await tick();
        const text = request.input.text;
        return { content: typeof text === 'string' ? text : '', isError: false };
      }
      if (request.name === 'send_email' || request.name === 'refund_payment') {
        if (request.input.hang === true) {
          await new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve()));
          throw new AppError('cancelled', 'aborted');
        }
        return { content: `${request.name} done`, isError: false };
      }
      return builtinToolRunner.call(request, { signal, timeoutMs: 1000 });
    },
  };
  const trustedTools: ToolRunner = {
    call(request) {
      log.push(`trusted ${request.name} ${request.toolCallId}`);
      return Promise.resolve({ content: 'charged', isError: false });
    },
  };
  const steps: StepSink = options.sink ?? {
    async commit(step) {
      log.push(`${stepLabel(step)} start`);
      for (let i = 0; i < (options.commitTicks ?? 0); i++) await tick();
      committed.push(step);
      log.push(stepLabel(step));
    },
  };
  let now = 1000;
  return {
    model,
    log,
    committed,
    deltas,
    deps: {
      modelFor: () => model,
      tools,
      trustedTools,
      steps,
      clock: { nowMs: () => now++ },
      ids: requestIds,
      approvalVerifier: nodeEd25519Verifier,
      approvalPublicKey: approvalKey.publicKey,
      onTextDelta: ({ step, text }) => deltas.push(`${step}:${text}`),
    },
  };
}

function input(overrides: Partial<TurnInput> = {}): TurnInput {
  return {
    turnId: 'turn-1',
    history: [],
    userMessage: 'hello',
    tools: allTools,
    budget: {},
    recordedSteps: [],
    approvalAnswers: [],
    questionAnswers: [],
    ...overrides,
  };
}

const use = (id: string, name: string, input: Record<string, string | number | boolean> = {}) => ({
  tool_use: { id, name, input },
});
const toolReply = (...blocks: ReturnType<typeof use>[]): ScriptReply => ({ content: blocks });

const labels = (log: string[]): string[] => log.filter((line) => !line.endsWith(' start'));

describe('runTurn', () => {
  it('text-only turn: one model call, committed, streamed', async () => {
    const r = rig([{ text: 'Hello there, friend.', usage: { input_tokens: 5, output_tokens: 4 } }]);
    const outcome = await runTurn(input(), r.deps);
    expect(outcome).toEqual({
      kind: 'completed',
      text: 'Hello there, friend.',
      steps: 1,
      fallback: false,
      completedAtMs: 1002,
    });
    expect(r.committed).toEqual([
      {
        kind: 'model_call',
        record: {
          turnId: 'turn-1',
          step: 1,
          model: 'scripted',
          content: [{ type: 'text', text: 'Hello there, friend.' }],
          stopReason: 'end_turn',
          usage: { inputTokens: 5, outputTokens: 4 },
          startedAtMs: 1000,
          finishedAtMs: 1001,
          closing: false,
        },
      },
    ]);
    expect(r.deltas).toEqual(['1:Hello ', '1:there, ', '1:friend.']);
    expect(r.model.requests[0]).toEqual({
      messages: [{ role: 'user', content: [{ type: 'text', text: 'hello' }] }],
      tools: allTools.map(({ name, description, inputSchema }) => ({
        name,
        description,
        inputSchema,
      })),
      toolChoice: 'auto',
    });
  });

  it('hands the reply that ends the turn to a sink that can carry it, and commits the others first', async () => {
    const log: string[] = [];
    const sink: StepSink = {
      commit(step) {
        log.push(stepLabel(step));
        return Promise.resolve();
      },
      carry(step) {
        log.push(stepLabel(step).replace('commit', 'carry'));
      },
    };
    const r = rig(
      [
        { content: [{ text: 'Computing.' }, use('c1', 'calculator', { expression: '6 * 7' })] },
        { text: 'It is 42.' },
      ],
      { sink },
    );
    const outcome = await runTurn(input(), r.deps);
    expect(outcome).toMatchObject({ kind: 'completed', text: 'It is 42.', steps: 2 });
    expect(log).toEqual([
      'commit model_call 1',
      'commit tool_call c1',
      'commit tool_result c1',
      'carry model_call 2',
    ]);
  });

  it('tool turn: the result goes back to the model', async () => {
    const r = rig([
      { content: [{ text: 'Computing.' }, use('c1', 'calculator', { expression: '6 * 7' })] },
      { text: 'It is 42.' },
    ]);
    const outcome = await runTurn(input({ system: 'Be brief.' }), r.deps);
    expect(outcome).toMatchObject({ kind: 'completed', text: 'It is 42.', steps: 2 });
    expect(labels(r.log)).toEqual([
      'commit model_call 1',
      'commit tool_call c1',
      'run calculator c1',
      'commit tool_result c1',
      'commit model_call 2',
    ]);
    expect(r.committed[1]).toEqual({
      kind: 'tool_call',
      record: {
        turnId: 'turn-1',
        step: 1,
        toolCallId: 'c1',
        toolName: 'calculator',
        argsJson: '{"expression":"6 * 7"}',
        effect: 'pure',
        approvalRequestId: '',
      },
    });
    expect(r.committed[2]).toEqual({
      kind: 'tool_result',
      record: { turnId: 'turn-1', toolCallId: 'c1', content: '42', isError: false, denied: false },
    });
    expect(r.model.requests[1]?.system).toBe('Be brief.');
    expect(r.model.requests[1]?.messages).toEqual([
      { role: 'user', content: [{ type: 'text', text: 'hello' }] },
      {
        role: 'assistant',
        content: [
          { type: 'text', text: 'Computing.' },
          { type: 'tool_use', id: 'c1', name: 'calculator', input: { expression: '6 * 7' } },
        ],
      },
      {
        role: 'user',
        content: [{ type: 'tool_result', toolUseId: 'c1', content: '42', isError: false }],
      },
    ]);
  });

  it('parallel tool calls: all committed before any runs, results in tool_use order', async () => {
    const r = rig([
      toolReply(
        use('a', 'slow_echo', { text: 'first', ticks: 3 }),
        use('b', 'slow_echo', { text: 'second', ticks: 1 }),
        use('c', 'calculator', { expression: '1 / 0' }),
      ),
      { text: 'done' },
    ]);
    await runTurn(input(), r.deps);
    expect(labels(r.log)).toEqual([
      'commit model_call 1',
      'commit tool_call a',
      'commit tool_call b',
      'commit tool_call c',
      'run slow_echo a',
      'run slow_echo b',
      'run calculator c',
      'commit tool_result c',
      'commit tool_result b',
      'commit tool_result a',
      'commit model_call 2',
    ]);
    expect(r.model.requests[1]?.messages[2]).toEqual({
      role: 'user',
      content: [
        { type: 'tool_result', toolUseId: 'a', content: 'first', isError: false },
        { type: 'tool_result', toolUseId: 'b', content: 'second', isError: false },
        { type: 'tool_result', toolUseId: 'c', content: 'division by zero', isError: true },
      ],
    });
  });

  it('a side-effecting tool runs only after its tool_call commit has resolved', async () => {
    const r = rig([toolReply(use('m1', 'send_email', { to: 'bob' })), { text: 'Sent.' }], {
      commitTicks: 2,
    });
    await runTurn(input(), r.deps);
    expect(r.log).toEqual([
      'commit model_call 1 start',
      'commit model_call 1',
      'commit tool_call m1 start',
      'commit tool_call m1',
      'run send_email m1',
      'commit tool_result m1 start',
      'commit tool_result m1',
      'commit model_call 2 start',
      'commit model_call 2',
    ]);
  });

  it('budget exhaustion: one closing call without tools says what was tried', async () => {
    const r = rig([
      toolReply(use('c1', 'calculator', { expression: '1+1' })),
      toolReply(use('c2', 'calculator', { expression: '2+2' })),
      { text: 'I added numbers twice but ran out of steps.' },
    ]);
    const outcome = await runTurn(input({ budget: { deployment: 2 } }), r.deps);
    expect(outcome).toMatchObject({
      kind: 'completed',
      text: 'I added numbers twice but ran out of steps.',
      steps: 3,
      fallback: false,
    });
    expect(r.model.callCount).toBe(3);
    const closing = r.model.requests[2];
    expect(closing?.toolChoice).toBe('none');
    expect(closing?.messages.at(-1)).toEqual({
      role: 'user',
      content: [
        { type: 'tool_result', toolUseId: 'c2', content: '4', isError: false },
        { type: 'text', text: CLOSING_INSTRUCTION },
      ],
    });
    expect(r.committed.at(-1)).toMatchObject({
      kind: 'model_call',
      record: { step: 3, closing: true },
    });
  });

  it('budget exhaustion: an empty closing reply gives the fixed fallback', async () => {
    const r = rig([toolReply(use('c1', 'calculator', { expression: '1+1' })), { text: '  ' }]);
    const outcome = await runTurn(input({ budget: { directive: 1 } }), r.deps);
    expect(outcome).toMatchObject({
      kind: 'completed',
      text: FALLBACK_REPLY,
      steps: 2,
      fallback: true,
    });
  });

  it.each([
    ['spec lower than the default', { conversation: 2 }, 2],
    ['directive lower than spec', { conversation: 3, directive: 1 }, 1],
    [
      'lowest of deployment, spec and directive wins',
      { deployment: 5, conversation: 4, directive: 3 },
      3,
    ],
    ['a directive cannot raise the budget', { conversation: 2, directive: 6 }, 2],
  ])('lowered budget: %s', async (_name, budget, expected) => {
    const endless = Array.from({ length: 10 }, (_, i) => toolReply(use(`c${i}`, 'current_step')));
    const r = rig([...endless.slice(0, expected), { text: 'closing' }]);
    const outcome = await runTurn(input({ budget }), r.deps);
    expect(outcome).toMatchObject({ kind: 'completed', text: 'closing', steps: expected + 1 });
    expect(r.model.callCount).toBe(expected + 1);
    expect(r.model.requests.map((req) => req.toolChoice)).toEqual([
      ...Array<string>(expected).fill('auto'),
      'none',
    ]);
    // The tool sees the same budget.
    expect(r.committed).toContainEqual({
      kind: 'tool_result',
      record: {
        turnId: 'turn-1',
        toolCallId: `c${expected - 1}`,
        content: `{"step":${expected},"maxSteps":${expected},"stepsLeft":0}`,
        isError: false,
        denied: false,
      },
    });
  });

  describe('approvals', () => {
    const args = { amount_minor: 500, order: 'A-17' };
    const argsJson = '{"amount_minor":500,"order":"A-17"}';
    const requestId = requestIds.approvalRequestId('turn-1', 'r1');
    const refundReply = toolReply(use('r1', 'refund_payment', args));

    function signed(
      decision: 'approved' | 'denied',
      overrides: { turnId?: string; requestId?: string; argsJson?: string } = {},
      key: ApprovalSigner = approvalKey,
    ): ApprovalAnswer {
      const binding = {
        turnId: overrides.turnId ?? 'turn-1',
        requestId: overrides.requestId ?? requestId,
        toolName: 'refund_payment',
        argsSha256: approvalArgsSha256(overrides.argsJson ?? argsJson),
        decision,
      };
      const { keyId, signature } = signApproval(binding, key);
      return {
        ...binding,
        keyId,
        signature,
        answeredBy: 'web:alice',
        answeredAtMs: 5,
        comment: decision === 'denied' ? 'too large' : '',
      };
    }

    async function firstRun(): Promise<TurnStep[]> {
      const r = rig([refundReply]);
      const outcome = await runTurn(input(), r.deps);
      expect(outcome).toEqual({
        kind: 'awaiting_approval',
        request: {
          turnId: 'turn-1',
          requestId,
          toolCallId: 'r1',
          toolName: 'refund_payment',
          argsJson,
          argsSha256: approvalArgsSha256(argsJson),
          reason: 'Refunds move money.',
          requiredApprover: '',
        },
      });
      expect(r.log.some((line) => line.startsWith('run '))).toBe(false);
      expect(labels(r.log)).toEqual(['commit model_call 1']);
      return r.committed;
    }

    it('pauses, then runs the call once a signed approval arrives', async () => {
      const recordedSteps = await firstRun();
      expect(requestId).toMatch(/^apr_[0-9a-f]{32}$/);
      const r = rig([{ text: 'Refunded.' }]);
      const outcome = await runTurn(
        input({ recordedSteps, approvalAnswers: [signed('approved')] }),
        r.deps,
      );
      expect(outcome).toMatchObject({ kind: 'completed', text: 'Refunded.', steps: 2 });
      expect(r.model.callCount).toBe(1);
      expect(labels(r.log)).toEqual([
        'commit tool_call r1',
        'run refund_payment r1',
        'commit tool_result r1',
        'commit model_call 2',
      ]);
      expect(r.committed[0]).toMatchObject({
        kind: 'tool_call',
        record: { toolCallId: 'r1', effect: 'side_effect', approvalRequestId: requestId },
      });
    });

    it('a denial gives the model a denied result and the turn goes on', async () => {
      const recordedSteps = await firstRun();
      const r = rig([{ text: 'The refund was not approved.' }]);
      const outcome = await runTurn(
        input({ recordedSteps, approvalAnswers: [signed('denied')] }),
        r.deps,
      );
      expect(outcome).toMatchObject({ kind: 'completed', text: 'The refund was not approved.' });
      expect(r.log.some((line) => line.startsWith('run '))).toBe(false);
      const denial =
        'The call to refund_payment was denied by web:alice and did not run. Their note: too large Do not retry it with the same arguments; continue without it or tell the user.';
      expect(r.committed[0]).toEqual({
        kind: 'tool_result',
        record: {
          turnId: 'turn-1',
          toolCallId: 'r1',
          content: denial,
          isError: false,
          denied: true,
        },
      });
      expect(r.model.requests[0]?.messages.at(-1)).toEqual({
        role: 'user',
        content: [{ type: 'tool_result', toolUseId: 'r1', content: denial, isError: false }],
      });
    });

    it.each<[string, () => ApprovalAnswer, string]>([
      [
        'forged signature',
        () => ({ ...signed('approved', {}, intruderKey), keyId: signed('approved').keyId }),
        'answer signature does not verify with the approval key (forged)',
      ],
      [
        'mismatched args',
        () => signed('approved', { argsJson: '{"amount_minor":50000,"order":"A-17"}' }),
        'answer binds different arguments; new arguments need a new approval',
      ],
      [
        'answer replayed from another turn',
        () =>
          signed('approved', {
            turnId: 'turn-0',
            requestId: requestIds.approvalRequestId('turn-0', 'r1'),
          }),
        'answer is for turn turn-0, not turn-1 (replayed)',
      ],
      [
        'signed denial presented as approval',
        () => ({ ...signed('denied'), decision: 'approved' }),
        'answer signature does not verify with the approval key (forged)',
      ],
    ])('rejects a %s and pauses again', async (_name, make, rejection) => {
      const recordedSteps = await firstRun();
      const r = rig([]);
      const outcome = await runTurn(input({ recordedSteps, approvalAnswers: [make()] }), r.deps);
      expect(outcome).toMatchObject({
        kind: 'awaiting_approval',
        request: { requestId, toolCallId: 'r1' },
        rejection,
      });
      expect(r.log).toEqual([]);
      expect(r.model.callCount).toBe(0);
    });
  });

  it('question: pauses, and the answer becomes the tool result', async () => {
    const first = rig([toolReply(use('q1', '__ask_user', { question: 'Which order?' }))]);
    const paused = await runTurn(input(), first.deps);
    const requestId = requestIds.questionRequestId('turn-1', 'q1');
    expect(paused).toEqual({
      kind: 'awaiting_answer',
      request: { turnId: 'turn-1', requestId, toolCallId: 'q1', question: 'Which order?' },
    });
    expect(labels(first.log)).toEqual(['commit model_call 1']);

    const second = rig([{ text: 'Looking at A-17.' }]);
    const outcome = await runTurn(
      input({
        recordedSteps: first.committed,
        questionAnswers: [
          { turnId: 'turn-1', requestId, answer: 'A-17', answeredBy: 'web:alice', answeredAtMs: 9 },
        ],
      }),
      second.deps,
    );
    expect(outcome).toMatchObject({ kind: 'completed', text: 'Looking at A-17.', steps: 2 });
    expect(second.committed[0]).toEqual({
      kind: 'tool_result',
      record: {
        turnId: 'turn-1',
        toolCallId: 'q1',
        content: 'A-17',
        isError: false,
        denied: false,
      },
    });
    expect(second.model.callCount).toBe(1);
  });

  it('handoff ends the turn after sibling calls settle', async () => {
    const r = rig([
      toolReply(
        use('h1', '__handoff_to', { agent: 'billing', reason: 'refund question' }),
        use('c1', 'calculator', { expression: '2+2' }),
      ),
    ]);
    const outcome = await runTurn(input(), r.deps);
    expect(outcome).toEqual({
      kind: 'handed_off',
      handoff: {
        turnId: 'turn-1',
        toolCallId: 'h1',
        targetAgent: 'billing',
        reason: 'refund question',
      },
    });
    expect(labels(r.log)).toEqual([
      'commit model_call 1',
      'commit tool_call c1',
      'run calculator c1',
      'commit tool_result c1',
    ]);
    expect(r.model.callCount).toBe(1);
  });

  describe('resume', () => {
    it('reuses recorded model outputs and tool results instead of calling again', async () => {
      const script: ScriptReply[] = [
        toolReply(use('c1', 'calculator', { expression: '3*3' })),
        toolReply(use('c2', 'calculator', { expression: '9+1' })),
        { text: 'Ten.' },
      ];
      const full = rig(script);
      await runTurn(input(), full.deps);
      // Crash after the second model call was committed, before its tool ran.
      const recordedSteps = full.committed.slice(0, 4);
      expect(recordedSteps.map(stepLabel)).toEqual([
        'commit model_call 1',
        'commit tool_call c1',
        'commit tool_result c1',
        'commit model_call 2',
      ]);
      const resumed = rig([{ text: 'Ten.' }]);
      const outcome = await runTurn(input({ recordedSteps }), resumed.deps);
      expect(outcome).toMatchObject({ kind: 'completed', text: 'Ten.', steps: 3 });
      expect(resumed.model.callCount).toBe(1);
      expect(labels(resumed.log)).toEqual([
        'commit tool_call c2',
        'run calculator c2',
        'commit tool_result c2',
        'commit model_call 3',
      ]);
      // The model saw the same conversation as the uninterrupted run.
      expect(resumed.model.requests[0]).toEqual(full.model.requests[2]);
    });

    it('a fully recorded turn completes without the model or any tool', async () => {
      const full = rig([toolReply(use('c1', 'calculator', { expression: '1+2' })), { text: '3' }]);
      await runTurn(input(), full.deps);
      const replay = rig([]);
      const outcome = await runTurn(input({ recordedSteps: full.committed }), replay.deps);
      expect(outcome).toMatchObject({ kind: 'completed', text: '3', steps: 2 });
      expect(replay.model.callCount).toBe(0);
      expect(replay.log).toEqual([]);
    });

    it('a side-effecting tool_call without a result makes the turn ambiguous and is not re-run', async () => {
      const first = rig([toolReply(use('m1', 'send_email', { to: 'bob' })), { text: 'Sent.' }]);
      await runTurn(input(), first.deps);
      const recordedSteps = first.committed.slice(0, 2);
      expect(recordedSteps.map(stepLabel)).toEqual(['commit model_call 1', 'commit tool_call m1']);
      const resumed = rig([{ text: 'must not be used' }]);
      const outcome = await runTurn(input({ recordedSteps }), resumed.deps);
      expect(outcome).toEqual({
        kind: 'ambiguous',
        toolCallId: 'm1',
        reason:
          'side-effecting tool send_email was committed in step 1 but has no result; it may or may not have run, so it is not run again',
        detectedAtMs: 1000,
      });
      expect(resumed.log).toEqual([]);
      expect(resumed.model.callCount).toBe(0);
    });

    it('a pure tool_call without a result is run again, without a second tool_call', async () => {
      const first = rig([toolReply(use('c1', 'calculator', { expression: '5-3' })), { text: '2' }]);
      await runTurn(input(), first.deps);
      const resumed = rig([{ text: '2' }]);
      const outcome = await runTurn(
        input({ recordedSteps: first.committed.slice(0, 2) }),
        resumed.deps,
      );
      expect(outcome).toMatchObject({ kind: 'completed', text: '2' });
      expect(labels(resumed.log)).toEqual([
        'run calculator c1',
        'commit tool_result c1',
        'commit model_call 2',
      ]);
    });
  });

  describe('cancellation', () => {
    it('cancels a running pure tool: outcome cancelled, the tool saw the abort', async () => {
      const r = rig([toolReply(use('s1', 'slow_echo', { ticks: -1 }))]);
      const controller = new AbortController();
      const running = runTurn(input(), r.deps, controller.signal);
      while (!r.log.includes('run slow_echo s1')) await tick();
      controller.abort(new Error('user pressed stop'));
      await expect(running).resolves.toEqual({ kind: 'cancelled', reason: 'user pressed stop' });
      expect(r.log).toContain('aborted s1');
      expect(labels(r.log).filter((l) => l.startsWith('commit tool_result'))).toEqual([]);
    });

    it('cancelling a running side-effecting tool leaves the turn ambiguous', async () => {
      const r = rig([toolReply(use('m1', 'send_email', { hang: true }))]);
      const controller = new AbortController();
      const running = runTurn(input(), r.deps, controller.signal);
      while (!r.log.includes('run send_email m1')) await tick();
      controller.abort(new Error('user pressed stop'));
      await expect(running).resolves.toEqual({
        kind: 'ambiguous',
        toolCallId: 'm1',
        reason:
          'turn cancelled while side-effecting tool send_email was running: user pressed stop',
        detectedAtMs: 1002,
      });
    });

    it('cancels the model stream: nothing is committed', async () => {
      const r = rig([{ text: 'one two three four' }]);
      const controller = new AbortController();
      r.deps = {
        ...r.deps,
        onTextDelta: ({ text }) => {
          r.deltas.push(text);
          controller.abort(new Error('stop'));
        },
      };
      const outcome = await runTurn(input(), r.deps, controller.signal);
      expect(outcome).toEqual({ kind: 'cancelled', reason: 'stop' });
      expect(r.deltas).toEqual(['one ']);
      expect(r.committed).toEqual([]);
    });
  });

  it('routes a control-plane tool through the trusted-tool proxy', async () => {
    const r = rig([toolReply(use('p1', 'charge_card', { amount_minor: 100 })), { text: 'Paid.' }]);
    await runTurn(input(), r.deps);
    expect(labels(r.log)).toEqual([
      'commit model_call 1',
      'commit tool_call p1',
      'trusted charge_card p1',
      'commit tool_result p1',
      'commit model_call 2',
    ]);
  });

  it.each([
    [
      'a retryable failure the adapter gave up on',
      [{ error: { code: 'unavailable' as const, message: 'model overloaded' } }],
      { kind: 'failed', code: 'unavailable', message: 'model overloaded', retryable: true },
    ],
    [
      'a rate limit the adapter gave up on',
      [{ error: { code: 'resource_exhausted' as const, message: 'rate limited' } }],
      { kind: 'failed', code: 'resource_exhausted', message: 'rate limited', retryable: true },
    ],
    [
      'an unexpected fault (internal: a later dispatch may succeed)',
      [{ error: { code: 'internal' as const, message: 'model adapter broke' } }],
      { kind: 'failed', code: 'internal', message: 'model adapter broke', retryable: true },
    ],
    [
      'a refusal no later dispatch changes',
      [{ error: { code: 'permission_denied' as const, message: 'key revoked' } }],
      { kind: 'failed', code: 'permission_denied', message: 'key revoked', retryable: false },
    ],
    [
      'a script that runs out',
      [toolReply(use('c1', 'calculator', { expression: '1' }))],
      {
        kind: 'failed',
        code: 'failed_precondition',
        message:
          'scripted model test-script: no reply for model call 2; the script has 1 replies. Add replies to the script or shorten the turn.',
        retryable: false,
      },
    ],
  ])('model failure: %s fails the turn', async (_name, replies, expected) => {
    const r = rig(replies);
    await expect(runTurn(input(), r.deps)).resolves.toEqual(expected);
  });

  it('a failed commit stops the turn before the tool runs', async () => {
    const log: string[] = [];
    const r = rig([toolReply(use('m1', 'send_email', {}))], {
      sink: {
        commit(step) {
          if (step.kind === 'tool_call') {
            return Promise.reject(new AppError('unavailable', 'state plane unreachable'));
          }
          log.push(stepLabel(step));
          return Promise.resolve();
        },
      },
    });
    await expect(runTurn(input(), r.deps)).rejects.toThrow('state plane unreachable');
    expect(log).toEqual(['commit model_call 1']);
    expect(r.log).toEqual([]);
  });
});

describe('runTurn across a handoff', () => {
  it('tells onAgent each agent whose model it asks, once per change', async () => {
    const r = rig([
      toolReply(use('h1', '__handoff_to', { agent: 'billing', reason: 'an invoice' })),
      { text: 'Fixed.' },
    ]);
    const agents: string[] = [];
    const outcome = await runTurn(
      input({
        agentName: 'triage',
        handoffs: ['billing'],
        agents: [{ name: 'billing', tools: [], handoffs: [] }],
      }),
      { ...r.deps, onAgent: (name) => agents.push(name) },
    );
    expect(outcome).toMatchObject({ kind: 'completed', text: 'Fixed.', steps: 2 });
    // The turn starts with triage (no change to report); billing answers after the handoff.
    expect(agents).toEqual(['billing']);
    expect(labels(r.log)).toEqual([
      'commit model_call 1',
      'commit tool_result h1',
      'commit agent_handoff billing',
      'commit model_call 2',
    ]);
  });
});

describe('a panel on the shell (docs/turns.md, "Delegation")', () => {
  it("runs the threads' model calls together and streams each delegate's text under its thread", async () => {
    const ask = (id: string, agent: string) => ({
      tool_use: { id, name: '__delegate_to', input: { agent, task: `${agent}, please` } },
    });
    const r = rig([
      { content: [ask('d1', 'researcher'), ask('d2', 'checker')] },
      { text: 'found it' },
      { text: 'checked it' },
      { text: 'Both are done.' },
    ]);
    let inFlight = 0;
    let most = 0;
    const counted = {
      complete: async (...args: Parameters<ScriptedProvider['complete']>) => {
        inFlight += 1;
        most = Math.max(most, inFlight);
        try {
          await tick();
          return await r.model.complete(...args);
        } finally {
          inFlight -= 1;
        }
      },
    };
    const deltas: TextDelta[] = [];
    const threads: ThreadChange[] = [];
    const model = { model: 'scripted', maxTokens: 100 };
    const delegate = (name: string) => ({ name, system: `You are ${name}.`, tools: [], model });
    const outcome = await runTurn(
      input({
        agentName: 'lead',
        model,
        tools: [
          delegateToolFor([
            { name: 'researcher', description: '' },
            { name: 'checker', description: '' },
          ]),
        ],
        delegates: ['researcher', 'checker'],
        agents: [delegate('researcher'), delegate('checker')],
      }),
      {
        ...r.deps,
        modelFor: () => counted,
        onTextDelta: (delta) => deltas.push(delta),
        onThread: (change) => threads.push(change),
      },
    );
    // Traces open each delegate's span under the agent that asked (the turn's own here).
    expect(threads.filter((t) => t.kind === 'started')).toEqual([
      { kind: 'started', thread: 'd1', agent: 'researcher', parentThread: '' },
      { kind: 'started', thread: 'd2', agent: 'checker', parentThread: '' },
    ]);
    expect(
      threads
        .filter((t) => t.kind === 'closed')
        .map((t) => t.thread)
        .sort(),
    ).toEqual(['d1', 'd2']);
    expect(outcome).toMatchObject({ kind: 'completed', text: 'Both are done.' });
    // Both delegates' calls were in flight at once.
    expect(most).toBe(2);
    const textOf = (thread: string | undefined) =>
      deltas
        .filter((d) => d.thread === thread)
        .map((d) => d.text)
        .join('');
    expect(textOf('d1')).toBe('found it');
    expect(textOf('d2')).toBe('checked it');
    expect(textOf(undefined)).toBe('Both are done.');
  });
});
