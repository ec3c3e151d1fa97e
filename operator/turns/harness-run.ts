/**
 * The values of one harness call that need no I/O, for the runner's loop over it
 * (turn-runner.ts, docs/turns.md "One message", 6): when a refused call is retried, what a
 * trusted tool call gets while none is configured, the `forged` end of a refused step, and
 * the call's trace id.
 */
import { randomUUID } from 'node:crypto';
import { AppError, isAppError } from '../../common/errors';
import { MEMORY_TOOL } from '../../common/memory';
import type {
  Step,
  TrustedToolCall,
  TrustedToolResult,
} from '../../proto/gen/polychrome/harness/v1/harness';
import { planMemoryCall, type MemoryCallFacts, type MemoryCallPlan } from './plan-memory';
import type { HarnessEnd } from './plan-settle';

/** How often, and how long apart, a harness that is still busy is called again. */
export const HARNESS_BUSY = { retries: 20, waitMs: 250 } as const;

/**
 * Whether a call the harness refused is tried again: the harness still finishes a
 * cancelled call of an earlier attempt (its `failed_precondition` names the turn it runs,
 * details.runningTurn), and `tries` retries are not used up. Any other
 * `failed_precondition` (a journal rolled back under a step's commit) is not the harness
 * being busy: calling it again would run the model again to meet the same refusal.
 */
export function retryWhileBusy(error: unknown, tries: number): boolean {
  return (
    isAppError(error) &&
    error.code === 'failed_precondition' &&
    typeof error.details.runningTurn === 'string' &&
    tries < HARNESS_BUSY.retries
  );
}

/**
 * What the control plane does with a trusted tool call: the built-in `memory` tool
 * (plan-memory.ts); any other gets {@link noTrustedTool}.
 */
export function trustedToolPlan(
  facts: Omit<MemoryCallFacts, 'memory'>,
  memory: MemoryCallFacts['memory'] | undefined,
  call: TrustedToolCall,
): MemoryCallPlan {
  if (call.toolName !== MEMORY_TOOL) {
    return { kind: 'answer', events: [], result: noTrustedTool(call) };
  }
  return planMemoryCall({ ...facts, memory: memory ?? new Map() }, call);
}

/** The answer to a trusted tool call: no control-plane tool is configured here. */
export function noTrustedTool(call: TrustedToolCall): TrustedToolResult {
  return {
    toolCallId: call.toolCallId,
    content: `tool ${call.toolName} runs on the control plane, and none is configured here`,
    isError: true,
    outcomeUnknownReason: '',
  };
}

/**
 * How a call ends when the plan refused one of its steps (`checkStep`'s reason) or a
 * trusted tool call (given by its tool call id): the call is cancelled.
 */
export function forgedEnd(
  reason: string,
  refused: Step | string,
  call: { cancel(reason: unknown): void },
): Extract<HarnessEnd, { kind: 'forged' }> {
  const value = typeof refused === 'string' ? undefined : refused.step?.value;
  const toolCallId =
    typeof refused === 'string' ? refused : value && 'toolCallId' in value ? value.toolCallId : '';
  call.cancel(new AppError('permission_denied', `refused: ${reason}`));
  return { kind: 'forged', reason, toolCallId };
}

/** A fresh W3C traceparent for the harness call. */
export function traceparent(): string {
  const hex = randomUUID().replaceAll('-', '');
  return `00-${hex}-${hex.slice(0, 16)}-01`;
}

/**
 * Why a turn was left unsettled, for the caller: a retry with the same key is safe. A
 * cancellation of the control plane's own (it shut down, or lost the lease) is not the
 * caller's doing, so it says why; any other error is returned as it is.
 */
export function unsettledError(
  error: unknown,
  uid: string,
  turnId: string,
  cut: { readonly shutDown: boolean; readonly leaseLost: boolean },
): unknown {
  if (cut.shutDown) {
    return new AppError(
      'unavailable',
      `this control plane replica shut down during turn ${turnId}; retry with the same idempotency key and another replica resumes it`,
      { cause: error, details: { turnId } },
    );
  }
  if (cut.leaseLost) {
    return new AppError(
      'unavailable',
      `this replica lost the lease of conversation ${uid} during turn ${turnId}; retry with the same idempotency key`,
      { cause: error, details: { turnId } },
    );
  }
  return error;
}
