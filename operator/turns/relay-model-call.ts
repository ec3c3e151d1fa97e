/**
 * The runner's answer to a harness's `model_request` (turn-runner.ts, `readHarness`): the
 * plan (plan-model-request.ts) picks the dispatched route, the relay makes the call, each
 * fragment goes to the harness and to this replica's listeners, and the outcome goes back
 * as the `model_answer`. A model call has no side effect, so nothing is committed: a call
 * cut in the middle fails the attempt, and the retry asks the model again.
 */
import { AppError } from '../../common/errors';
import type {
  ModelAnswer,
  ModelRequest as ModelRequestMessage,
} from '../../proto/gen/polychrome/harness/v1/harness';
import type { RelayedRequest } from './harness-call';
import type { ModelRelay, ModelRoute } from './model-relay-port';
import { modelFailure, modelResponseAnswer, planModelRequest } from './plan-model-request';

/** What of the harness call the answer writes to. */
export interface ModelRequestCall {
  modelDelta(request: RelayedRequest, text: string): void;
  modelAnswer(answer: ModelAnswer): void;
}

/** What one relayed call needs besides the request. */
export interface RelayModelCallOptions {
  /** Absent: this control plane makes no model calls, and says so in the answer. */
  readonly relay: ModelRelay | undefined;
  readonly routes: ReadonlyMap<string, ModelRoute>;
  readonly signal: AbortSignal;
  /** Each fragment of the turn's own agent, for this replica's stream listeners. */
  readonly onTextDelta: (step: number, text: string) => void;
}

/**
 * The relayed model calls of one harness call, running while the call is read on: a
 * panel's threads ask side by side.
 */
export class RelayedModelCalls {
  private readonly running = new Set<Promise<void>>();

  /**
   * Starts the call `message` asks for, answered on `call` once the model has answered, or
   * returns why the request is forged (an agent the turn was not dispatched to relay): the
   * caller then ends the call as for a forged step.
   */
  start(
    call: ModelRequestCall & { cancel(reason: unknown): void },
    message: ModelRequestMessage,
    options: RelayModelCallOptions,
  ): string | undefined {
    const started = startModelCall(call, message, options);
    if ('forged' in started) return started.forged;
    // A relay that breaks the call's protocol (a bug) ends the call.
    const done = started.done.catch((error: unknown) => call.cancel(error));
    this.running.add(done);
    void done.finally(() => this.running.delete(done));
    return undefined;
  }

  /** Settles once every call started has (they stop when their call is over). */
  async settled(): Promise<void> {
    await Promise.allSettled([...this.running]);
  }
}

/**
 * Starts the call `message` asks for, to be answered on `call` when the model has answered,
 * or returns why the request is forged. `done` settles once it is answered. A failure of
 * the model, or of reading its key, is the answer, not a rejection.
 */
export function startModelCall(
  call: ModelRequestCall,
  message: ModelRequestMessage,
  options: RelayModelCallOptions,
): { readonly forged: string } | { readonly done: Promise<void> } {
  const plan = planModelRequest(options.routes, message);
  if (plan.kind === 'forged') return { forged: plan.reason };
  if (plan.kind === 'refused') {
    call.modelAnswer(plan.answer);
    return { done: Promise.resolve() };
  }
  if (options.relay === undefined) {
    call.modelAnswer(modelFailure(message, noRelay(message.agent)));
    return { done: Promise.resolve() };
  }
  return { done: relay(call, message, plan, options.relay, options) };
}

async function relay(
  call: ModelRequestCall,
  message: ModelRequestMessage,
  plan: Extract<ReturnType<typeof planModelRequest>, { kind: 'call' }>,
  relay: ModelRelay,
  options: RelayModelCallOptions,
): Promise<void> {
  let answer: ModelAnswer;
  try {
    const response = await relay.complete(plan.route, plan.request, {
      signal: options.signal,
      onTextDelta: (text) => {
        call.modelDelta(message, text);
        // Only the turn's own agent streams to the user: a delegate answers its caller.
        if (message.thread === '') options.onTextDelta(message.step, text);
      },
    });
    answer = modelResponseAnswer(message, response);
  } catch (error) {
    answer = modelFailure(message, error);
  }
  // Once the call is over (a forged step or the harness's end came first) nothing is sent.
  call.modelAnswer(answer);
}

function noRelay(agent: string): AppError {
  return new AppError(
    'failed_precondition',
    `agent ${agent || '(unnamed)'} has its model calls made by the control plane, and this control plane has no model relay`,
  );
}
