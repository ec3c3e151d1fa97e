import { ApiException, CoreV1Api, type KubeConfig, type V1Secret } from '@kubernetes/client-node';
import {
  createPrivateKey,
  createPublicKey,
  generateKeyPairSync,
  type KeyObject,
} from 'node:crypto';
import { existsSync } from 'node:fs';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { parse } from 'yaml';
import { HARNESS_TLS_SECRET } from './harness-pki';
import { repoRoot } from './paths';
import type { CertFiles } from './pki';

/**
 * What a harness pod needs on a development machine or in a test, shared by `make dev`
 * (hack/dev.ts) and the end-to-end test stack: the command that runs the harness from
 * source, the control plane's approval key pair, the Secrets the sandbox template reads (the
 * harness certificate is hack/lib/harness-pki.ts's), and that template's pod spec.
 */

/** The Secret config/sandbox's harness template reads its variables from. */
export const HARNESS_SECRET = 'polychrome-harness';

/**
 * The image pattern of the harness: config/sandbox names
 * `registry.invalid/polychrome/harness:<version>` (a kustomize `images:` entry sets the real
 * registry, docs/images.md), tests name `polychrome/harness:dev`.
 */
export const HARNESS_IMAGE_PATTERN = '*polychrome/harness:*';

/**
 * The argv that runs the harness from source, relative to the repository root (the local
 * node's working directory): what the harness image runs, without a build.
 */
export function harnessSourceCommand(node: string = process.execPath): string[] {
  return [node, '--import', 'tsx', 'harness/main.ts'];
}

/** The control plane's approval key: it signs approvals, harnesses verify with the public half. */
export interface ApprovalKey {
  /** ed25519 private key, PKCS#8 PEM (`POLYCHROME_APPROVAL_KEY_FILE`). */
  readonly privateKeyPath: string;
  /** The raw public key as 64 hex digits (`HARNESS_APPROVAL_PUBLIC_KEY`). */
  readonly publicKeyHex: string;
}

/** The raw ed25519 public key of a private or public key, as 64 hex digits. */
export function ed25519PublicKeyHex(key: KeyObject): string {
  const jwk = (key.type === 'private' ? createPublicKey(key) : key).export({ format: 'jwk' });
  if (jwk.crv !== 'Ed25519' || typeof jwk.x !== 'string') throw new Error('not an ed25519 key');
  return Buffer.from(jwk.x, 'base64url').toString('hex');
}

/**
 * Makes sure `path` holds an ed25519 private key (PKCS#8 PEM, mode 0600), creating one when
 * it is missing, and returns it with its public half.
 *
 * @throws Error when the file exists but is not an ed25519 private key.
 */
export async function ensureApprovalKey(path: string): Promise<ApprovalKey> {
  if (!existsSync(path)) {
    const { privateKey } = generateKeyPairSync('ed25519');
    await writeFile(path, privateKey.export({ format: 'pem', type: 'pkcs8' }), { mode: 0o600 });
  }
  let publicKeyHex: string;
  try {
    publicKeyHex = ed25519PublicKeyHex(createPrivateKey(await readFile(path)));
  } catch (err: unknown) {
    throw new Error(`${path} is not an ed25519 private key`, { cause: err });
  }
  return { privateKeyPath: path, publicKeyHex };
}

/**
 * The model settings the harness reads from the {@link HARNESS_SECRET} Secret
 * (config/sandbox/sandbox-template.yaml): Secret key → the harness's variable.
 */
export const HARNESS_MODEL_SECRET_KEYS = {
  'anthropic-api-key': 'ANTHROPIC_API_KEY',
  'anthropic-base-url': 'ANTHROPIC_BASE_URL',
  'openai-api-key': 'OPENAI_API_KEY',
  'openai-base-url': 'OPENAI_BASE_URL',
  'model-provider': 'HARNESS_MODEL_PROVIDER',
} as const;

/** The keys of the {@link HARNESS_SECRET} Secret. */
export interface HarnessSecretData {
  /** `approval-public-key`: {@link ApprovalKey.publicKeyHex}. */
  readonly approvalPublicKey: string;
  /** `anthropic-api-key`: Claude's key; without it the template's harness uses its script. */
  readonly anthropicApiKey?: string;
  /**
   * The other model settings, by Secret key ({@link HARNESS_MODEL_SECRET_KEYS}); a key
   * left out leaves the harness's variable unset.
   */
  readonly model?: Readonly<Record<string, string>>;
}

/**
 * The model settings of `env` (`make dev`'s environment) as Secret keys: each variable of
 * {@link HARNESS_MODEL_SECRET_KEYS} that is set and not empty.
 */
