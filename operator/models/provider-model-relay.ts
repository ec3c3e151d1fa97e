/**
 * The control plane's {@link ModelRelay} (docs/turns.md, "Who calls the model"): for each
 * relayed call it reads the route's key from its Secret as the control plane, and calls the
 * provider through the same adapters the harness uses (common/model). The sandbox never
 * holds the key.
 *
 * The Secret is read on every call (one GET), so a rotated key takes effect on the next
 * call; an adapter is kept per route and Secret `resourceVersion`, so calls along an
 * unchanged route reuse its client and connections, and a rotation builds a new one. The
 * key is never logged and never put in an error: a failure to read it names the Secret, the
 * key and what to grant.
 */
import { createHash } from 'node:crypto';
import { AppError } from '../../common/errors';
import { canonicalJson } from '../../common/canonical-json';
import { AnthropicProvider } from '../../common/model/anthropic-provider';
import { ModelApi, type ModelProvider } from '../../common/model/model-port';
import type { ModelRequest, ModelResponse } from '../../common/model/model-port';
import { OpenAiProvider } from '../../common/model/openai-provider';
import type { ProviderOptions } from '../../common/model/provider-options';
import type { ControlPlaneAccount } from '../controller/model-config-ready';
import { secretGrantCommands } from '../controller/model-config-ready';
import type { ModelRelay, ModelRelayCallOptions, ModelRoute } from '../turns/model-relay-port';
import type { SecretKeyReader } from './secret-key-reader';

/**
 * The key an adapter is given along a route without a `secretKeyRef` (the SDKs require
 * one): a gateway that needs no key ignores it.
 */
export const NO_KEY = 'no-key';

/** Adapter options every relayed call shares (retries, timeouts, the SDK's logger). */
export type RelayAdapterOptions = Omit<
  ProviderOptions,
  'apiKey' | 'baseUrl' | 'model' | 'maxTokens'
>;

/** Options of {@link ProviderModelRelay}. */
export interface ProviderModelRelayOptions {
  readonly secrets: SecretKeyReader;
  /** The control plane's ServiceAccount, named in what to grant. */
  readonly account: ControlPlaneAccount;
  readonly adapter?: RelayAdapterOptions;
  /** Adapters kept at most (least recently used go first). @default 256 */
  readonly maxAdapters?: number;
}

/** Makes relayed model calls with the provider adapters and keys read from Secrets. */
export class ProviderModelRelay implements ModelRelay {
  /** By route; each holds the `resourceVersion` of the Secret its key came from. */
  private readonly adapters = new Map<string, { version: string; provider: ModelProvider }>();

  constructor(private readonly options: ProviderModelRelayOptions) {}

  /**
   * @throws AppError `permission_denied` when the control plane may not read the Secret,
   *   `failed_precondition` when it or the key is missing, `unavailable` when the API
   *   server did not answer; else as the adapter's `complete`.
   */
  async complete(
    route: ModelRoute,
    request: ModelRequest,
    options: ModelRelayCallOptions,
  ): Promise<ModelResponse> {
    const { key, version } = await this.keyOf(route);
    const provider = this.adapterFor(route, key, version);
    return provider.complete(request, {
      signal: options.signal,
      ...(options.onTextDelta === undefined ? {} : { onTextDelta: options.onTextDelta }),
    });
  }

  private async keyOf(route: ModelRoute): Promise<{ key: string; version: string }> {
    const ref = route.secretKeyRef;
    if (ref === undefined) return { key: NO_KEY, version: '' };
    const { namespace } = route;
    const read = await this.options.secrets.read({ namespace, ...ref });
    const secret = `Secret ${namespace}/${ref.name}`;
    switch (read.kind) {
      case 'found':
        return { key: read.value, version: read.resourceVersion };
      case 'forbidden': {
        const { account } = this.options;
        return Promise.reject(
          new AppError(
            'permission_denied',
            `the control plane (ServiceAccount ${account.namespace}/${account.name}) may not get ${secret}, which holds the API key (key ${ref.key}) of model ${route.model}; a namespace admin grants it that one Secret with: ${secretGrantCommands(namespace, ref.name, account)}`,
            { details: { secret: `${namespace}/${ref.name}`, key: ref.key } },
          ),
        );
      }
      case 'not_found':
        return Promise.reject(
          new AppError(
            'failed_precondition',
            `${secret} does not exist: create it with the API key of model ${route.model} under key ${ref.key}, or fix the ModelConfig's spec.secretKeyRef`,
            { details: { secret: `${namespace}/${ref.name}`, key: ref.key } },
          ),
        );
      case 'key_missing':
        return Promise.reject(
          new AppError(
            'failed_precondition',
            `${secret} has no key ${ref.key}, or it is empty: put the API key of model ${route.model} there, or fix the ModelConfig's spec.secretKeyRef.key`,
            { details: { secret: `${namespace}/${ref.name}`, key: ref.key } },
          ),
        );
    }
  }

  /** The adapter of `route` built with the key of Secret version `version`. */
  private adapterFor(route: ModelRoute, key: string, version: string): ModelProvider {
    const id = routeId(route);
    const kept = this.adapters.get(id);
    this.adapters.delete(id);
    if (kept !== undefined && kept.version === version) {
      this.adapters.set(id, kept); // most recently used last
      return kept.provider;
    }
    const options: ProviderOptions = {
      ...this.options.adapter,
      apiKey: key,
      model: route.model,
      ...(route.baseUrl === undefined ? {} : { baseUrl: route.baseUrl }),
      ...(route.maxTokens === undefined ? {} : { maxTokens: route.maxTokens }),
    };
    const provider =
      route.provider === ModelApi.OpenAi
        ? new OpenAiProvider(options)
        : new AnthropicProvider(options);
    this.adapters.set(id, { version, provider });
    const oldest = this.adapters.keys().next().value;
    if (this.adapters.size > (this.options.maxAdapters ?? 256) && oldest !== undefined) {
      this.adapters.delete(oldest);
    }
    return provider;
  }
}

/** A route's identity (everything that shapes its adapter but the key). */
function routeId(route: ModelRoute): string {
  return createHash('sha256').update(canonicalJson(route)).digest('hex');
}
