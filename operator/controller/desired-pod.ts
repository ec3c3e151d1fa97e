/**
 * The harness pod a Conversation wants (backend pod), built from the namespace's
 * PodTemplate or from the built-in spec below. Pure: hashing is computation, not I/O; the
 * hash lands in an annotation so the reconciler can tell a stale pod from a current one
 * without diffing fields the API server defaulted.
 */
import { createHash } from 'node:crypto';
import type { Conversation } from '../api/v1alpha1/conversation-types';
import type { McpServerSpec, ToolsSpec } from '../api/v1alpha1/conversation-spec';
import { DEFAULT_TEMPLATE } from '../api/v1alpha1/conversation-values';
import { canonicalJson } from '../../common/canonical-json';
import { DEFAULT_HEALTH_PORT } from '../../common/health-server';
import type { OwnerReference } from './child-meta';
import {
  HARNESS_PORT,
  POD_SPEC_HASH_ANNOTATION,
  childLabels,
  conversationOwnerReference,
} from './child-meta';

/** Harness image of the built-in pod spec when the deployment does not name one. */
export const DEFAULT_HARNESS_IMAGE = 'polychrome/harness:dev';

/** Name of the harness container; `spec.sandbox.resources` applies to it. */
export const HARNESS_CONTAINER = 'harness';

/** Resources of the built-in spec when `spec.sandbox.resources` is omitted. */
export const DEFAULT_HARNESS_RESOURCES = {
  requests: { cpu: '100m', memory: '256Mi' },
  limits: { cpu: '1', memory: '1Gi', 'ephemeral-storage': '1Gi' },
} as const;

/** The harness variable listing its MCP servers (JSON; harness/config.ts). */
export const MCP_SERVERS_ENV = 'HARNESS_MCP_SERVERS';
/** The harness variable listing approval rules (space or comma separated). */
export const REQUIRE_APPROVAL_ENV = 'HARNESS_REQUIRE_APPROVAL';
/**
 * Where a template's `HARNESS_REQUIRE_APPROVAL` read through `valueFrom` moves, so the
 * merged value can reference it (`$(…)`, expanded by the kubelet).
 */
export const TEMPLATE_REQUIRE_APPROVAL_ENV = 'POLYCHROME_TEMPLATE_REQUIRE_APPROVAL';

/** An environment variable of a container; `valueFrom` passes through untouched. */
export interface EnvVarManifest {
  name: string;
  value?: string;
  valueFrom?: Record<string, unknown>;
}

/** `resources` of a container. */
export interface ResourcesManifest {
  requests?: Record<string, string>;
  limits?: Record<string, string>;
}

/** The container fields the builder reads or sets; other fields pass through untouched. */
export interface ContainerManifest {
  name: string;
  image?: string;
  ports?: { name?: string; containerPort: number; protocol?: string }[];
  resources?: ResourcesManifest;
  securityContext?: {
    allowPrivilegeEscalation?: boolean;
    readOnlyRootFilesystem?: boolean;
    runAsNonRoot?: boolean;
    capabilities?: { add?: string[]; drop?: string[] };
  };
  volumeMounts?: { name: string; mountPath: string; readOnly?: boolean }[];
  env?: EnvVarManifest[];
  envFrom?: Record<string, unknown>[];
}

/** The pod spec fields the builder reads or sets; other fields pass through untouched. */
export interface PodSpecManifest {
  containers: ContainerManifest[];
  runtimeClassName?: string;
  automountServiceAccountToken?: boolean;
  enableServiceLinks?: boolean;
  restartPolicy?: string;
  securityContext?: {
    runAsNonRoot?: boolean;
    runAsUser?: number;
    runAsGroup?: number;
    fsGroup?: number;
    seccompProfile?: { type: string; localhostProfile?: string };
  };
  volumes?: { name: string; emptyDir?: { medium?: string; sizeLimit?: string } }[];
}

