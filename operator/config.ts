import { hostname } from 'node:os';
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
import { DAY_MS, envDuration } from './env-duration';
import {
  DEFAULT_HISTORY_TOKENS,
  HISTORY_TOKENS_MAX,
  HISTORY_TOKENS_MIN,
} from './api/v1alpha1/conversation-values';
import { LogLevel } from '../common/log';
import { DEFAULT_MEMORY_BUDGET_BYTES } from '../common/memory';
import { DEFAULT_AUTH_FAILURE_CACHE_MS } from './public-api/auth-cache';
import { DEFAULT_LIMITS, type LimitSettings } from './public-api/caller-limits';
import { DEFAULT_PEER_PORT } from './public-api/peer-endpoints';
import { DEFAULT_KUBE_API_PORT } from './kube-api/kube-listener';
import { JournalRetention } from './api/v1alpha1/conversation-values';

/**
 * Where the public API creates conversations unless configured otherwise: a namespace of
 * their own (config/conversations), never `default`, so that no ordinary namespace role
 * (`edit` in `default`, say) reaches what members said (docs/api.md, "Where conversations
 * live").
 */
export const DEFAULT_CONVERSATION_NAMESPACE = 'polychrome-conversations';

/**
 * The control plane's configuration, from the environment its Deployment sets:
 *
 * | variable | meaning | default |
 * |---|---|---|
 * | `POLYCHROME_IDENTITY` / `POD_NAME` | this replica's name, written as lease holder; other replicas find its pod by it | `POD_NAME`, else the host name |
 * | `POLYCHROME_NAMESPACE` / `POD_NAMESPACE` | the control plane's own namespace (where it finds the other replicas' pods and keeps every conversation's Lease) | `POD_NAMESPACE`, else `polychrome-system` |
 * | `POLYCHROME_KUBECONFIG` | kubeconfig file (outside a cluster) | unset: in-cluster service account |
 * | `POLYCHROME_SERVICE_ACCOUNT` | the control plane's ServiceAccount, in its own namespace: named in the grant a ModelConfig's SecretForbidden condition asks for | `polychrome-control-plane` |
 * | `POLYCHROME_WATCH_NAMESPACE` | reconcile one namespace only | every namespace |
 * | `POLYCHROME_STATE_ADDRESS` | state plane `host:port` | required |
 * | `POLYCHROME_STATE_CA` / `_CERT` / `_KEY` | mTLS files for the state plane link, also the certificate replicas present to each other (server and client auth) | required |
 * | `POLYCHROME_STATE_SERVER_NAME` | name to check the state plane's certificate against | the address's host |
 * | `POLYCHROME_STATE_TLS_RELOAD_INTERVAL_MS` | how often those three files and the harness CA bundle are read again (they are also read shortly after their directory changes) | 60000 |
 * | `POLYCHROME_HEALTH_HOST` / `POLYCHROME_HEALTH_PORT` | `/healthz`, `/readyz`, `/metrics` | 0.0.0.0, 9090 |
 * | `POLYCHROME_LEASE_DURATION_MS` / `POLYCHROME_LEASE_RENEW_MS` | per-conversation lease timing | 15000 / 5000 |
 * | `POLYCHROME_LEASE_REQUEST_TIMEOUT_MS` | longest wait for the API server to answer one lease request (a renewal never waits past the lease's expiry); shorter than the duration | 0: a third of the duration, at most 5000 |
 * | `POLYCHROME_WORKERS` | concurrent reconcile passes | 2 |
 * | `POLYCHROME_AGENT_SANDBOX` | agent-sandbox is installed (watch claims and sandboxes) | true |
 * | `POLYCHROME_HARNESS_IMAGE` | image of the built-in harness pod spec | the controller's default |
 * | `POLYCHROME_LOG_LEVEL` | debug, info, warn, error, silent | info |
 * | `POLYCHROME_SHUTDOWN_GRACE_MS` | SIGTERM's budget: the turns in flight may finish within it, less a reserve for handing the rest over and releasing the Leases (docs/operator.md, "Shutdown") | 20000 |
 * | `POLYCHROME_API_HOST` / `POLYCHROME_API_PORT` | the public API (HTTP + SSE) | 0.0.0.0, 8080 |
 * | `POLYCHROME_PEER_HOST` / `POLYCHROME_PEER_PORT` | the peer listener (mutual TLS, forwarded requests from other replicas only) | 0.0.0.0, 8443 |
 * | `POLYCHROME_KUBE_API_CERT_FILE` / `POLYCHROME_KUBE_API_KEY_FILE` | serving certificate and key of the Kubernetes door (api.polychrome.dev, docs/kube-api.md); both or neither | unset: no Kubernetes door |
 * | `POLYCHROME_KUBE_API_HOST` / `POLYCHROME_KUBE_API_PORT` | the Kubernetes door's listener | 0.0.0.0, 8444 |
 * | `POLYCHROME_HARNESS_CA_FILE` | the harness CA bundle (PEM, every certificate a CA): each harness must present a certificate it signed for `polychrome-harness.<namespace>` (docs/operator.md, "The harness door"); read again while it runs | required |
 * | `POLYCHROME_APPROVAL_KEY_FILE` | ed25519 private key (PKCS#8 PEM) that signs approvals | required |
 * | `POLYCHROME_NEW_CONVERSATION_NAMESPACE` | where the API creates conversations (docs/api.md, "Where conversations live") | the watch namespace, else `polychrome-conversations` |
 * | `POLYCHROME_NEW_CONVERSATION_SPEC` | JSON spec of conversations the API creates (the default agent) | `{}` |
 * | `POLYCHROME_TURN_SANDBOX_WAIT_MS` | how long a turn waits for its harness (e.g. after a reopen) | 120000 |
 * | `POLYCHROME_TURN_MAX_ATTEMPTS` | dispatches of one turn before it settles with the fallback reply | 3 |
 * | `POLYCHROME_MAX_STEPS` | the deployment's step budget per turn (0: the harness's own) | 0 |
 * | `POLYCHROME_MEMORY_BUDGET_BYTES` | bytes of a conversation's memory a model request carries, the newest entries first (docs/turns.md, "Memory") | 8192 |
 * | `POLYCHROME_HISTORY_TOKENS` | how much history a turn is given, in estimated tokens, where `spec.agent.historyTokens` is unset (docs/turns.md, "The history window"), 256 to 1000000 | 50000 |
 * | `POLYCHROME_APPROVAL_TTL` | how long a pending approval waits before it expires and counts as denied: a whole number with a unit, `ms`, `s`, `m`, `h` or `d` (`90m`, `24h`), 1s to 30d | 24h |
 * | `POLYCHROME_ALLOW_SELF_APPROVAL` | let a person approve a call their own message started (single-person installs); each such answer records `self_approval` | false |
 * | `POLYCHROME_TURN_STATUS_INTERVAL_MS` | least time between two turn-status writes of one conversation (changes meanwhile are merged) | 1000 |
 * | `POLYCHROME_TURN_STATUS_DELAY_MS` | how long a turn's running mark waits on a Ready conversation, so a turn settled by then costs one status write | 250 |
 * | `POLYCHROME_LIMIT_CONVERSATIONS` | conversations one caller may own at once in the namespace the API creates them in (docs/api.md, "Limits per caller"); 0: no limit | 20 |
 * | `POLYCHROME_LIMIT_STREAMS` | streams one caller may hold open on one replica; 0: no limit | 10 |
 * | `POLYCHROME_LIMIT_REQUESTS_PER_SECOND` / `POLYCHROME_LIMIT_REQUEST_BURST` | requests a second one caller may send to one replica, and how many at once after a quiet time; 0 and 0: no limit | 20 / 60 |
 * | `POLYCHROME_LIMIT_EDGE_SCALE` | a caller with the `edge` role gets each limit above this many times | 50 |
 * | `POLYCHROME_AUTH_FAILURE_CACHE_MS` | how long a refused bearer token is refused again without asking the records or kube-apiserver; 0: never | 5000 |
 * | `POLYCHROME_JOURNAL_RETENTION` | what happens to a deleted Conversation's journal when its `spec.journalRetention` is omitted: `keep`, `checkpoint` or `delete` (docs/operator.md, "Journal retention") | keep |
 */
