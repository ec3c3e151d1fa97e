import { readFileSync } from 'node:fs';
import { z } from 'zod';
import {
  envBool,
  envEnum,
  envInt,
  envJson,
  envOptionalString,
  envPort,
  envString,
  parseConfig,
  type Env,
} from '../common/config';
import { DEFAULT_HEALTH_PORT } from '../common/health-server';
import { isAppError } from '../common/errors';
import { LogLevel } from '../common/log';
import type { ApprovalRules } from '../common/approval-rules';
import { parseApprovalRules } from './tools/approval-policy';

/**
 * The harness's configuration, from environment variables the operator sets on the
 * sandbox pod (secrets mounted as files where possible):
 *
 * | variable | meaning | default |
 * |---|---|---|
 * | `HARNESS_LISTEN_HOST` / `POD_IP` | gRPC and side-port address | `POD_IP`, else `0.0.0.0` |
 * | `HARNESS_PORT` | gRPC port | 7070 |
 * | `HARNESS_HEALTH_PORT` | `/healthz`, `/readyz`, `/metrics` | 9090 |
 * | `HARNESS_TLS_CERT_FILE`, `HARNESS_TLS_KEY_FILE` | the serving certificate of the pod's namespace (`polychrome-harness.<namespace>`, signed by the harness CA) and its key; read again while running. The listener is TLS only | required |
 * | `HARNESS_APPROVAL_PUBLIC_KEY` or `_FILE` | the control plane's ed25519 approval key, 64 hex digits; it also verifies each call's per-conversation credential | required, exactly one |
 * | `HARNESS_APPROVAL_NEXT_PUBLIC_KEY` | during a key rotation, the control plane's next public key, 64 hex digits: approvals and credentials signed by either key pass | unset |
 * | `HARNESS_NAMESPACE` | the pod's namespace (downward API): its certificate must name it, and credentials for conversations of another namespace are refused | required |
 * | `HARNESS_MODEL_PROVIDER` | `anthropic` or `openai` (any server speaking OpenAI's Chat Completions) | the provider whose key is set; required when both keys are |
 * | `ANTHROPIC_API_KEY`, `ANTHROPIC_BASE_URL` | the Anthropic provider's key and endpoint | unset; `https://api.anthropic.com` |
 * | `OPENAI_API_KEY`, `OPENAI_BASE_URL` | the OpenAI-compatible provider's key and endpoint (up to `/v1`) | unset; `https://api.openai.com/v1` |
 * | `HARNESS_MODEL` | the model when a turn names none | the provider's default |
 * | `HARNESS_MODEL_SCRIPT` | script file for the scripted provider | required without an API key |
 * | `HARNESS_MAX_STEPS` | the deployment's step budget | 8 |
 * | `HARNESS_MCP_SERVERS` | JSON array of MCP servers | `[]` |
 * | `HARNESS_REQUIRE_APPROVAL` | approval rules added to every turn's tools (`name`, `server/tool`, `server/*`; comma or space separated) | none |
 * | `HARNESS_LOG_LEVEL` | debug, info, warn, error, silent | info |
 * | `HARNESS_SHUTDOWN_GRACE_MS` | how long SIGTERM lets a running turn finish | 20000 |
 * | `HARNESS_ACK_TIMEOUT_MS`, `HARNESS_TOOL_TIMEOUT_MS` | waits for a journal ack, a tool | 30000, 60000 |
 * | `HARNESS_RECORD_AGENT_CONFIG` | record the agent configuration and each model request's digest for replay (docs/replay.md) | true; `false` is an opt-out for a rollout (docs/replay.md, "Rollout") |
 */

const mcpServerSchema = z.discriminatedUnion('transport', [
  z.strictObject({
    transport: z.literal('stdio'),
    name: z.string().min(1),
    command: z.string().min(1),
    args: z.array(z.string()).optional(),
    env: z.record(z.string(), z.string()).optional(),
    cwd: z.string().optional(),
    timeoutMs: z.number().int().positive().optional(),
  }),
  z.strictObject({
    transport: z.literal('http'),
    name: z.string().min(1),
    url: z.url(),
    headers: z.record(z.string(), z.string()).optional(),
    timeoutMs: z.number().int().positive().optional(),
  }),
]);