export function modelSecretData(env: NodeJS.ProcessEnv): Record<string, string> {
  const data: Record<string, string> = {};
  for (const [key, variable] of Object.entries(HARNESS_MODEL_SECRET_KEYS)) {
    const value = env[variable]?.trim();
    if (value !== undefined && value !== '') data[key] = value;
  }
  return data;
}

/** What `make dev` says the harness will talk to, from the same variables. */
export function devModelName(env: NodeJS.ProcessEnv): string {
  const set = (name: string): boolean => (env[name]?.trim() ?? '') !== '';
  if (set('HARNESS_MODEL_PROVIDER')) {
    return `the ${String(env.HARNESS_MODEL_PROVIDER).trim()} provider (HARNESS_MODEL_PROVIDER)`;
  }
  if (set('ANTHROPIC_API_KEY') && set('OPENAI_API_KEY')) {
    return 'nothing yet: ANTHROPIC_API_KEY and OPENAI_API_KEY are both set, so the harness will not start; set HARNESS_MODEL_PROVIDER to anthropic or openai';
  }
  if (set('ANTHROPIC_API_KEY')) return 'Claude (ANTHROPIC_API_KEY is set)';
  if (set('OPENAI_API_KEY')) {
    return `an OpenAI-compatible model at ${env.OPENAI_BASE_URL?.trim() || 'https://api.openai.com/v1'} (OPENAI_API_KEY is set)`;
  }
  return 'the scripted demo model (harness/model/demo-script.yaml; set ANTHROPIC_API_KEY for Claude, or OPENAI_API_KEY for an OpenAI-compatible model)';
}

/** Creates the {@link HARNESS_SECRET} Secret in `namespace`, or replaces the one there. */
export async function applyHarnessSecret(
  kc: KubeConfig,
  namespace: string,
  data: HarnessSecretData,
): Promise<void> {
  const core = kc.makeApiClient(CoreV1Api);
  const body = {
    metadata: { name: HARNESS_SECRET, namespace },
    stringData: {
      'approval-public-key': data.approvalPublicKey,
      ...data.model,
      ...(data.anthropicApiKey === undefined ? {} : { 'anthropic-api-key': data.anthropicApiKey }),
    },
  };
  await createOrReplaceSecret(core, namespace, HARNESS_SECRET, body);
}

/**
 * Creates the {@link HARNESS_TLS_SECRET} Secret of `namespace` (type kubernetes.io/tls, as a
 * cert-manager Certificate writes it) from the namespace's harness certificate, or replaces
 * the one there.
 */
export async function applyHarnessTlsSecret(
  kc: KubeConfig,
  namespace: string,
  files: CertFiles,
): Promise<void> {
  const body = {
    metadata: { name: HARNESS_TLS_SECRET, namespace },
    type: 'kubernetes.io/tls',
    stringData: {
      'tls.crt': await readFile(files.certPath, 'utf8'),
      'tls.key': await readFile(files.keyPath, 'utf8'),
    },
  };
  await createOrReplaceSecret(kc.makeApiClient(CoreV1Api), namespace, HARNESS_TLS_SECRET, body);
}

async function createOrReplaceSecret(
  core: CoreV1Api,
  namespace: string,
  name: string,
  body: V1Secret,
): Promise<void> {
  try {
    await core.createNamespacedSecret({ namespace, body });
  } catch (err: unknown) {
    if (!(err instanceof ApiException && err.code === 409)) throw err;
    await core.replaceNamespacedSecret({ namespace, name, body });
  }
}

/**
 * The harness pod spec of config/sandbox's SandboxTemplate (`spec.podTemplate.spec`), as
 * a fresh object the caller may change: the hardened spec a cluster runs, for the plain
 * pod backend's PodTemplate.
 *
 * @throws Error when the file does not hold a pod spec with a `harness` container.
 */
export async function sandboxHarnessPodSpec(): Promise<HarnessPodSpec> {
  const path = join(repoRoot, 'config', 'sandbox', 'sandbox-template.yaml');
  const doc: unknown = parse(await readFile(path, 'utf8'));
  const spec: unknown =
    isRecord(doc) && isRecord(doc.spec) && isRecord(doc.spec.podTemplate)
      ? doc.spec.podTemplate.spec
      : undefined;
  if (
    !isRecord(spec) ||
    !Array.isArray(spec.containers) ||
    !spec.containers.some((c) => isRecord(c) && c.name === 'harness')
  ) {
    throw new Error(`${path}: spec.podTemplate.spec has no harness container`);
  }
  return spec as HarnessPodSpec;
}

/** An env entry of a container (value or valueFrom, as the API takes it). */
export interface EnvEntry {
  name: string;
  value?: string;
  valueFrom?: Record<string, unknown>;
}

/** The parts of a harness pod spec callers change; the rest passes through. */
export interface HarnessPodSpec {
  containers: ({ name: string; env?: EnvEntry[] } & Record<string, unknown>)[];
  [field: string]: unknown;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
