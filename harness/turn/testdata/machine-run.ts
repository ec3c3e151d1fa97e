import { approvalArgsSha256 } from '../../../common/approval-bytes';
import type { ModelResponse, OutputBlock } from '../../../common/model/model-port';
import { requestIds } from '../../../common/request-ids';
import { nodeEd25519Signer, nodeEd25519Verifier } from '../../crypto/node-ed25519';
import {
  createTurnMachine,
  type StepResult,
  type TurnEvent,
  type TurnInput,
  type TurnState,
} from '../turn-machine';
import { signApproval } from '../approval-token';
import type { ApprovalAnswer, TurnStep, TurnTool } from '../turn-records';

/**
 * The real turn machine driven by hand, for its table tests (turn-machine.test.ts,
 * turn-handoff.test.ts, turn-delegation.test.ts): one approval key, the model's replies as
 * events, and the steps a run committed.
 */

/** The control plane's approval key in these tests. */
export const approvalKey = nodeEd25519Signer(new Uint8Array(32).fill(7));

export const machine = createTurnMachine({
  ids: requestIds,
  verifier: nodeEd25519Verifier,
  approvalPublicKey: approvalKey.publicKey,
});

/**
 * An approver's answer, signed with {@link approvalKey}, approving call `toolCallId` of
 * turn `turnId` to `toolName` with `argsJson`, committed at `answeredAtMs`.
 */
export function approvalOf(
  call: { turnId: string; toolCallId: string; toolName: string; argsJson: string },
  answeredAtMs = 1,
): ApprovalAnswer {
  const binding = {
    turnId: call.turnId,
    requestId: requestIds.approvalRequestId(call.turnId, call.toolCallId),
    toolName: call.toolName,
    argsSha256: approvalArgsSha256(call.argsJson),
    decision: 'approved' as const,
  };
  return {
    ...binding,
    ...signApproval(binding, approvalKey),
    answeredBy: 'a',
    answeredAtMs,
    comment: '',
  };
}

/** A tool of `effect`, gated when `needsApproval`. */
export function testTool(
  name: string,
  effect: TurnTool['effect'],
  needsApproval = false,
): TurnTool {
  return { name, description: name, inputSchema: { type: 'object' }, effect, needsApproval };
}

/** The model's reply `content`, ending at `finishedAtMs` (started 10 ms before). */
export function modelReply(finishedAtMs: number, ...content: OutputBlock[]): TurnEvent {
  const response: ModelResponse = {
    model: 'm',
    content,
    stopReason: content.some((b) => b.type === 'tool_use') ? 'tool_use' : 'end_turn',
    usage: { inputTokens: 1, outputTokens: 1 },
  };
  return { type: 'model_responded', response, startedAtMs: finishedAtMs - 10, finishedAtMs };
}

/** {@link modelReply} to the model call of delegation thread `thread` (its `__delegate_to` id). */
export function threadReply(
  thread: string,
  finishedAtMs: number,
  ...content: OutputBlock[]
): TurnEvent {
  return { ...modelReply(finishedAtMs, ...content), thread } as TurnEvent;
}

/** Starts a turn from `start` and applies `events`; every step's result, the start's first. */
export function runTurn(start: TurnInput, ...events: TurnEvent[]): StepResult[] {
  let state: TurnState = machine.initialState;
  return [{ type: 'turn_started', input: start } satisfies TurnEvent, ...events].map((event) => {
    const result = machine.step(state, event);
    state = result.state;
    return result;
  });
}

/** The steps `results` committed, in order: what a resumed dispatch is given. */
export function committedSteps(results: readonly StepResult[]): TurnStep[] {
  return results.flatMap((r) =>
    r.effects.flatMap((e) => (e.type === 'commit_step' ? [e.step] : [])),
  );
}
