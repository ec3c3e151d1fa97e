import { AppError, ErrorCode, isErrorCode } from '../../common/errors';
import { modelResponseFromJson } from '../../common/model/model-json';
import { ModelApi, type ModelResponse } from '../../common/model/model-port';
import type { AgentSettings, ModelAnswer } from '../../proto/gen/polychrome/harness/v1/harness';
import { invalidField } from '../turn/proto-fields';
import { DEFAULT_RELAYED_MAX_TOKENS, type RelaySettings } from '../model/relayed-model';

/**
 * The relayed model call's messages (harness.v1 `AgentSettings` fields 4 to 6,
 * `ModelAnswer`) to and from the harness's own types. A `fromProto` checks what proto3
 * cannot, because the message comes from another process.
 */

/** A model answer: the response, or the failure the model call rejects with. */
export type DecodedModelAnswer =
  | { readonly ok: true; readonly response: ModelResponse }
  | { readonly ok: false; readonly error: AppError };

/**
 * Proto `ModelAnswer` to the call's outcome. A failure keeps the control plane's code (an
 * unknown one reads `internal`) and message; a response that is not a ModelResponse, or
 * an answer with neither, fails the call `internal` saying so.
 */
export function modelAnswerFromProto(answer: ModelAnswer): DecodedModelAnswer {
  const value = answer.answer;
  if (value?.$case === 'failure') {
    const { code, message } = value.value;
    return {
      ok: false,
      error: new AppError(isErrorCode(code) ? code : ErrorCode.Internal, message, {
        details: { step: answer.step },
      }),
    };
  }
  if (value?.$case !== 'responseJson') {
    return {
      ok: false,
      error: new AppError('internal', `the model_answer of step ${answer.step} holds no answer`),
    };
  }
  try {
    return { ok: true, response: modelResponseFromJson(value.value, 'model_answer.response_json') };
  } catch (error) {
    return {
      ok: false,
      error: new AppError(
        'internal',
        `the control plane's model answer of step ${answer.step} is malformed`,
        { cause: error },
      ),
    };
  }
}

/**
 * The relay settings of `start.agent`: absent when `relay_model_calls` is not set; a
 * `max_tokens` of 0 is the adapters' default.
 *
 * @throws AppError `invalid_argument` when a relayed agent names no known provider.
 */
export function relaySettingsFromProto(
  agent: AgentSettings | undefined,
  field: string,
): RelaySettings | undefined {
  if (agent === undefined || !agent.relayModelCalls) return undefined;
  const provider = Object.values(ModelApi).find((api) => api === agent.provider);
  if (provider === undefined) {
    throw invalidField(
      `${field}.provider`,
      `is ${JSON.stringify(agent.provider)}; a relayed agent's provider is ${Object.values(ModelApi).join(' or ')}`,
    );
  }
  return {
    provider,
    maxTokens: agent.maxTokens === 0 ? DEFAULT_RELAYED_MAX_TOKENS : agent.maxTokens,
  };
}

/** Relay settings to the proto fields of `AgentSettings` (none: not relayed). */
export function relaySettingsToProto(
  relay: RelaySettings | undefined,
): Pick<AgentSettings, 'relayModelCalls' | 'provider' | 'maxTokens'> {
  return relay === undefined
    ? { relayModelCalls: false, provider: '', maxTokens: 0 }
    : { relayModelCalls: true, provider: relay.provider, maxTokens: relay.maxTokens };
}