const schema = z
  .object({
    POLYCHROME_IDENTITY: envOptionalString(),
    POD_NAME: envOptionalString(),
    POLYCHROME_KUBECONFIG: envOptionalString(),
    POLYCHROME_WATCH_NAMESPACE: envOptionalString(),
    POLYCHROME_STATE_ADDRESS: envString(),
    POLYCHROME_STATE_CA: envString(),
    POLYCHROME_STATE_CERT: envString(),
    POLYCHROME_STATE_KEY: envString(),
    POLYCHROME_STATE_SERVER_NAME: envOptionalString(),
    POLYCHROME_STATE_TLS_RELOAD_INTERVAL_MS: envInt({ default: 60_000, min: 100, max: 3_600_000 }),
    POLYCHROME_HEALTH_HOST: envString({ default: '0.0.0.0' }),
    POLYCHROME_HEALTH_PORT: envPort(DEFAULT_HEALTH_PORT),
    POLYCHROME_LEASE_DURATION_MS: envInt({ default: 15_000, min: 1_000, max: 600_000 }),
    POLYCHROME_LEASE_RENEW_MS: envInt({ default: 5_000, min: 100, max: 300_000 }),
    // 0: the default, a third of the lease duration, at most 5 s.
    POLYCHROME_LEASE_REQUEST_TIMEOUT_MS: envInt({ default: 0, min: 0, max: 600_000 }),
    POLYCHROME_WORKERS: envInt({ default: 2, min: 1, max: 64 }),
    POLYCHROME_AGENT_SANDBOX: envBool(true),
    POLYCHROME_HARNESS_IMAGE: envOptionalString(),
    POLYCHROME_LOG_LEVEL: envEnum(
      [LogLevel.Debug, LogLevel.Info, LogLevel.Warn, LogLevel.Error, LogLevel.Silent],
      LogLevel.Info,
    ),
    POLYCHROME_SHUTDOWN_GRACE_MS: envInt({ default: 20_000, min: 0, max: 600_000 }),
    POLYCHROME_NAMESPACE: envOptionalString(),
    POD_NAMESPACE: envOptionalString(),
    POLYCHROME_SERVICE_ACCOUNT: envString({ default: 'polychrome-control-plane' }),
    POLYCHROME_API_HOST: envString({ default: '0.0.0.0' }),
    POLYCHROME_API_PORT: envPort(8080),
    POLYCHROME_PEER_HOST: envString({ default: '0.0.0.0' }),
    POLYCHROME_PEER_PORT: envPort(DEFAULT_PEER_PORT),
    POLYCHROME_KUBE_API_CERT_FILE: envOptionalString(),
    POLYCHROME_KUBE_API_KEY_FILE: envOptionalString(),
    POLYCHROME_KUBE_API_HOST: envString({ default: '0.0.0.0' }),
    POLYCHROME_KUBE_API_PORT: envPort(DEFAULT_KUBE_API_PORT),
    POLYCHROME_HARNESS_CA_FILE: envString(),
    POLYCHROME_APPROVAL_KEY_FILE: envString(),
    POLYCHROME_NEW_CONVERSATION_NAMESPACE: envOptionalString(),
    POLYCHROME_NEW_CONVERSATION_SPEC: envJson(z.record(z.string(), z.unknown()), {}),
    POLYCHROME_TURN_SANDBOX_WAIT_MS: envInt({ default: 120_000, min: 1_000, max: 3_600_000 }),
    POLYCHROME_TURN_MAX_ATTEMPTS: envInt({ default: 3, min: 1, max: 100 }),
    POLYCHROME_MAX_STEPS: envInt({ default: 0, min: 0, max: 64 }),
    POLYCHROME_MEMORY_BUDGET_BYTES: envInt({
      default: DEFAULT_MEMORY_BUDGET_BYTES,
      min: 1,
      max: 262_144,
    }),
    POLYCHROME_HISTORY_TOKENS: envInt({
      default: DEFAULT_HISTORY_TOKENS,
      min: HISTORY_TOKENS_MIN,
      max: HISTORY_TOKENS_MAX,
    }),
    POLYCHROME_TURN_STATUS_INTERVAL_MS: envInt({ default: 1_000, min: 0, max: 60_000 }),
    POLYCHROME_TURN_STATUS_DELAY_MS: envInt({ default: 250, min: 0, max: 60_000 }),
    POLYCHROME_APPROVAL_TTL: envDuration(DAY_MS, { min: 1_000, max: 30 * DAY_MS }),
    POLYCHROME_ALLOW_SELF_APPROVAL: envBool(false),
    POLYCHROME_LIMIT_CONVERSATIONS: envInt({
      default: DEFAULT_LIMITS.conversations,
      min: 0,
      max: 1_000_000,
    }),
    POLYCHROME_LIMIT_STREAMS: envInt({ default: DEFAULT_LIMITS.streams, min: 0, max: 1_000_000 }),
    POLYCHROME_LIMIT_REQUESTS_PER_SECOND: envInt({
      default: DEFAULT_LIMITS.requestsPerSecond,
      min: 0,
      max: 1_000_000,
    }),
    POLYCHROME_LIMIT_REQUEST_BURST: envInt({
      default: DEFAULT_LIMITS.burst,
      min: 0,
      max: 1_000_000,
    }),
    POLYCHROME_LIMIT_EDGE_SCALE: envInt({ default: DEFAULT_LIMITS.edgeScale, min: 1, max: 10_000 }),
    POLYCHROME_AUTH_FAILURE_CACHE_MS: envInt({
      default: DEFAULT_AUTH_FAILURE_CACHE_MS,
      min: 0,
      max: 600_000,
    }),
    POLYCHROME_JOURNAL_RETENTION: envEnum(
      [JournalRetention.Keep, JournalRetention.Checkpoint, JournalRetention.Delete],
      JournalRetention.Keep,
    ),
  })
  .superRefine((env, ctx) => {
    if (
      (env.POLYCHROME_KUBE_API_CERT_FILE === undefined) !==
      (env.POLYCHROME_KUBE_API_KEY_FILE === undefined)
    ) {
      ctx.addIssue({
        code: 'custom',
        path: [
          env.POLYCHROME_KUBE_API_CERT_FILE === undefined
            ? 'POLYCHROME_KUBE_API_CERT_FILE'
            : 'POLYCHROME_KUBE_API_KEY_FILE',
        ],
        message:
          'the Kubernetes door needs both its certificate and its key: set both, or neither to leave it out',
      });
    }
    if (
      (env.POLYCHROME_NEW_CONVERSATION_NAMESPACE ?? env.POLYCHROME_WATCH_NAMESPACE) === 'default'
    ) {
      ctx.addIssue({
        code: 'custom',
        path: ['POLYCHROME_NEW_CONVERSATION_NAMESPACE'],
        message: `conversations the API creates would land in "default", where every holder of edit or admin reads them through the Kubernetes door; name a namespace of their own (${DEFAULT_CONVERSATION_NAMESPACE}, config/conversations)`,
      });
    }
    if (env.POLYCHROME_LEASE_RENEW_MS >= env.POLYCHROME_LEASE_DURATION_MS) {
      ctx.addIssue({
        code: 'custom',
        path: ['POLYCHROME_LEASE_RENEW_MS'],
        message: `must be shorter than POLYCHROME_LEASE_DURATION_MS (${env.POLYCHROME_LEASE_DURATION_MS}), got ${env.POLYCHROME_LEASE_RENEW_MS}`,
      });
    }
    const timeout = env.POLYCHROME_LEASE_REQUEST_TIMEOUT_MS;
    if (timeout >= env.POLYCHROME_LEASE_DURATION_MS) {
      ctx.addIssue({
        code: 'custom',
        path: ['POLYCHROME_LEASE_REQUEST_TIMEOUT_MS'],
        message: `must be shorter than POLYCHROME_LEASE_DURATION_MS (${env.POLYCHROME_LEASE_DURATION_MS}), got ${timeout}`,
      });
    }
    if (
      (env.POLYCHROME_LIMIT_REQUESTS_PER_SECOND === 0) !==
      (env.POLYCHROME_LIMIT_REQUEST_BURST === 0)
    ) {
      ctx.addIssue({
        code: 'custom',
        path: [
          env.POLYCHROME_LIMIT_REQUEST_BURST === 0
            ? 'POLYCHROME_LIMIT_REQUEST_BURST'
            : 'POLYCHROME_LIMIT_REQUESTS_PER_SECOND',
        ],
        message:
          'the request rate limit needs both a rate and a burst of at least 1: set both, or both to 0 to turn it off',
      });
    }
    if (!/^[^:\s]+:\d{1,5}$/u.test(env.POLYCHROME_STATE_ADDRESS)) {
      ctx.addIssue({
        code: 'custom',
        path: ['POLYCHROME_STATE_ADDRESS'],
        message: `must be host:port, got ${JSON.stringify(env.POLYCHROME_STATE_ADDRESS)}`,
      });
    }
  });

