import type { PaymentPort } from './ports/payment-port';
import { startCall, type Clock, type TextDelta } from './effect-calls';
import { AppError } from '../../common/errors';
import type { ModelProvider } from '../../common/model/model-port';
import type { ToolRunner } from './ports/tool-port';
import type { ApprovalKeys, ApprovalUse, SignatureVerifier } from './approval-token';
import type { RequestHasher } from './agent-config';
import type { RequestIds } from '../../common/request-ids';
import {
  createTurnMachine,
  isTerminalEffect,
  type TurnEvent,
  type TurnInput,
  type TurnState,
} from './turn-machine';
import type { TurnStep } from './turn-records';
import { toOutcome, type TurnOutcome } from './turn-outcome';
import { ReservedTool } from './reserved-tools';

/**
 * The thin async shell around the turn machine: it runs effects against the injected
 * ports and feeds their results back as events. All decisions live in `turn-machine.ts`.
 */

/** Appends committed steps to the journal (through the state plane). */
export interface StepSink {
  /**
   * Resolves once the step is durable. The shell awaits it before the next effect, so a
   * side-effecting tool never runs before its `tool_call` is committed.
   *
   * @throws AppError when the append failed; the turn stops and the error propagates.
   */
  commit(step: TurnStep, options: { readonly signal: AbortSignal }): Promise<void>;
  /**
   * Hands over the step that ends the turn (the last `model_call` before `finish`)
   * without waiting for it to be durable: nothing runs after it, so it can be committed
   * with the turn's result in one write. Without it, such a step is committed like any
   * other.
   */
  carry?(step: TurnStep): void;
}

/** A delegate's thread started (its first model call) or closed (its result committed). */
export type ThreadChange =
  | {
      readonly kind: 'started';
      readonly thread: string;
      readonly agent: string;
      /** The thread of the agent that asked ('' for the turn's own). */
      readonly parentThread: string;
    }
  | { readonly kind: 'closed'; readonly thread: string };

/** What {@link runTurn} needs. */
export interface RunTurnDeps {
  /**
   * The model of each agent (the `call_model` effect's `agent`, '' for an unnamed one):
   * a harness gives every agent its own provider, or a relayed one whose calls the control
   * plane makes (docs/turns.md, "Who calls the model"). Must not throw.
   */
  modelFor(agent: string): ModelProvider;
  readonly tools: ToolRunner;
  /** Runs tools with `host: 'control_plane'`; without it such calls fail with an error result. */
  readonly trustedTools?: ToolRunner;
  /** The control plane's side of a 402 (docs/payments.md); without it a 402 is not paid. */
  readonly payments?: PaymentPort;
  readonly steps: StepSink;
  readonly clock: Clock;
  readonly ids: RequestIds;
  readonly approvalVerifier: SignatureVerifier;
  /** The control plane's approval public key (raw 32 bytes), or current and next. */
  readonly approvalPublicKey: ApprovalKeys;
  /** A live harness's use rules for answers (approval-token.ts); absent in forensics. */
  readonly approvalUse?: ApprovalUse;
  /** @default 60000 */
  readonly toolTimeoutMs?: number;
  /** How long one journal append may take. @default 30000 */
  readonly commitTimeoutMs?: number;
  readonly onTextDelta?: (delta: TextDelta) => void;
  /**
   * Told the agent of each model call before it starts, when it differs from the last
   * one (a handoff moved the turn): traces open that agent's span. Must not throw.
   */
  readonly onAgent?: (agent: string) => void;
  /**
   * Told when a delegate's thread asks its model for the first time (its agent runs on it),
   * and when the result closing it is committed (docs/turns.md, "Delegation"): traces open
   * and end its span. Must not throw.
   */
  readonly onThread?: (change: ThreadChange) => void;
  /**
   * Computes each model request's digest; one that outlives the turn saves hashing the
   * history again (createHistoryRequestHasher). @default modelRequestSha256
   */
  readonly requestSha256?: RequestHasher;
}

const DEFAULT_COMMIT_TIMEOUT_MS = 30_000;

/**
 * Runs one turn to its end or its next pause.
 *
 * Model calls are not retried here: a provider adapter retries transient failures itself
 * and rejects only when it gives up, and the turn then fails (`retryable`, common/errors.ts
 * `isRetryable` of the failure, tells the control plane whether a later dispatch may
 * succeed). Aborting `signal` cancels the model stream and every tool call in flight; the
 * outcome is `cancelled`, or `ambiguous` when a side-effecting call was running. After a
 * cancel no new call starts, but commits still land: they record facts already known (a
 * result that arrived) or intent (a `tool_call`), and a `tool_call` whose call never
 * started is then reported ambiguous, exactly as the journal would show it to a later
 * resume.
 *
 * @throws AppError when a commit to the journal fails (whatever was in flight is aborted
 *   first), or `failed_precondition` on a machine/shell mismatch (a bug).
 */