/** One MCP server the harness connects to. */
export type McpServerSetting = z.output<typeof mcpServerSchema>;

/** A file whose whole content (trimmed) is the value; unreadable is a field error. */
function envFile() {
  return envOptionalString().transform((path, ctx): string | undefined => {
    if (path === undefined) return undefined;
    try {
      const text = readFileSync(path, 'utf8').trim();
      if (text === '') ctx.addIssue({ code: 'custom', message: 'names an empty file' });
      return text;
    } catch {
      ctx.addIssue({ code: 'custom', message: 'names a file the harness cannot read' });
      return z.NEVER;
    }
  });
}

/** An optional http(s) URL: a model endpoint. */
function httpUrl(example: string) {
  return z
    .url({ protocol: /^https?$/u, error: `must be an http or https URL, e.g. ${example}` })
    .optional();
}

const HEX_KEY = /^[0-9a-fA-F]{64}$/u;
/** A Kubernetes namespace name (RFC 1123 label). */
const DNS_LABEL = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/u;

const schema = z
  .object({
    POD_IP: envOptionalString(),
    HARNESS_LISTEN_HOST: envOptionalString(),
    HARNESS_PORT: envPort(7070),
    HARNESS_HEALTH_PORT: envPort(DEFAULT_HEALTH_PORT),
    HARNESS_TLS_CERT_FILE: envString(),
    HARNESS_TLS_KEY_FILE: envString(),
    HARNESS_APPROVAL_PUBLIC_KEY: envOptionalString(),
    HARNESS_APPROVAL_PUBLIC_KEY_FILE: envFile(),
    HARNESS_NAMESPACE: envString().pipe(
      z
        .string()
        .regex(
          DNS_LABEL,
          'must be a namespace name (a DNS label); set it from the downward API, metadata.namespace',
        ),
    ),
    HARNESS_APPROVAL_NEXT_PUBLIC_KEY: envOptionalString().pipe(
      z
        .string()
        .regex(/^[0-9a-f]{64}$/u, 'must be 64 lowercase hex digits (a raw ed25519 public key)')
        .optional(),
    ),
    HARNESS_MODEL_PROVIDER: envOptionalString().transform(
      (raw, ctx): ModelProviderKind | undefined => {
        if (raw === undefined) return undefined;
        const found = MODEL_PROVIDERS.find((p) => p === raw);
        if (found === undefined) {
          ctx.addIssue({
            code: 'custom',
            message: `must be ${MODEL_PROVIDERS.join(' or ')}, got ${JSON.stringify(raw)}`,
          });
          return z.NEVER;
        }
        return found;
      },
    ),
    ANTHROPIC_API_KEY: envOptionalString(),
    ANTHROPIC_BASE_URL: envOptionalString().pipe(httpUrl('https://api.anthropic.com')),
    OPENAI_API_KEY: envOptionalString(),
    OPENAI_BASE_URL: envOptionalString().pipe(httpUrl('http://vllm.models.svc:8000/v1')),
    HARNESS_MODEL: envOptionalString(),
    HARNESS_MODEL_SCRIPT: envOptionalString(),
    HARNESS_MAX_STEPS: envInt({ default: 8, min: 1, max: 100 }),
    HARNESS_RECORD_AGENT_CONFIG: envBool(true),
    HARNESS_MCP_SERVERS: envJson(z.array(mcpServerSchema), []),
    HARNESS_REQUIRE_APPROVAL: envOptionalString().transform((text, ctx): ApprovalRules => {
      try {
        return parseApprovalRules(text ?? '', 'HARNESS_REQUIRE_APPROVAL');
      } catch (error) {
        if (!isAppError(error)) throw error;
        ctx.addIssue({ code: 'custom', message: error.message });
        return z.NEVER;
      }
    }),
    HARNESS_LOG_LEVEL: envEnum(
      [LogLevel.Debug, LogLevel.Info, LogLevel.Warn, LogLevel.Error, LogLevel.Silent],
      LogLevel.Info,
    ),
    HARNESS_SHUTDOWN_GRACE_MS: envInt({ default: 20_000, min: 0, max: 600_000 }),
    HARNESS_ACK_TIMEOUT_MS: envInt({ default: 30_000, min: 1, max: 600_000 }),
    HARNESS_TOOL_TIMEOUT_MS: envInt({ default: 60_000, min: 1, max: 3_600_000 }),
  })
  .superRefine((env, ctx) => {
    const exactlyOne = (a: keyof typeof env, b: keyof typeof env, what: string): void => {
      const count = (env[a] === undefined ? 0 : 1) + (env[b] === undefined ? 0 : 1);
      if (count !== 1) {
        ctx.addIssue({
          code: 'custom',
          path: [a],
          message: `${what}: set exactly one of ${a} and ${b} (${count === 0 ? 'neither is set' : 'both are set'})`,
        });
      }
    };
    exactlyOne(
      'HARNESS_APPROVAL_PUBLIC_KEY',
      'HARNESS_APPROVAL_PUBLIC_KEY_FILE',
      "the control plane's approval public key",
    );
    const key = env.HARNESS_APPROVAL_PUBLIC_KEY ?? env.HARNESS_APPROVAL_PUBLIC_KEY_FILE;
    if (key !== undefined && !HEX_KEY.test(key)) {
      ctx.addIssue({
        code: 'custom',
        path: [
          env.HARNESS_APPROVAL_PUBLIC_KEY === undefined
            ? 'HARNESS_APPROVAL_PUBLIC_KEY_FILE'
            : 'HARNESS_APPROVAL_PUBLIC_KEY',
        ],
        message: 'must be a raw ed25519 public key as 64 hex digits',
      });
    }
    const problem = modelSourceProblem(env);
    if (problem !== undefined) ctx.addIssue({ code: 'custom', ...problem });
  })
  .transform((env) => ({
    host: env.HARNESS_LISTEN_HOST ?? env.POD_IP ?? '0.0.0.0',
    port: env.HARNESS_PORT,
    healthPort: env.HARNESS_HEALTH_PORT,
    tls: { certPath: env.HARNESS_TLS_CERT_FILE, keyPath: env.HARNESS_TLS_KEY_FILE },
    namespace: env.HARNESS_NAMESPACE,
    approvalPublicKey: new Uint8Array(
      Buffer.from(
        env.HARNESS_APPROVAL_PUBLIC_KEY ?? env.HARNESS_APPROVAL_PUBLIC_KEY_FILE ?? '',
        'hex',
      ),
    ),
    model: modelSource(env),
    ...(env.HARNESS_APPROVAL_NEXT_PUBLIC_KEY === undefined
      ? {}
      : {
          approvalNextPublicKey: new Uint8Array(
            Buffer.from(env.HARNESS_APPROVAL_NEXT_PUBLIC_KEY, 'hex'),
          ),
        }),
    maxSteps: env.HARNESS_MAX_STEPS,
    mcpServers: env.HARNESS_MCP_SERVERS,
    requireApproval: env.HARNESS_REQUIRE_APPROVAL,
    logLevel: env.HARNESS_LOG_LEVEL,
    shutdownGraceMs: env.HARNESS_SHUTDOWN_GRACE_MS,
    ackTimeoutMs: env.HARNESS_ACK_TIMEOUT_MS,
    toolTimeoutMs: env.HARNESS_TOOL_TIMEOUT_MS,
    recordAgentConfig: env.HARNESS_RECORD_AGENT_CONFIG,
  }));

