/**
 * Relayed model calls in the harness call (docs/turns.md, "Who calls the model"): which
 * agents of a dispatched turn the control plane calls the model for, what it does with a
 * harness's `model_request`, and the `model_answer` it sends back. Pure.
 */
import { AppError, isAppError, isRetryable } from '../../common/errors';
import { modelRequestFromJson, modelResponseToJson } from '../../common/model/model-json';
import type { ModelRequest, ModelResponse } from '../../common/model/model-port';
import type {
  ModelAnswer,
  ModelRequest as ModelRequestMessage,
  TurnStart,
} from '../../proto/gen/polychrome/harness/v1/harness';
import type { ModelRoute } from './model-relay-port';
import type { RelayedRequest } from './harness-call';

/** What the runner does with one `model_request`. */
export type ModelRequestPlan =
  /** The agent has a route: make the call, answer with its outcome. */
  | { readonly kind: 'call'; readonly route: ModelRoute; readonly request: ModelRequest }
  /** The request is malformed: answer with this failure, call nothing. */
  | { readonly kind: 'refused'; readonly answer: ModelAnswer }
  /** No route was dispatched for the agent: the harness asks for what it was not given. */
  | { readonly kind: 'forged'; readonly reason: string };

/**
 * The plan for `message`, given the routes the turn was dispatched with. The route is
 * looked up by the agent the request names and nothing else of the request steers it: the
 * provider, endpoint and key are the control plane's.
 */
export function planModelRequest(
  routes: ReadonlyMap<string, ModelRoute>,
  message: ModelRequestMessage,
): ModelRequestPlan {
  const route = routes.get(message.agent);
  if (route === undefined) {
    return {
      kind: 'forged',
      reason: `model_request of step ${message.step} names agent ${JSON.stringify(message.agent)}, whose model calls the control plane was not dispatched to make`,
    };
  }
  try {
    const request = modelRequestFromJson(message.requestJson, 'model_request.request_json');
    return { kind: 'call', route, request };
  } catch (error) {
    if (!isAppError(error)) throw error;
    return { kind: 'refused', answer: modelFailure(message, error) };
  }
}

/** The answer carrying the model's response. */
export function modelResponseAnswer(
  { step, thread }: RelayedRequest,
  response: ModelResponse,
): ModelAnswer {
  return {
    step,
    thread,
    answer: { $case: 'responseJson', value: modelResponseToJson(response) },
  };
}

/**
 * The answer carrying a failed call: its code and message (the relay's messages never hold
 * a key), retryable by the code's rule (common/errors.ts). Anything but an AppError (the
 * adapters classify every failure, so a bug) is `internal` with no detail: its text could
 * hold anything, a key included.
 */
export function modelFailure({ step, thread }: RelayedRequest, error: unknown): ModelAnswer {
  const appError = isAppError(error)
    ? error
    : new AppError(
        'internal',
        `the relayed model call of step ${step} failed unexpectedly (a bug of the control plane's model relay)`,
      );
  return {
    step,
    thread,
    answer: {
      $case: 'failure',
      value: {
        code: appError.code,
        message: appError.message,
        retryable: isRetryable(appError),
      },
    },
  };
}

/**
 * `start` with its agent marked relayed when `routes` has it: the harness then sends that
 * agent's model calls up the stream, and records the route's model, provider and
 * `max_tokens` as its model parameters (docs/replay.md).
 */
export function relayedStart(start: TurnStart, routes: ReadonlyMap<string, ModelRoute>): TurnStart {
  const agent = start.agent;
  const route = routes.get(agent?.name ?? '');
  if (agent === undefined || route === undefined) return start;
  return {
    ...start,
    agent: {
      ...agent,
      model: route.model,
      relayModelCalls: true,
      provider: route.provider,
      maxTokens: route.maxTokens ?? 0,
    },
  };
}
