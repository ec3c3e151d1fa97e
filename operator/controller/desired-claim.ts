/**
 * The SandboxClaim a Conversation wants (backend agent-sandbox). Pure: the reconciler
 * compares it with the observed claim before writing anything.
 */
import type { Conversation } from '../api/v1alpha1/conversation-types';
import { DEFAULT_WARM_POOL } from '../api/v1alpha1/conversation-values';
import { childLabels, conversationOwnerReference } from './child-meta';
import type { ContainerManifest, EnvVarManifest, SpecGap } from './desired-pod';
import {
  HARNESS_CONTAINER,
  REQUIRE_APPROVAL_ENV,
  needsToolEnv,
  toolEnvGaps,
  withToolEnv,
} from './desired-pod';
import type { ClaimEnvVar, SandboxClaimManifest } from './agent-sandbox-api';
import { AgentSandboxApi, EnvVarsInjectionPolicy } from './agent-sandbox-api';
import type { AgentSandboxObservation } from './snapshot';

/** The warm pool a Conversation's claim draws from: `spec.sandbox.warmPool`, else the default. */
export function warmPoolNameOf(conversation: Conversation): string {
  return conversation.spec.sandbox?.warmPool ?? DEFAULT_WARM_POOL;
}

/**
 * The claim for `conversation`: named after it (one claim per Conversation, so a retry
 * finds the same claim instead of making a second), in its namespace, owned by it, with
 * `env` (the harness variables of its tools, {@link claimPlanOf}) when there is any.
 * No `additionalPodMetadata`: agent-sandbox only accepts label domains on its allowlist.
 */
export function desiredClaim(
  conversation: Conversation,
  env: readonly ClaimEnvVar[] = [],
): SandboxClaimManifest {
  return {
    apiVersion: AgentSandboxApi.extensionsApiVersion,
    kind: 'SandboxClaim',
    metadata: {
      name: conversation.metadata.name ?? '',
      namespace: conversation.metadata.namespace ?? '',
      labels: childLabels(conversation),
      ownerReferences: [conversationOwnerReference(conversation)],
    },
    spec: {
      warmPoolRef: { name: warmPoolNameOf(conversation) },
      ...(env.length === 0 ? {} : { env: env.map((entry) => ({ ...entry })) }),
    },
  };
}

/** The outcome of {@link claimPlanOf}. */
export interface ClaimPlan {
  /**
   * The claim to have; undefined while it cannot be built (a field needs the pool's
   * template, which is not known yet) or when a field cannot be honoured (`gaps`).
   */
  readonly claim?: SandboxClaimManifest;
  /** Spec fields this warm pool's template cannot honour; no claim is made while any is. */
  readonly gaps: readonly SpecGap[];
}

/**
 * The claim `conversation` needs on this observation, or why there is none. A claim
 * carries only `warmPoolRef` and `env`, so every other field that shapes the harness pod
 * must already be what the pool's SandboxTemplate says:
 *
 * - `spec.tools.mcpServers` and `spec.tools.requireApproval` go to the harness container
 *   (`harness`, else the first) as the same variables, merged by the same rules, as the
 *   pod backend's ({@link withToolEnv}). The claim sends the variables that merge adds or
 *   changes; the template must allow that (`envVarsInjectionPolicy` Allowed to add,
 *   Overrides to change a variable it sets itself), and a merged value that needs a
 *   `valueFrom` cannot be sent at all.
 * - `spec.sandbox.template`, when set, must be the template the pool names.
 * - `spec.sandbox.resources`, when set, must equal the template container's (compared as
 *   written: `1` and `"1"` are equal, `1000m` and `1` are not).
 */
export function claimPlanOf(
  conversation: Conversation,
  observed: AgentSandboxObservation,
): ClaimPlan {
  const pool = observed.warmPoolName;
  const templateName = observed.warmPool?.templateName;
  const template = observed.template;
  const gaps: SpecGap[] = [];
  const wantedTemplate = conversation.spec.sandbox?.template;
  if (
    wantedTemplate !== undefined &&
    templateName !== undefined &&
    wantedTemplate !== templateName
  ) {
    gaps.push({
      field: 'spec.sandbox.template',
      message: `spec.sandbox.template is ${wantedTemplate}, but SandboxWarmPool ${pool} draws from SandboxTemplate ${templateName} and a claim takes the pool's template: set spec.sandbox.warmPool to a pool of ${wantedTemplate}, or remove spec.sandbox.template`,
    });
  }
  const tools = conversation.spec.tools;
  const resources = conversation.spec.sandbox?.resources;
  const needsTemplate = needsToolEnv(tools) || resources !== undefined;
  if (!needsTemplate) {
    return gaps.length > 0 ? { gaps } : { claim: desiredClaim(conversation), gaps };
  }
  if (template === undefined || templateName === undefined) return { gaps };
  const where = `SandboxTemplate ${templateName}`;
  const containers = template.podSpec?.containers ?? [];
  const container = containers.find((c) => c.name === HARNESS_CONTAINER) ?? containers[0];
  if (container === undefined) {
    gaps.push({
      field: needsToolEnv(tools) ? 'spec.tools' : 'spec.sandbox.resources',
      message: `${where} has no containers in spec.podTemplate.spec, so a claim cannot honour ${needsToolEnv(tools) ? 'spec.tools' : 'spec.sandbox.resources'}: fix the template`,
    });
    return { gaps };
  }
  if (resources !== undefined) gaps.push(...resourceGaps(container, resources, where));
  const { env, envGaps } = claimEnvOf(
    container,
    conversation,
    template.envVarsInjectionPolicy,
    where,
  );
  gaps.push(...envGaps);
  return gaps.length > 0 ? { gaps } : { claim: desiredClaim(conversation, env), gaps };
}

