import { AppError, isAppError, isRetryable, type ErrorCode } from '../../common/errors';
import type { ModelProvider } from '../../common/model/model-port';
import type { PaymentPort } from './ports/payment-port';
import type { ToolCallRequest, ToolOutcome, ToolRunner } from './ports/tool-port';
import type { TerminalEffect, TurnEffect, TurnEvent } from './turn-machine';

/**
 * The calls a turn's effects start (run-turn.ts is the loop around them): a model call, a
 * tool on the harness or on the control plane, and a paid call's way to the control plane.
 * Each reports back as one event, or nothing when the turn was cancelled meanwhile (the
 * loop reports the cancel itself).
 */

/** Wall-clock time, injected so tests repeat exactly. */
export interface Clock {
  nowMs(): number;
}

/** A streamed text fragment of model round trip `step` (not committed). */
export interface TextDelta {
  readonly step: number;
  readonly text: string;
  /** The delegation thread writing (its `__delegate_to` call's id); absent at the top. */
  readonly thread?: string;
}

/** What the calls need of the turn's dependencies (run-turn.ts `RunTurnDeps` has it all). */
export interface EffectCallDeps {
  modelFor(agent: string): ModelProvider;
  readonly tools: ToolRunner;
  readonly trustedTools?: ToolRunner;
  readonly payments?: PaymentPort;
  readonly clock: Clock;
  /** @default 60000 */
  readonly toolTimeoutMs?: number;
  readonly onTextDelta?: (delta: TextDelta) => void;
}

const DEFAULT_TOOL_TIMEOUT_MS = 60_000;

/** Starts the call `effect` asks for; `launch` runs it and queues the event it reports. */
export function startCall(
  effect: Exclude<TurnEffect, TerminalEffect | { type: 'commit_step' }>,
  deps: EffectCallDeps,
  signal: AbortSignal,
  launch: (work: () => Promise<TurnEvent | undefined>) => void,
): void {
  switch (effect.type) {
    case 'call_model': {
      // Threads' model calls run side by side: each answer names the thread it is for.
      const thread = effect.thread === undefined ? {} : { thread: effect.thread };
      launch(async () => {
        const startedAtMs = deps.clock.nowMs();
        const onTextDelta = deps.onTextDelta;
        try {
          const response = await deps.modelFor(effect.agent).complete(effect.request, {
            signal,
            step: effect.step,
            ...(effect.thread === undefined ? {} : { thread: effect.thread }),
            // Every thread streams, each fragment naming its thread: a panel writes side by side.
            ...(onTextDelta === undefined
              ? {}
              : {
                  onTextDelta: (text: string) =>
                    onTextDelta({ step: effect.step, text, ...thread }),
                }),
          });
          if (signal.aborted) return undefined;
          return {
            type: 'model_responded',
            response,
            startedAtMs,
            finishedAtMs: deps.clock.nowMs(),
            ...thread,
          };
        } catch (error) {
          // The abort listener reports the cancel; a failure caused by it is not news.
          if (signal.aborted) return undefined;
          const code: ErrorCode = isAppError(error) ? error.code : 'internal';
          return {
            type: 'model_failed',
            code,
            message: isAppError(error)
              ? error.message
              : `model call ${effect.step} failed: ${errorText(error)}`,
            retryable: isRetryable(error),
            ...thread,
          };
        }
      });
      return;
    }
    case 'call_tool':
    case 'call_trusted_tool': {
      const runner = effect.type === 'call_tool' ? deps.tools : deps.trustedTools;
      const timeoutMs = deps.toolTimeoutMs ?? DEFAULT_TOOL_TIMEOUT_MS;
      const answered = effect.type === 'call_tool' ? 'tool_finished' : 'trusted_tool_answered';
      launch(async () => {
        if (runner === undefined) {
          return {
            type: answered,
            toolCallId: effect.call.toolCallId,
            outcome: {
              content: `Tool ${effect.call.name} runs on the control plane, which this harness cannot reach.`,
              isError: true,
            },
          };
        }
        try {
          const outcome = await callWithTimeout(runner, effect.call, signal, timeoutMs);
          if (signal.aborted) return undefined;
          return { type: answered, toolCallId: effect.call.toolCallId, outcome };
        } catch (error) {
          if (signal.aborted) return undefined;
          return {
            type: 'tool_outcome_unknown',
            toolCallId: effect.call.toolCallId,
            reason: isAppError(error) ? error.message : errorText(error),
          };
        }
      });
      return;
    }
    case 'request_charge':
    case 'settle_payment':
      launch(() => paymentStep(effect, deps, signal));
      return;
    default: {
      const never: never = effect;
      return never;
    }
  }
}

/** A paid call's way to the control plane: its challenge, or its approved payment. */
async function paymentStep(
  effect: Extract<TurnEffect, { type: 'request_charge' | 'settle_payment' }>,
  deps: EffectCallDeps,
  signal: AbortSignal,
): Promise<TurnEvent | undefined> {
  const toolCallId = effect.call.toolCallId;
  const payments = deps.payments;
  if (payments === undefined) {
    const refusal = 'this harness has no way to the control plane to pay';
    return effect.type === 'request_charge'
      ? { type: 'charge_answered', toolCallId, answer: { refusal } }
      : { type: 'trusted_tool_answered', toolCallId, outcome: { content: refusal, isError: true } };
  }
  const timeoutMs = deps.toolTimeoutMs ?? DEFAULT_TOOL_TIMEOUT_MS;
  const callSignal = AbortSignal.any([signal, AbortSignal.timeout(timeoutMs)]);
  try {
    if (effect.type === 'request_charge') {
      const answer = await payments.charge(effect.call, effect.challenge, {
        signal: callSignal,
        timeoutMs,
      });
      return signal.aborted ? undefined : { type: 'charge_answered', toolCallId, answer };
    }
    const outcome = await payments.settle(effect.call, effect.approvalRequestId, {
      signal: callSignal,
      timeoutMs,
    });
    return signal.aborted ? undefined : { type: 'trusted_tool_answered', toolCallId, outcome };
  } catch (error) {
    if (signal.aborted) return undefined;
    const reason = isAppError(error) ? error.message : errorText(error);
    return { type: 'tool_outcome_unknown', toolCallId, reason };
  }
}

/** Resolves with the tool's outcome, or rejects on timeout or abort even if the tool ignores its signal. */
async function callWithTimeout(
  runner: ToolRunner,
  call: ToolCallRequest,
  turnSignal: AbortSignal,
  timeoutMs: number,
): Promise<ToolOutcome> {
  const callSignal = AbortSignal.any([turnSignal, AbortSignal.timeout(timeoutMs)]);
  let onAbort: (() => void) | undefined;
  const aborted = new Promise<never>((_, reject) => {
    onAbort = () =>
      reject(
        turnSignal.aborted
          ? new AppError('cancelled', `tool ${call.name} (${call.toolCallId}) was cancelled`)
          : new AppError(
              'deadline_exceeded',
              `tool ${call.name} (${call.toolCallId}) gave no answer within ${timeoutMs} ms`,
            ),
      );
    if (callSignal.aborted) onAbort();
    else callSignal.addEventListener('abort', onAbort, { once: true });
  });
  try {
    return await Promise.race([runner.call(call, { signal: callSignal, timeoutMs }), aborted]);
  } finally {
    if (onAbort !== undefined) callSignal.removeEventListener('abort', onAbort);
  }
}

function errorText(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