export async function runTurn(
  input: TurnInput,
  deps: RunTurnDeps,
  signal: AbortSignal = new AbortController().signal,
): Promise<TurnOutcome> {
  const machine = createTurnMachine({
    ids: deps.ids,
    verifier: deps.approvalVerifier,
    approvalPublicKey: deps.approvalPublicKey,
    ...(deps.approvalUse === undefined ? {} : { approvalUse: deps.approvalUse }),
    ...(deps.requestSha256 === undefined ? {} : { requestSha256: deps.requestSha256 }),
  });
  const turnAbort = new AbortController();
  const events = new EventQueue();
  const inFlight = new Set<Promise<void>>();
  const onAbort = (): void => {
    turnAbort.abort(signal.reason);
    events.push({ type: 'cancelled', reason: abortReason(signal) });
  };
  if (signal.aborted) onAbort();
  else signal.addEventListener('abort', onAbort, { once: true });

  let fatal: { error: unknown } | undefined;
  const launch = (work: () => Promise<TurnEvent | undefined>): void => {
    const task = work().then(
      (event) => {
        if (event !== undefined) events.push(event);
      },
      (error: unknown) => {
        // A port broke its contract (threw outside the call): stop the turn rather than hang.
        fatal = { error };
        turnAbort.abort(error);
        events.push({ type: 'cancelled', reason: 'internal error' });
      },
    );
    inFlight.add(task);
    void task.finally(() => inFlight.delete(task));
  };

  const stop = async (): Promise<void> => {
    signal.removeEventListener('abort', onAbort);
    turnAbort.abort(new AppError('cancelled', 'turn ended'));
    // Wait so no tool or stream outlives runTurn; each task swallows its own error.
    await Promise.allSettled([...inFlight]);
  };

  let state: TurnState = machine.initialState;
  let event: TurnEvent = { type: 'turn_started', input };
  /** The agent of the last model call started: the turn starts with its own. */
  let agent = input.agentName ?? '';
  /** The delegation threads whose agent has started, not yet closed. */
  const threads = new Set<string>();
  /** The thread each delegation was asked on, by its `__delegate_to` call id. */
  const askedOn = new Map<string, string>();
  try {
    for (;;) {
      const result = machine.step(state, event);
      state = result.state;
      for (const [index, effect] of result.effects.entries()) {
        if (isTerminalEffect(effect)) {
          await stop();
          return toOutcome(effect, deps.clock);
        }
        if (
          effect.type === 'commit_step' &&
          result.effects[index + 1]?.type === 'finish' &&
          deps.steps.carry !== undefined
        ) {
          // The turn ends right after this step: it goes with the result.
          deps.steps.carry(effect.step);
        } else if (effect.type === 'commit_step') {
          // Not the turn's signal: a cancel must not tear a record of what already happened.
          const commitSignal = AbortSignal.timeout(
            deps.commitTimeoutMs ?? DEFAULT_COMMIT_TIMEOUT_MS,
          );
          await deps.steps.commit(effect.step, { signal: commitSignal });
          const intent = effect.step.kind === 'tool_call' ? effect.step.record : undefined;
          if (intent?.toolName === ReservedTool.DelegateTo) {
            askedOn.set(intent.toolCallId, intent.thread ?? '');
          }
          const closed = effect.step.kind === 'tool_result' ? effect.step.record : undefined;
          if (closed?.delegate !== undefined && threads.delete(closed.toolCallId)) {
            deps.onThread?.({ kind: 'closed', thread: closed.toolCallId });
          }
        } else if (!turnAbort.signal.aborted) {
          if (effect.type === 'call_model' && effect.thread !== undefined) {
            if (!threads.has(effect.thread)) {
              threads.add(effect.thread);
              deps.onThread?.({
                kind: 'started',
                thread: effect.thread,
                agent: effect.agent,
                parentThread: askedOn.get(effect.thread) ?? '',
              });
            }
          }
          // A delegate's thread (effect.thread) runs inside its caller's span.
          if (
            effect.type === 'call_model' &&
            effect.thread === undefined &&
            effect.agent !== agent
          ) {
            agent = effect.agent;
            deps.onAgent?.(agent);
          }
          startCall(effect, deps, turnAbort.signal, launch);
        }
      }
      event = await events.next();
      if (fatal !== undefined) throw fatal.error;
    }
  } catch (error) {
    await stop();
    throw error;
  }
}

/** Events in arrival order; `next` waits for one. Bounded by the calls in flight. */
class EventQueue {
  private readonly items: TurnEvent[] = [];
  private waiter: ((event: TurnEvent) => void) | undefined;

  push(event: TurnEvent): void {
    const waiter = this.waiter;
    if (waiter !== undefined) {
      this.waiter = undefined;
      waiter(event);
    } else {
      this.items.push(event);
    }
  }

  next(): Promise<TurnEvent> {
    const event = this.items.shift();
    if (event !== undefined) return Promise.resolve(event);
    return new Promise((resolve) => {
      this.waiter = resolve;
    });
  }
}

function abortReason(signal: AbortSignal): string {
  const reason: unknown = signal.reason;
  if (reason instanceof Error) return reason.message;
  if (typeof reason === 'string') return reason;
  return 'the turn was cancelled';
}