/** The model providers `HARNESS_MODEL_PROVIDER` names. */
const MODEL_PROVIDERS = ['anthropic', 'openai'] as const;
type ModelProviderKind = (typeof MODEL_PROVIDERS)[number];

/** The model variables, as the schema reads them. */
interface ModelEnv {
  readonly HARNESS_MODEL_PROVIDER: ModelProviderKind | undefined;
  readonly ANTHROPIC_API_KEY: string | undefined;
  readonly ANTHROPIC_BASE_URL?: string | undefined;
  readonly OPENAI_API_KEY: string | undefined;
  readonly OPENAI_BASE_URL?: string | undefined;
  readonly HARNESS_MODEL: string | undefined;
  readonly HARNESS_MODEL_SCRIPT: string | undefined;
}

/**
 * Which provider the variables choose: the one `HARNESS_MODEL_PROVIDER` names, else the
 * one whose key is set, else none (the scripted provider). Both keys without the choice
 * is refused by {@link modelSourceProblem}, never guessed.
 */
function chosenProvider(env: ModelEnv): ModelProviderKind | undefined {
  if (env.HARNESS_MODEL_PROVIDER !== undefined) return env.HARNESS_MODEL_PROVIDER;
  if (env.ANTHROPIC_API_KEY !== undefined) return 'anthropic';
  return env.OPENAI_API_KEY === undefined ? undefined : 'openai';
}

