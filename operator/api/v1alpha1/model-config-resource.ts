/**
 * The ModelConfig API (polychrome.dev/v1alpha1): which provider and model an Agent uses,
 * where the provider's endpoint is and which Secret key holds its API key. The key is read
 * by the control plane only, and only once a namespace owner grants it `get` on that one
 * Secret (docs/operator.md, "Agents and ModelConfigs").
 */
import {
  DNS_SUBDOMAIN_PATTERN,
  HTTP_URL_RULE,
  MODEL_PATTERN,
  SECRET_KEY_PATTERN,
} from './field-patterns';
import type { ObjectMeta } from './conversation-types';
import type { ReadyStatus } from './ready-status';
import type { Infer } from './schema-builder';
import { enumOf, integer, object, required, string } from './schema-builder';

/** Names of the ModelConfig resource. */
export const ModelConfigResource = {
  group: 'polychrome.dev',
  version: 'v1alpha1',
  apiVersion: 'polychrome.dev/v1alpha1',
  kind: 'ModelConfig',
  listKind: 'ModelConfigList',
  plural: 'modelconfigs',
  singular: 'modelconfig',
  categories: ['polychrome'],
} as const;

/** `spec.provider`: the API the model is called through. */
export const ModelProvider = {
  /** The Anthropic Messages API. */
  Anthropic: 'anthropic',
  /** Any OpenAI-compatible Chat Completions endpoint: OpenAI, vLLM, Ollama, LiteLLM, Azure. */
  OpenAI: 'openai',
} as const;
export type ModelProvider = (typeof ModelProvider)[keyof typeof ModelProvider];

/** Bounds of `spec.maxTokens` (the harness takes any positive count; this caps typos). */
export const MAX_TOKENS_MIN = 1;
export const MAX_TOKENS_MAX = 1_048_576;

/** `spec.baseUrl`'s rule: an absolute http(s) URL with a host (CEL's URL library). */
export const BASE_URL_RULE = HTTP_URL_RULE;

/** `spec` of a ModelConfig. */
export const modelConfigSpecField = object(
  {
    provider: required(
      enumOf(ModelProvider, {
        description:
          'anthropic: the Anthropic Messages API. openai: any OpenAI-compatible Chat Completions endpoint (OpenAI, vLLM, Ollama, LiteLLM, Azure OpenAI); set baseUrl for anything but OpenAI itself.',
      }),
    ),
    model: required(
      string({
        description: 'Model id sent to the provider, e.g. claude-sonnet-5-5 or gpt-5.',
        minLength: 1,
        maxLength: 128,
        pattern: MODEL_PATTERN,
      }),
    ),
    baseUrl: string({
      description:
        "The provider endpoint's base URL; omitted: the provider's public endpoint. https, or http for an in-cluster gateway only (e.g. http://litellm.models.svc:4000/v1): the key travels in clear over http.",
      maxLength: 2048,
      rules: [
        {
          rule: BASE_URL_RULE,
          message: 'baseUrl must be an absolute URL with scheme https (or http) and a host',
        },
      ],
    }),
    secretKeyRef: object(
      {
        name: required(
          string({
            description: 'Secret name, in this namespace.',
            maxLength: 253,
            pattern: DNS_SUBDOMAIN_PATTERN,
          }),
        ),
        key: required(
          string({
            description: 'Key in the Secret whose value is the API key.',
            maxLength: 253,
            pattern: SECRET_KEY_PATTERN,
          }),
        ),
      },
      {
        description:
          'The Secret key that holds the API key; omitted: no key is sent (a gateway that needs none). The control plane reads it, never the sandbox, once the namespace grants it get on this one Secret (kubectl describe shows the commands when it may not).',
      },
    ),
    maxTokens: integer({
      description: `The most tokens one model response may have (${MAX_TOKENS_MIN}..${MAX_TOKENS_MAX}); omitted: the harness's default.`,
      format: 'int32',
      minimum: MAX_TOKENS_MIN,
      maximum: MAX_TOKENS_MAX,
    }),
  },
  { description: 'Which model an Agent calls, and how.' },
);

/** Desired state of a ModelConfig. */
export type ModelConfigSpec = Infer<typeof modelConfigSpecField>;
/** `spec.secretKeyRef`. */
export type SecretKeyRef = NonNullable<ModelConfigSpec['secretKeyRef']>;

/** A ModelConfig object. */
export interface ModelConfig {
  apiVersion: typeof ModelConfigResource.apiVersion;
  kind: typeof ModelConfigResource.kind;
  metadata: ObjectMeta;
  spec: ModelConfigSpec;
  status?: ReadyStatus;
}