/** The control plane's validated configuration. */
export interface ControlPlaneConfig {
  readonly identity: string;
  readonly kubeconfigPath: string | undefined;
  readonly watchNamespace: string | undefined;
  readonly state: {
    readonly address: string;
    readonly caPath: string;
    readonly certPath: string;
    readonly keyPath: string;
    readonly serverName: string | undefined;
    /**
     * How often the three files, and the harness CA bundle, are read again
     * (`POLYCHROME_STATE_TLS_RELOAD_INTERVAL_MS`).
     */
    readonly reloadIntervalMs: number;
  };
  readonly health: { readonly host: string; readonly port: number };
  readonly lease: {
    /** The control plane's own namespace, where every conversation's Lease is. */
    readonly namespace: string;
    readonly durationMs: number;
    readonly renewIntervalMs: number;
    /** Longest wait for one lease request (see ConversationLeasesOptions). */
    readonly requestTimeoutMs: number;
  };
  /**
   * The control plane's own ServiceAccount: the subject a namespace grants a ModelConfig's
   * key Secret to (docs/operator.md, "Agents and ModelConfigs").
   */
  readonly serviceAccount: { readonly name: string; readonly namespace: string };
  readonly workers: number;
  readonly agentSandbox: boolean;
  readonly harnessImage: string | undefined;
  readonly logLevel: LogLevel;
  readonly shutdownGraceMs: number;
  readonly api: {
    readonly host: string;
    readonly port: number;
  };
  /** Per-caller limits of both doors (docs/api.md, "Limits per caller"). */
  readonly limits: LimitSettings & {
    /** How long a refused bearer token is refused again without asking. */
    readonly authFailureCacheMs: number;
  };
  /** Forwarding between replicas (docs/api.md, "Between replicas"). */
  /** The Kubernetes door (docs/kube-api.md); undefined: left out. */
  readonly kubeApi:
    | {
        readonly host: string;
        readonly port: number;
        readonly certPath: string;
        readonly keyPath: string;
      }
    | undefined;
  readonly peer: {
    readonly host: string;
    readonly port: number;
    /** The control plane's own namespace, where the replicas' pods are. */
    readonly namespace: string;
  };
  readonly turns: {
    readonly harnessCaPath: string;
    readonly approvalKeyPath: string;
    readonly newConversationNamespace: string;
    readonly newConversationSpec: Readonly<Record<string, unknown>>;
    readonly sandboxWaitMs: number;
    readonly maxAttempts: number;
    readonly maxSteps: number;
    /** Bytes of memory a model request carries (docs/turns.md, "Memory"). */
    readonly memoryBudgetBytes: number;
    readonly historyTokens: number;
    readonly statusIntervalMs: number;
    readonly statusDelayMs: number;
    /** How long a pending approval waits before it expires (docs/turns.md, "Expiry"). */
    readonly approvalTtlMs: number;
    /**
     * Whether the person whose message started a turn may approve its calls (docs/approvals.md,
     * "Who may answer"). @default false
     */
    readonly allowSelfApproval: boolean;
  };
  /** A deleted Conversation's journal when its spec names no policy. @default keep */
  readonly journalRetention: JournalRetention;
}