/** Why the model variables choose no usable model, if they do not. */
function modelSourceProblem(
  env: ModelEnv,
): { readonly path: string[]; readonly message: string } | undefined {
  const provider = env.HARNESS_MODEL_PROVIDER;
  if (provider === 'anthropic' && env.ANTHROPIC_API_KEY === undefined) {
    return {
      path: ['ANTHROPIC_API_KEY'],
      message: 'HARNESS_MODEL_PROVIDER is anthropic but ANTHROPIC_API_KEY is not set; set the key',
    };
  }
  if (provider === 'openai' && env.OPENAI_API_KEY === undefined) {
    return {
      path: ['OPENAI_API_KEY'],
      message: 'HARNESS_MODEL_PROVIDER is openai but OPENAI_API_KEY is not set; set the key',
    };
  }
  if (
    provider === undefined &&
    env.ANTHROPIC_API_KEY !== undefined &&
    env.OPENAI_API_KEY !== undefined
  ) {
    return {
      path: ['HARNESS_MODEL_PROVIDER'],
      message:
        'both ANTHROPIC_API_KEY and OPENAI_API_KEY are set; set HARNESS_MODEL_PROVIDER to anthropic or openai to say which one the harness uses',
    };
  }
  if (chosenProvider(env) === undefined && env.HARNESS_MODEL_SCRIPT === undefined) {
    return {
      path: ['HARNESS_MODEL_SCRIPT'],
      message:
        'no model: set ANTHROPIC_API_KEY for the Anthropic provider, OPENAI_API_KEY for an OpenAI-compatible one, or HARNESS_MODEL_SCRIPT to a script file for the scripted provider',
    };
  }
  return undefined;
}

/** The model source the (valid) variables choose. */
function modelSource(env: ModelEnv) {
  const defaultModel = env.HARNESS_MODEL === undefined ? {} : { defaultModel: env.HARNESS_MODEL };
  switch (chosenProvider(env)) {
    case 'anthropic':
      return {
        kind: 'anthropic' as const,
        apiKey: env.ANTHROPIC_API_KEY ?? '',
        ...(env.ANTHROPIC_BASE_URL === undefined ? {} : { baseUrl: env.ANTHROPIC_BASE_URL }),
        ...defaultModel,
      };
    case 'openai':
      return {
        kind: 'openai' as const,
        apiKey: env.OPENAI_API_KEY ?? '',
        ...(env.OPENAI_BASE_URL === undefined ? {} : { baseUrl: env.OPENAI_BASE_URL }),
        ...defaultModel,
      };
    case undefined:
      return { kind: 'scripted' as const, scriptPath: env.HARNESS_MODEL_SCRIPT ?? '' };
  }
}

/** The parsed, frozen harness configuration. */
export type HarnessConfig = z.output<typeof schema>;

/**
 * Reads the harness configuration (and the secret files it names).
 *
 * @param env @default process.env (through common/config.ts)
 * @throws ConfigError listing every bad variable; cross-field rules (exactly one of a
 *   value and its file, a model source) are checked once each variable is valid alone.
 */
export function loadHarnessConfig(env?: Env): Readonly<HarnessConfig> {
  return parseConfig('harness', schema, env);
}