/** A pod as sent to the API server. */
export interface PodManifest {
  apiVersion: 'v1';
  kind: 'Pod';
  metadata: {
    name: string;
    namespace: string;
    labels: Record<string, string>;
    annotations: Record<string, string>;
    ownerReferences: OwnerReference[];
  };
  spec: PodSpecManifest;
}

/** The PodTemplate a pod-backend Conversation uses: `spec.sandbox.template`, else the default. */
export function podTemplateNameOf(conversation: Conversation): string {
  return conversation.spec.sandbox?.template ?? DEFAULT_TEMPLATE;
}

/**
 * The built-in harness pod spec, used when the namespace has no PodTemplate of the default
 * name: gVisor, no service-account token, non-root, read-only root file system with a
 * scratch `/tmp`, every capability dropped, the runtime's default seccomp profile.
 */
export function builtInHarnessPodSpec(image: string): PodSpecManifest {
  return {
    runtimeClassName: 'gvisor',
    automountServiceAccountToken: false,
    enableServiceLinks: false,
    restartPolicy: 'Always',
    securityContext: {
      runAsNonRoot: true,
      runAsUser: 65532,
      runAsGroup: 65532,
      fsGroup: 65532,
      seccompProfile: { type: 'RuntimeDefault' },
    },
    containers: [
      {
        name: HARNESS_CONTAINER,
        image,
        // `metrics` (the side port) is what config/monitoring's PodMonitor scrapes.
        ports: [
          { name: 'grpc', containerPort: HARNESS_PORT, protocol: 'TCP' },
          { name: 'metrics', containerPort: DEFAULT_HEALTH_PORT, protocol: 'TCP' },
        ],
        resources: {
          requests: { ...DEFAULT_HARNESS_RESOURCES.requests },
          limits: { ...DEFAULT_HARNESS_RESOURCES.limits },
        },
        securityContext: {
          allowPrivilegeEscalation: false,
          readOnlyRootFilesystem: true,
          runAsNonRoot: true,
          capabilities: { drop: ['ALL'] },
        },
        volumeMounts: [{ name: 'tmp', mountPath: '/tmp' }],
      },
    ],
    volumes: [{ name: 'tmp', emptyDir: { sizeLimit: '256Mi' } }],
  };
}

/** Inputs of {@link desiredPod}. */
export interface DesiredPodInput {
  readonly conversation: Conversation;
  /** `template.spec` of the PodTemplate, or undefined for the built-in spec. */
  readonly templateSpec?: PodSpecManifest;
  /** Image of the built-in spec. */
  readonly harnessImage: string;
}

/**
 * The harness pod for `conversation`: named after it, owned by it (controller), from the
 * template's spec or the built-in one. Whatever the template says, the operator sets
 * `automountServiceAccountToken: false` (the harness holds no Kubernetes credential),
 * applies `spec.sandbox.resources` to the `harness` container (else the first container)
 * and gives that container the conversation's MCP servers and approval rules
 * ({@link withToolEnv}). The input is not modified.
 */
export function desiredPod(input: DesiredPodInput): PodManifest {
  const { conversation } = input;
  const base = input.templateSpec ?? builtInHarnessPodSpec(input.harnessImage);
  const resources = conversation.spec.sandbox?.resources;
  const tools = conversation.spec.tools;
  const target = Math.max(
    0,
    base.containers.findIndex((c) => c.name === HARNESS_CONTAINER),
  );
  const containers = base.containers.map((container, i) => {
    if (i !== target) return container;
    const env = withToolEnv(container.env, tools);
    return {
      ...container,
      ...(resources === undefined
        ? {}
        : { resources: mergeResources(container.resources, resources) }),
      ...(env === undefined ? {} : { env }),
    };
  });
  const spec: PodSpecManifest = { ...base, containers, automountServiceAccountToken: false };
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name: conversation.metadata.name ?? '',
      namespace: conversation.metadata.namespace ?? '',
      labels: childLabels(conversation),
      annotations: { [POD_SPEC_HASH_ANNOTATION]: podSpecHash(spec) },
      ownerReferences: [conversationOwnerReference(conversation)],
    },
    spec,
  };
}

