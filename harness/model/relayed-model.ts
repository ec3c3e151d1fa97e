import { AppError } from '../../common/errors';
import { modelRequestToJson } from '../../common/model/model-json';
import {
  ModelApi,
  type ModelCallOptions,
  type ModelParameters,
  type ModelProvider,
  type ModelRequest,
  type ModelResponse,
} from '../../common/model/model-port';

/**
 * The model of an agent whose calls the control plane makes (docs/turns.md, "Who calls the
 * model"): each call goes up the turn's own RunTurn stream as a `model_request`, and its
 * `model_answer` comes back down, with `model_delta`s before it. The sandbox runs tools, so
 * it never holds the agent's key: the control plane reads it and calls the provider.
 */

/** How a relayed agent's calls are made (harness.v1 AgentSettings fields 4 to 6). */
export interface RelaySettings {
  /** The protocol the control plane speaks (the recorded ModelParameters.provider). */
  readonly provider: ModelApi;
  /** The most output tokens of each request. */
  readonly maxTokens: number;
}

/** What a turn's agent model settings say (TurnStart.agent, and later each agent's). */
export interface AgentModelSettings {
  /** The model name; empty lets the harness pick its configured default. */
  readonly model: string;
  /** Present: the control plane makes this agent's model calls. */
  readonly relay?: RelaySettings;
}

/** The most output tokens of a relayed request when the control plane sends 0 (the adapters' default). */
export const DEFAULT_RELAYED_MAX_TOKENS = 8192;

/** One relayed call as the stream carries it. */
export interface RelayedCall {
  readonly step: number;
  readonly agent: string;
  readonly requestJson: string;
  /** The delegation thread asking; '' for the turn's own agent. */
  readonly thread: string;
}

/** The stream side of relayed model calls (harness/server/turn-call.ts implements it). */
export interface ModelChannel {
  /**
   * Sends `call` as a `model_request` and resolves with the model's answer; `onDelta` gets
   * each `model_delta` of its step.
   *
   * @throws AppError the failure the control plane answered with; `cancelled` when
   *   `signal` aborts; `unavailable` (retryable) when the stream ends first.
   */
  ask(
    call: RelayedCall,
    options: { readonly signal: AbortSignal; readonly onDelta?: (text: string) => void },
  ): Promise<ModelResponse>;
}

/** A {@link ModelProvider} whose calls the control plane makes over the turn's stream. */
export class RelayedModelProvider implements ModelProvider {
  readonly parameters: ModelParameters;

  constructor(
    private readonly channel: ModelChannel,
    private readonly agent: string,
    model: string,
    relay: RelaySettings,
  ) {
    // Anthropic is the parameters' default: left out, as the Anthropic adapter leaves it,
    // so a relayed agent records the same configuration bytes as a direct one.
    this.parameters = {
      model,
      maxTokens: relay.maxTokens,
      ...(relay.provider === ModelApi.Anthropic ? {} : { provider: relay.provider }),
    };
  }

  /** For traces: the protocol spoken for this agent and its model. */
  get genAi(): { readonly provider: string; readonly model: string } {
    return {
      provider: this.parameters.provider ?? ModelApi.Anthropic,
      model: this.parameters.model,
    };
  }

  /**
   * @throws AppError `failed_precondition` when the call names no step (only a turn's calls
   *   are relayed), else as {@link ModelChannel.ask}.
   */
  complete(request: ModelRequest, options: ModelCallOptions): Promise<ModelResponse> {
    const step = options.step;
    if (step === undefined) {
      return Promise.reject(
        new AppError(
          'failed_precondition',
          `agent ${this.agent || '(unnamed)'}: a relayed model call needs the turn's step number`,
        ),
      );
    }
    return this.channel.ask(
      {
        step,
        agent: this.agent,
        requestJson: modelRequestToJson(request),
        thread: options.thread ?? '',
      },
      {
        signal: options.signal,
        ...(options.onTextDelta === undefined ? {} : { onDelta: options.onTextDelta }),
      },
    );
  }
}