/** The variables the claim must send, and what the template keeps from being sent. */
function claimEnvOf(
  container: ContainerManifest,
  conversation: Conversation,
  policy: string | undefined,
  where: string,
): { env: ClaimEnvVar[]; envGaps: SpecGap[] } {
  const tools = conversation.spec.tools;
  const own = container.env ?? [];
  const merged = withToolEnv(own, tools);
  const envGaps = toolEnvGaps(own, tools, `${where} (container ${container.name})`);
  if (merged === undefined) return { env: [], envGaps };
  const changed = merged.filter((entry) => {
    const before = own.find((o) => o.name === entry.name);
    return before === undefined || !sameEnvVar(before, entry);
  });
  if (changed.length === 0) return { env: [], envGaps };
  const fields = [
    ...((tools?.mcpServers ?? []).length > 0 ? ['spec.tools.mcpServers'] : []),
    ...((tools?.requireApproval ?? []).length > 0 ? ['spec.tools.requireApproval'] : []),
  ];
  const field = fields.join(' and ');
  if (changed.some((entry) => entry.valueFrom !== undefined)) {
    envGaps.push({
      field: 'spec.tools.requireApproval',
      message: `${where} (container ${container.name}) reads ${REQUIRE_APPROVAL_ENV} through valueFrom, and a SandboxClaim's env carries only plain values, so the conversation's approval rules (spec.tools.requireApproval) cannot be added to the template's: write the template's rules inline, or use backend pod`,
    });
  }
  const setting = policy ?? EnvVarsInjectionPolicy.Disallowed;
  if (setting !== EnvVarsInjectionPolicy.Allowed && setting !== EnvVarsInjectionPolicy.Overrides) {
    envGaps.push({
      field,
      message: `${where} has envVarsInjectionPolicy ${setting}, so a SandboxClaim cannot give the harness ${field}: set spec.envVarsInjectionPolicy: Allowed on the template (config/sandbox does), or use backend pod`,
    });
  } else if (setting === EnvVarsInjectionPolicy.Allowed) {
    const replaced = changed
      .filter((entry) => own.some((o) => o.name === entry.name))
      .map((entry) => entry.name);
    if (replaced.length > 0) {
      envGaps.push({
        field,
        message: `${where} (container ${container.name}) sets ${replaced.join(' and ')} itself, and envVarsInjectionPolicy Allowed lets a claim add variables, not change them, so ${field} cannot reach the harness: set envVarsInjectionPolicy: Overrides on the template, or remove ${replaced.join(' and ')} from it`,
      });
    }
    if ((container.envFrom ?? []).length > 0) {
      envGaps.push({
        field,
        message: `${where} (container ${container.name}) uses envFrom, which agent-sandbox refuses to combine with envVarsInjectionPolicy Allowed, so ${field} cannot reach the harness: replace envFrom with env entries, or set envVarsInjectionPolicy: Overrides`,
      });
    }
  }
  return {
    env: changed
      .filter((entry) => entry.valueFrom === undefined)
      .map((entry) => ({
        name: entry.name,
        value: entry.value ?? '',
        containerName: container.name,
      })),
    envGaps,
  };
}

function sameEnvVar(a: EnvVarManifest, b: EnvVarManifest): boolean {
  return JSON.stringify([a.value, a.valueFrom]) === JSON.stringify([b.value, b.valueFrom]);
}

function resourceGaps(
  container: ContainerManifest,
  wanted: {
    requests?: Record<string, string | number | undefined>;
    limits?: Record<string, string | number | undefined>;
  },
  where: string,
): SpecGap[] {
  const differ: string[] = [];
  for (const kind of ['requests', 'limits'] as const) {
    for (const [key, value] of Object.entries(wanted[kind] ?? {})) {
      if (value === undefined) continue;
      const has = container.resources?.[kind]?.[key];
      if (has === undefined || String(has) !== String(value)) {
        differ.push(`${kind}.${key} ${String(value)} (the template: ${has ?? 'none'})`);
      }
    }
  }
  if (differ.length === 0) return [];
  return [
    {
      field: 'spec.sandbox.resources',
      message: `spec.sandbox.resources asks ${differ.join(', ')} for container ${container.name} of ${where}, and a SandboxClaim cannot change resources: set them in the template, remove spec.sandbox.resources, or use backend pod`,
    },
  ];
}

/** True when a claim's stored `env` is what {@link claimPlanOf} wants (order matters to the kubelet). */
export function sameClaimEnv(
  observed: readonly ClaimEnvVar[],
  wanted: readonly ClaimEnvVar[] | undefined,
): boolean {
  const norm = (list: readonly ClaimEnvVar[]): string =>
    JSON.stringify(list.map((e) => [e.name, e.value, e.containerName ?? '']));
  return norm(observed) === norm(wanted ?? []);
}