/** The first 16 hex digits of SHA-256 over the spec's canonical JSON. */
export function podSpecHash(spec: PodSpecManifest): string {
  return createHash('sha256').update(canonicalJson(spec)).digest('hex').slice(0, 16);
}

/**
 * The harness container's env with the conversation's tools, or undefined when there is
 * nothing to change (no MCP servers, no approval rules: the env stays as the template
 * wrote it, and so does the spec hash). Every variable the template sets is kept:
 *
 * - `HARNESS_MCP_SERVERS`: the spec's `mcpServers` as the harness config reads them
 *   (name, transport, command and args or url, timeoutMs). A template value written inline
 *   as a JSON array is merged: its servers first, then the spec's whose names it does not
 *   use (the harness refuses duplicate names; a conversation cannot replace a server the
 *   deployment configured). A template value from `valueFrom` cannot be read here, so it
 *   stays and the spec's servers are not added.
 * - `HARNESS_REQUIRE_APPROVAL`: the spec's `requireApproval`, space separated, after the
 *   template's rules. An inline template value is prefixed; one from `valueFrom` moves to
 *   {@link TEMPLATE_REQUIRE_APPROVAL_ENV} and is referenced as `$(…)`, which the kubelet
 *   expands (if that source is optional and missing, the reference stays literal and the
 *   harness refuses to start, naming it, rather than run without the template's rules).
 *   A template that sets the variable only through `envFrom` is overridden by `env`.
 */
export function withToolEnv(
  env: readonly EnvVarManifest[] | undefined,
  tools: ToolsSpec | undefined,
): EnvVarManifest[] | undefined {
  const servers = tools?.mcpServers ?? [];
  const rules = tools?.requireApproval ?? [];
  if (servers.length === 0 && rules.length === 0) return undefined;
  let out = (env ?? []).map((entry) => ({ ...entry }));
  if (servers.length > 0) out = withMcpServers(out, servers);
  if (rules.length > 0) out = withApprovalRules(out, rules);
  return out;
}

/** A spec field a backend cannot honour, and what to change; becomes Degraded `SpecFieldUnsupported`. */
export interface SpecGap {
  /** The field's path, e.g. `spec.tools.mcpServers`. */
  readonly field: string;
  /** What keeps it from the harness and what to change, for people; names the field. */
  readonly message: string;
}

/** True when `tools` needs the harness environment changed ({@link withToolEnv} returns an env). */
export function needsToolEnv(tools: ToolsSpec | undefined): boolean {
  return (tools?.mcpServers ?? []).length > 0 || (tools?.requireApproval ?? []).length > 0;
}

/**
 * What of `tools` the merge rules of {@link withToolEnv} would drop, for either backend: a
 * template `HARNESS_MCP_SERVERS` read through `valueFrom` or not a JSON array keeps the
 * spec's servers out. `where` names the template's container for the message.
 */
export function toolEnvGaps(
  env: readonly EnvVarManifest[] | undefined,
  tools: ToolsSpec | undefined,
  where: string,
): SpecGap[] {
  if ((tools?.mcpServers ?? []).length === 0) return [];
  const template = (env ?? []).find((entry) => entry.name === MCP_SERVERS_ENV);
  if (template === undefined) return [];
  if (template.valueFrom === undefined && inlineJsonArray(template.value) !== undefined) return [];
  const how =
    template.valueFrom === undefined ? 'to a value that is not a JSON array' : 'through valueFrom';
  return [
    {
      field: 'spec.tools.mcpServers',
      message: `${where} sets ${MCP_SERVERS_ENV} ${how}, so the conversation's MCP servers (spec.tools.mcpServers) cannot be merged into it: set it inline in the template as a JSON array, or remove it there`,
    },
  ];
}