/**
 * Reads the control plane's configuration.
 *
 * @param env @default process.env
 * @throws ConfigError listing every bad variable at once.
 */
export function loadControlPlaneConfig(env?: Env): ControlPlaneConfig {
  const c = parseConfig('control plane', schema, env);
  const ownNamespace = c.POLYCHROME_NAMESPACE ?? c.POD_NAMESPACE ?? 'polychrome-system';
  return Object.freeze({
    identity: c.POLYCHROME_IDENTITY ?? c.POD_NAME ?? hostname(),
    kubeconfigPath: c.POLYCHROME_KUBECONFIG,
    watchNamespace: c.POLYCHROME_WATCH_NAMESPACE,
    state: Object.freeze({
      address: c.POLYCHROME_STATE_ADDRESS,
      caPath: c.POLYCHROME_STATE_CA,
      certPath: c.POLYCHROME_STATE_CERT,
      keyPath: c.POLYCHROME_STATE_KEY,
      serverName: c.POLYCHROME_STATE_SERVER_NAME,
      reloadIntervalMs: c.POLYCHROME_STATE_TLS_RELOAD_INTERVAL_MS,
    }),
    health: Object.freeze({ host: c.POLYCHROME_HEALTH_HOST, port: c.POLYCHROME_HEALTH_PORT }),
    lease: Object.freeze({
      namespace: ownNamespace,
      durationMs: c.POLYCHROME_LEASE_DURATION_MS,
      renewIntervalMs: c.POLYCHROME_LEASE_RENEW_MS,
      requestTimeoutMs:
        c.POLYCHROME_LEASE_REQUEST_TIMEOUT_MS ||
        Math.min(5_000, Math.floor(c.POLYCHROME_LEASE_DURATION_MS / 3)),
    }),
    serviceAccount: Object.freeze({ name: c.POLYCHROME_SERVICE_ACCOUNT, namespace: ownNamespace }),
    workers: c.POLYCHROME_WORKERS,
    agentSandbox: c.POLYCHROME_AGENT_SANDBOX,
    harnessImage: c.POLYCHROME_HARNESS_IMAGE,
    logLevel: c.POLYCHROME_LOG_LEVEL,
    shutdownGraceMs: c.POLYCHROME_SHUTDOWN_GRACE_MS,
    api: Object.freeze({ host: c.POLYCHROME_API_HOST, port: c.POLYCHROME_API_PORT }),
    limits: Object.freeze({
      conversations: c.POLYCHROME_LIMIT_CONVERSATIONS,
      streams: c.POLYCHROME_LIMIT_STREAMS,
      requestsPerSecond: c.POLYCHROME_LIMIT_REQUESTS_PER_SECOND,
      burst: c.POLYCHROME_LIMIT_REQUEST_BURST,
      edgeScale: c.POLYCHROME_LIMIT_EDGE_SCALE,
      authFailureCacheMs: c.POLYCHROME_AUTH_FAILURE_CACHE_MS,
    }),
    kubeApi:
      c.POLYCHROME_KUBE_API_CERT_FILE === undefined || c.POLYCHROME_KUBE_API_KEY_FILE === undefined
        ? undefined
        : Object.freeze({
            host: c.POLYCHROME_KUBE_API_HOST,
            port: c.POLYCHROME_KUBE_API_PORT,
            certPath: c.POLYCHROME_KUBE_API_CERT_FILE,
            keyPath: c.POLYCHROME_KUBE_API_KEY_FILE,
          }),
    peer: Object.freeze({
      host: c.POLYCHROME_PEER_HOST,
      port: c.POLYCHROME_PEER_PORT,
      namespace: ownNamespace,
    }),
    turns: Object.freeze({
      harnessCaPath: c.POLYCHROME_HARNESS_CA_FILE,
      approvalKeyPath: c.POLYCHROME_APPROVAL_KEY_FILE,
      newConversationNamespace:
        c.POLYCHROME_NEW_CONVERSATION_NAMESPACE ??
        c.POLYCHROME_WATCH_NAMESPACE ??
        DEFAULT_CONVERSATION_NAMESPACE,
      newConversationSpec: c.POLYCHROME_NEW_CONVERSATION_SPEC,
      sandboxWaitMs: c.POLYCHROME_TURN_SANDBOX_WAIT_MS,
      maxAttempts: c.POLYCHROME_TURN_MAX_ATTEMPTS,
      maxSteps: c.POLYCHROME_MAX_STEPS,
      memoryBudgetBytes: c.POLYCHROME_MEMORY_BUDGET_BYTES,
      historyTokens: c.POLYCHROME_HISTORY_TOKENS,
      statusIntervalMs: c.POLYCHROME_TURN_STATUS_INTERVAL_MS,
      statusDelayMs: c.POLYCHROME_TURN_STATUS_DELAY_MS,
      approvalTtlMs: c.POLYCHROME_APPROVAL_TTL,
      allowSelfApproval: c.POLYCHROME_ALLOW_SELF_APPROVAL,
    }),
    journalRetention: c.POLYCHROME_JOURNAL_RETENTION,
  });
}
