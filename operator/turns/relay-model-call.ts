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
import type { ModelRelay, ModelRoute } from './model-relay-port';
import { modelFailure, modelResponseAnswer, planModelRequest } from './plan-model-request';

/** What of the harness call the answer writes to. */
export interface ModelRequestCall {
  modelDelta(step: number, text: string): void;
  modelAnswer(answer: ModelAnswer): void;
}

/** What one relayed call needs besides the request. */
export interface RelayModelCallOptions {
  /** Absent: this control plane makes no model calls, and says so in the answer. */
  readonly relay: ModelRelay | undefined;
  readonly routes: ReadonlyMap<string, ModelRoute>;
  readonly signal: AbortSignal;
  /** Each fragment, for this replica's stream listeners. */
  readonly onTextDelta: (step: number, text: string) => void;
}

/**
 * Makes the call `message` asks for and answers it on `call`, or returns why the request is
 * forged (an agent the turn was not dispatched to relay): the caller then ends the call as
 * for a forged step. A failure of the model, or of reading its key, is the answer, not a
 * throw.
 */
export async function relayModelCall(
  call: ModelRequestCall,
  message: ModelRequestMessage,
  options: RelayModelCallOptions,
): Promise<string | undefined> {
  const plan = planModelRequest(options.routes, message);
  if (plan.kind === 'forged') return plan.reason;
  if (plan.kind === 'refused') {
    call.modelAnswer(plan.answer);
    return undefined;
  }
  const { step } = message;
  if (options.relay === undefined) {
    call.modelAnswer(modelFailure(step, noRelay(message.agent)));
    return undefined;
  }
  let answer: ModelAnswer;
  try {
    const response = await options.relay.complete(plan.route, plan.request, {
      signal: options.signal,
      onTextDelta: (text) => {
        call.modelDelta(step, text);
        // Only the turn's own agent streams to the user: a delegate answers its caller.
        if (message.thread === '') options.onTextDelta(step, text);
      },
    });
    answer = modelResponseAnswer(step, response);
  } catch (error) {
    answer = modelFailure(step, error);
  }
  call.modelAnswer(answer);
  return undefined;
}

function noRelay(agent: string): AppError {
  return new AppError(
    'failed_precondition',
    `agent ${agent || '(unnamed)'} has its model calls made by the control plane, and this control plane has no model relay`,
  );
}