/** One `spec.tools.mcpServers` entry as `HARNESS_MCP_SERVERS` takes it. */
function harnessMcpServer(server: McpServerSpec): Record<string, unknown> {
  return {
    name: server.name,
    transport: server.transport,
    ...(server.transport === 'stdio'
      ? {
          ...(server.command === undefined ? {} : { command: server.command }),
          ...(server.args === undefined ? {} : { args: [...server.args] }),
        }
      : server.url === undefined
        ? {}
        : { url: server.url }),
    ...(server.timeoutMs === undefined ? {} : { timeoutMs: server.timeoutMs }),
  };
}

function withMcpServers(
  env: EnvVarManifest[],
  servers: readonly McpServerSpec[],
): EnvVarManifest[] {
  const wanted = servers.map(harnessMcpServer);
  const at = env.findIndex((entry) => entry.name === MCP_SERVERS_ENV);
  if (at === -1) return [...env, { name: MCP_SERVERS_ENV, value: JSON.stringify(wanted) }];
  const template = env[at];
  const inline = template?.valueFrom === undefined ? inlineJsonArray(template?.value) : undefined;
  if (inline === undefined) return env;
  const taken = new Set(
    inline.map((server) =>
      typeof server === 'object' && server !== null && 'name' in server ? server.name : undefined,
    ),
  );
  const merged = [...inline, ...wanted.filter((server) => !taken.has(server.name))];
  return env.map((entry, i) =>
    i === at ? { name: MCP_SERVERS_ENV, value: JSON.stringify(merged) } : entry,
  );
}

/** An inline env value that is a JSON array (empty text: an empty array), else undefined. */
function inlineJsonArray(text: string | undefined): unknown[] | undefined {
  if (text === undefined || text.trim() === '') return [];
  try {
    const parsed: unknown = JSON.parse(text);
    return Array.isArray(parsed) ? (parsed as unknown[]) : undefined;
  } catch {
    return undefined;
  }
}

function withApprovalRules(env: EnvVarManifest[], rules: readonly string[]): EnvVarManifest[] {
  const wanted = rules.join(' ');
  const at = env.findIndex((entry) => entry.name === REQUIRE_APPROVAL_ENV);
  if (at === -1) return [...env, { name: REQUIRE_APPROVAL_ENV, value: wanted }];
  const template = env[at];
  if (template?.valueFrom === undefined) {
    const inline = (template?.value ?? '').trim();
    return env.map((entry, i) =>
      i === at
        ? { name: REQUIRE_APPROVAL_ENV, value: inline === '' ? wanted : `${inline} ${wanted}` }
        : entry,
    );
  }
  return env.flatMap((entry, i) =>
    i === at
      ? [
          { name: TEMPLATE_REQUIRE_APPROVAL_ENV, valueFrom: template.valueFrom },
          { name: REQUIRE_APPROVAL_ENV, value: `$(${TEMPLATE_REQUIRE_APPROVAL_ENV}) ${wanted}` },
        ]
      : [entry],
  );
}

function mergeResources(
  current: ResourcesManifest | undefined,
  wanted: {
    requests?: Record<string, string | number | undefined>;
    limits?: Record<string, string | number | undefined>;
  },
): ResourcesManifest {
  const merged: ResourcesManifest = {};
  const requests = { ...current?.requests, ...definedOnly(wanted.requests) };
  const limits = { ...current?.limits, ...definedOnly(wanted.limits) };
  if (Object.keys(requests).length > 0) merged.requests = requests;
  if (Object.keys(limits).length > 0) merged.limits = limits;
  return merged;
}

/** Quantities as the API server returns them: strings (`2` and `"2"` mean the same). */
function definedOnly(
  values: Record<string, string | number | undefined> | undefined,
): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [key, value] of Object.entries(values ?? {})) {
    if (value !== undefined) out[key] = String(value);
  }
  return out;
}
