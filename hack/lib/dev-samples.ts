/**
 * `make dev SAMPLE=panel` and `make dev SAMPLE=triage`: one of config/samples' Agent samples
 * beside the dev Conversation hello, with the model the environment gives (hack/dev.ts).
 *
 * The samples' Agents name the ModelConfig `claude`, and the control plane makes their model
 * calls with that ModelConfig's endpoint and key (docs/turns.md, "Who calls the model"). So
 * `make dev` writes its own `claude` in place of the sample's: with ANTHROPIC_API_KEY or
 * OPENAI_API_KEY, that provider (its base URL and HARNESS_MODEL too), the key in a Secret
 * `make dev` owns and a Role that lets the control plane get that one Secret; without a key,
 * the scripted demo endpoint (hack/lib/demo-model.ts) on 127.0.0.1:{@link DEMO_MODEL_PORT}.
 */
import {
  ApiException,
  CoreV1Api,
  KubernetesObjectApi,
  PatchStrategy,
  type KubeConfig,
  type KubernetesObject,
} from '@kubernetes/client-node';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseAllDocuments } from 'yaml';
import type { ModelConfigSpec } from '../../operator/api/v1alpha1/model-config-resource';
import type { DemoAgent } from './demo-model';
import { repoRoot } from './paths';

/** A sample `make dev` can start. */
export interface DevSample {
  readonly name: string;
  /** The sample's file, under the repository root. */
  readonly file: string;
  /** The demo model's agent scripts, under the repository root. */
  readonly script: string;
  /** The Conversation the sample starts. */
  readonly conversation: string;
  /** A first message that shows what the sample does. */
  readonly question: string;
}

/** The samples, by the name `SAMPLE=` takes. */
export const DEV_SAMPLES: Readonly<Record<string, DevSample>> = {
  panel: {
    name: 'panel',
    file: 'config/samples/agent-panel.yaml',
    script: 'hack/dev/panel-script.yaml',
    conversation: 'panel',
    question: 'Should our team move to a four-day week?',
  },
  triage: {
    name: 'triage',
    file: 'config/samples/agent-triage.yaml',
    script: 'hack/dev/triage-script.yaml',
    conversation: 'support-chat',
    question: 'I was charged twice for my subscription.',
  },
};

/** The ModelConfig the samples' Agents name, which `make dev` writes. */
export const DEV_MODEL_CONFIG = 'claude';
/** The Secret `make dev` writes the model's key to (key `api-key`), and owns. */
export const DEV_MODEL_KEY_SECRET = 'polychrome-dev-model-key';
/** Where the scripted demo endpoint listens. */
export const DEMO_MODEL_PORT = 8090;

/**
 * The sample `SAMPLE=` names, `undefined` for none (`make dev` as before).
 *
 * @throws Error naming the samples there are.
 */
export function devSample(name: string | undefined): DevSample | undefined {
  if (name === undefined || name === '') return undefined;
  const sample = DEV_SAMPLES[name];
  if (sample === undefined) {
    throw new Error(
      `dev: no sample ${name}; SAMPLE takes ${Object.keys(DEV_SAMPLES).join(' or ')} (or leave it unset)`,
    );
  }
  return sample;
}

/** The sample's objects, without its ModelConfigs (`make dev` writes {@link DEV_MODEL_CONFIG}). */
export function sampleObjects(sample: DevSample): KubernetesObject[] {
  const text = readFileSync(join(repoRoot, sample.file), 'utf8');
  return parseAllDocuments(text)
    .map((doc) => doc.toJSON() as KubernetesObject)
    .filter((obj) => obj.kind !== 'ModelConfig');
}

/** The sample's Agents as the demo model tells them apart. */
export function demoAgents(objects: readonly KubernetesObject[]): DemoAgent[] {
  return objects.flatMap((obj) => {
    const spec: unknown = Reflect.get(obj, 'spec');
    const prompt: unknown =
      typeof spec === 'object' && spec !== null ? Reflect.get(spec, 'systemPrompt') : undefined;
    return obj.kind === 'Agent' && typeof prompt === 'string'
      ? [{ name: obj.metadata?.name ?? '', systemPrompt: prompt }]
      : [];
  });
}

/** The model the samples' Agents get, and what `make dev` says about it. */
export interface DevModel {
  readonly spec: ModelConfigSpec;
  /** The API key, for {@link DEV_MODEL_KEY_SECRET}; never printed. */
  readonly key?: string;
  /** Whether the scripted demo endpoint serves it. */
  readonly demo: boolean;
  /** What it is, for the printed summary. */
  readonly description: string;
}

/**
 * The samples' ModelConfig from `make dev`'s environment, as the harness picks its provider
 * (docs/operator.md, "The harness's model"): HARNESS_MODEL_PROVIDER, else the provider whose
 * key is set; the provider's base URL and HARNESS_MODEL when set. A provider named without a
 * key (a gateway that needs none) sends none.
 *
 * @throws Error when both keys are set and HARNESS_MODEL_PROVIDER does not choose, or it
 *   names neither provider.
 */
