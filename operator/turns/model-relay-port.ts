/**
 * The model relay port: how the turn runner makes the model calls of an agent whose key the
 * sandbox must never hold (docs/turns.md, "Who calls the model"). The harness asks with a
 * `model_request`; the runner picks the agent's {@link ModelRoute} from what the control
 * plane dispatched, never from the harness, and asks the relay. `operator/models/` implements
 * it over the provider adapters and the key Secret.
 */
import type { Conversation } from '../api/v1alpha1/conversation-types';
import type { ModelApi, ModelRequest, ModelResponse } from '../../common/model/model-port';
import type { TurnView } from './journal-view-types';

/** Where one agent's model calls go, as the control plane resolved it at dispatch. */
export interface ModelRoute {
  /** The protocol spoken (a ModelConfig's `provider`). */
  readonly provider: ModelApi;
  /** The model id sent to the provider. */
  readonly model: string;
  /** The endpoint; absent: the provider's own. */
  readonly baseUrl?: string;
  /** The most output tokens of each request; absent: the adapters' default (8192). */
  readonly maxTokens?: number;
  /** The key's Secret in `namespace` and the key in it; absent: no key is needed. */
  readonly secretKeyRef?: { readonly name: string; readonly key: string };
  /** The namespace of the ModelConfig (and of its Secret). */
  readonly namespace: string;
}

/** Options of one relayed call. */
export interface ModelRelayCallOptions {
  /** Aborting cancels the call; it then rejects with AppError `cancelled`. */
  readonly signal: AbortSignal;
  /** Each text fragment as it streams (not committed). Must not throw. */
  readonly onTextDelta?: (text: string) => void;
}

/** Makes model calls on the control plane. */
export interface ModelRelay {
  /**
   * One model call along `route`, with the adapter's retries.
   *
   * @throws AppError as a ModelProvider's `complete` (common/model/model-port.ts), and
   *   `permission_denied` / `failed_precondition` when the route's key cannot be read,
   *   with a message naming the Secret, the key and what to grant. Never holds the key.
   */
  complete(
    route: ModelRoute,
    request: ModelRequest,
    options: ModelRelayCallOptions,
  ): Promise<ModelResponse>;
}

/**
 * The routes of a dispatched turn's agents, by agent name ('' for an unnamed one): an agent
 * with a route has its model calls made by the control plane.
 */
export interface ModelRouteSource {
  routesFor(conversation: Conversation, turn: TurnView): ReadonlyMap<string, ModelRoute>;
}

/** No agent's calls are relayed. */
export const NO_MODEL_ROUTES: ReadonlyMap<string, ModelRoute> = new Map();