export function devModel(env: NodeJS.ProcessEnv): DevModel {
  const value = (name: string): string | undefined => {
    const v = env[name]?.trim();
    return v === undefined || v === '' ? undefined : v;
  };
  const anthropicKey = value('ANTHROPIC_API_KEY');
  const openaiKey = value('OPENAI_API_KEY');
  const chosen = value('HARNESS_MODEL_PROVIDER');
  if (chosen !== undefined && chosen !== 'anthropic' && chosen !== 'openai') {
    throw new Error(`dev: HARNESS_MODEL_PROVIDER is ${chosen}; set it to anthropic or openai`);
  }
  if (chosen === undefined && anthropicKey !== undefined && openaiKey !== undefined) {
    throw new Error(
      'dev: ANTHROPIC_API_KEY and OPENAI_API_KEY are both set; set HARNESS_MODEL_PROVIDER to anthropic or openai',
    );
  }
  const provider =
    chosen ?? (anthropicKey !== undefined ? 'anthropic' : openaiKey !== undefined ? 'openai' : '');
  if (provider === '') {
    return {
      spec: {
        provider: 'anthropic',
        model: 'scripted-demo',
        baseUrl: `http://127.0.0.1:${String(DEMO_MODEL_PORT)}`,
      },
      demo: true,
      description:
        'the scripted demo model (set ANTHROPIC_API_KEY or OPENAI_API_KEY for a real one)',
    };
  }
  const anthropic = provider === 'anthropic';
  const key = anthropic ? anthropicKey : openaiKey;
  const baseUrl = value(anthropic ? 'ANTHROPIC_BASE_URL' : 'OPENAI_BASE_URL');
  const spec: ModelConfigSpec = {
    provider,
    model: value('HARNESS_MODEL') ?? (anthropic ? 'claude-sonnet-5-5' : 'gpt-5'),
    ...(baseUrl === undefined ? {} : { baseUrl }),
    ...(key === undefined ? {} : { secretKeyRef: { name: DEV_MODEL_KEY_SECRET, key: 'api-key' } }),
  };
  const where = baseUrl === undefined ? '' : ` at ${baseUrl}`;
  return {
    spec,
    ...(key === undefined ? {} : { key }),
    demo: false,
    description: `${spec.model} (${provider}${where}${key === undefined ? ', no key' : ''})`,
  };
}

/** The control plane's ServiceAccount, which the key's Role is bound to. */
export interface ControlPlaneServiceAccount {
  readonly name: string;
  readonly namespace: string;
}

/**
 * Applies the sample in `namespace`: the key's Secret and the Role that lets `account` get
 * it (or, without a key, deletes a Secret an earlier run wrote), the ModelConfig, then the
 * sample's Agents and Conversation, server-side as `kubectl apply --server-side` does.
 */
export async function applySample(
  kc: KubeConfig,
  namespace: string,
  sample: DevSample,
  model: DevModel,
  account: ControlPlaneServiceAccount,
): Promise<void> {
  await applyKey(kc, namespace, model.key, account);
  const objects: KubernetesObject[] = [
    {
      apiVersion: 'polychrome.dev/v1alpha1',
      kind: 'ModelConfig',
      metadata: { name: DEV_MODEL_CONFIG },
      spec: model.spec,
    } as KubernetesObject,
    ...sampleObjects(sample),
  ];
  const api = KubernetesObjectApi.makeApiClient(kc);
  for (const obj of objects) {
    await api.patch(
      { ...obj, metadata: { ...obj.metadata, namespace } },
      undefined,
      undefined,
      'polychrome-dev',
      true,
      PatchStrategy.ServerSideApply,
    );
  }
}

async function applyKey(
  kc: KubeConfig,
  namespace: string,
  key: string | undefined,
  account: ControlPlaneServiceAccount,
): Promise<void> {
  const core = kc.makeApiClient(CoreV1Api);
  const name = DEV_MODEL_KEY_SECRET;
  if (key === undefined) {
    await core.deleteNamespacedSecret({ namespace, name }).catch((err: unknown) => {
      if (!(err instanceof ApiException && err.code === 404)) throw err;
    });
    return;
  }
  const api = KubernetesObjectApi.makeApiClient(kc);
  const role = `polychrome-read-${name}`;
  const objects: KubernetesObject[] = [
    {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name, namespace, labels: { 'app.kubernetes.io/managed-by': 'polychrome-dev' } },
      data: { 'api-key': Buffer.from(key).toString('base64') },
    } as KubernetesObject,
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'Role',
      metadata: { name: role, namespace },
      rules: [{ apiGroups: [''], resources: ['secrets'], resourceNames: [name], verbs: ['get'] }],
    } as KubernetesObject,
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'RoleBinding',
      metadata: { name: role, namespace },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: role },
      subjects: [{ kind: 'ServiceAccount', name: account.name, namespace: account.namespace }],
    } as KubernetesObject,
  ];
  for (const obj of objects) {
    await api.patch(
      obj,
      undefined,
      undefined,
      'polychrome-dev',
      true,
      PatchStrategy.ServerSideApply,
    );
  }
}
