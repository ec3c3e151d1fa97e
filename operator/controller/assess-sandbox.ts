/**
 * Where the sandbox stands, from a snapshot alone. `plan` uses it to decide what to
 * create, `report` to write conditions and `status.sandbox`. Pure.
 */
import { ONBOARDING_LABEL } from '../api/v1alpha1/conversation-values';
import { ConditionReason } from '../api/v1alpha1/conditions';
import { HARNESS_PORT, isOwnedBy } from './child-meta';
import { claimReadiness, currentClaimReady, describeCondition } from './claim-ready';
import { claimPlanOf } from './desired-claim';
import type { SpecGap } from './desired-pod';
import { HARNESS_CONTAINER, builtInHarnessPodSpec, toolEnvGaps } from './desired-pod';
import type { ConversationSnapshot, ObservedCondition, ObservedPod } from './snapshot';

/** The sandbox's state: nothing yet, on its way, serving, or stuck until a person acts. */
export const SandboxState = {
  Absent: 'absent',
  Pending: 'pending',
  Ready: 'ready',
  Blocked: 'blocked',
} as const;
export type SandboxState = (typeof SandboxState)[keyof typeof SandboxState];

/**
 * Reasons a sandbox is blocked; each becomes `Degraded` True with that reason.
 * `RuntimeClassMissing` is never assessed from a snapshot: `report` derives it from a pod
 * create that admission rejected.
 */
export type BlockedReason =
  | typeof ConditionReason.WarmPoolMissing
  | typeof ConditionReason.SandboxTemplateMissing
  | typeof ConditionReason.SandboxFailed
  | typeof ConditionReason.RuntimeClassMissing
  | typeof ConditionReason.SpecFieldUnsupported;

/** The names `status.sandbox` reports. */
export interface SandboxNames {
  readonly claimName?: string;
  readonly sandboxName?: string;
  readonly podName?: string;
  readonly endpoint?: string;
}

/** The outcome of {@link assessSandbox}. */
export type SandboxAssessment =
  | { readonly state: 'absent'; readonly names: SandboxNames }
  | {
      readonly state: 'pending';
      readonly names: SandboxNames;
      readonly message: string;
      /**
       * The claim controller cannot find a warm pool or template our own read found. Our
       * read of those shared objects may be up to `SHARED_READ_TTL_MS` old
       * (cached-reads.ts), and nothing watches them, so no event would bring the next
       * pass: the reconciler looks again once its read is fresh.
       */
      readonly recheck?: true;
    }
  | {
      readonly state: 'ready';
      readonly names: SandboxNames & { readonly endpoint: string };
      readonly message: string;
    }
  | {
      readonly state: 'blocked';
      readonly names: SandboxNames;
      readonly reason: BlockedReason;
      readonly message: string;
      /**
       * The cause is an object nothing watches (a warm pool, a template): the reconciler
       * asks for a timed requeue to notice when it appears.
       */
      readonly recheck: boolean;
    };

/** Claim/Sandbox Ready reasons from agent-sandbox that will not clear by waiting. */
const FAILED_REASONS: ReadonlySet<string> = new Set([
  'ReconcilerError',
  'InvalidMetadata',
  'EnvVarsInjectionRejected',
  'VolumeClaimTemplatesError',
  'ClaimExpired',
  'Expired',
  'PodFailed',
  'PodSucceeded',
  'MultiplePods',
]);

const TERMINAL_POD_PHASES: ReadonlySet<string> = new Set(['Failed', 'Succeeded']);

/** True when the pod has run to an end it will not come back from (Failed, Succeeded). */
export function isPodFinished(pod: ObservedPod): boolean {
  return pod.phase !== undefined && TERMINAL_POD_PHASES.has(pod.phase);
}

function readyCondition(conditions: readonly ObservedCondition[]): ObservedCondition | undefined {
  return conditions.find((c) => c.type === 'Ready');
}

/**
 * The fix for a namespace without config/sandbox's objects: the label that has the operator
 * install them (docs/operator.md, "Conversation namespaces").
 */
function onboardFix(namespace: string): string {
  return `label the namespace so the operator installs it (kubectl label namespace ${namespace} ${ONBOARDING_LABEL.key}=${ONBOARDING_LABEL.value})`;
}

/**
 * The message while a claim waits for its Sandbox; also what a pass that created the claim
 * reports, so the next pass, which sees the claim, finds nothing to write.
 */
export function claimUnboundMessage(claimName: string): string {
  return `waiting for SandboxClaim ${claimName} to be bound to a Sandbox`;
}

/**
 * The message while a pod is not Ready; also what a pass that created the pod (phase
 * Pending) reports, so the next pass, which sees the pod, finds nothing to write.
 */
export function podPendingMessage(podName: string, phase: string | undefined): string {
  return `waiting for pod ${podName} to become Ready (phase ${phase ?? 'Pending'})`;
}

/** Assesses the sandbox of the snapshot's Conversation. */
export function assessSandbox(snapshot: ConversationSnapshot): SandboxAssessment {
  const { conversation, sandbox } = snapshot;
  const namespace = conversation.metadata.namespace ?? '';
  if (sandbox.backend === 'pod') {
    const pod = sandbox.pod;
    const names: SandboxNames = pod === undefined ? {} : { podName: pod.name };
    if (sandbox.templateExplicit && sandbox.templateSpec === undefined) {
      return {
        state: 'blocked',
        names,
        reason: ConditionReason.SandboxTemplateMissing,
        message: `PodTemplate ${sandbox.templateName} not found in namespace ${namespace}: create it, or remove spec.sandbox.template to use the built-in harness pod spec`,
        recheck: true,
      };
    }
    const base = sandbox.templateSpec ?? builtInHarnessPodSpec(snapshot.harnessImage);
    const container =
      base.containers.find((c) => c.name === HARNESS_CONTAINER) ?? base.containers[0];
    const gaps = toolEnvGaps(
      container?.env,
      conversation.spec.tools,
      `PodTemplate ${sandbox.templateName} (container ${container?.name ?? ''})`,
    );
    if (gaps.length > 0) return unsupported(names, gaps);
    if (pod === undefined) return { state: 'absent', names };
    return assessPod(pod, names, snapshot);
  }

  const claim = sandbox.claim;
  const names: SandboxNames = {
    ...(claim === undefined ? {} : { claimName: claim.name }),
    ...(claim?.sandboxName === undefined ? {} : { sandboxName: claim.sandboxName }),
  };
  if (sandbox.warmPool === undefined) {
    return {
      state: 'blocked',
      names,
      reason: ConditionReason.WarmPoolMissing,
      message: `SandboxWarmPool ${sandbox.warmPoolName} not found in namespace ${namespace}: ${onboardFix(namespace)}, or set spec.sandbox.warmPool`,
      recheck: true,
    };
  }
  const templateName = sandbox.warmPool.templateName;
  if (templateName !== undefined && sandbox.templateFound === false) {
    return {
      state: 'blocked',
      names,
      reason: ConditionReason.SandboxTemplateMissing,
      message: `SandboxTemplate ${templateName}, named by SandboxWarmPool ${sandbox.warmPoolName}, not found in namespace ${namespace}: ${onboardFix(namespace)}, or point the pool at an existing template`,
      recheck: true,
    };
  }
  const { gaps } = claimPlanOf(conversation, sandbox);
  if (gaps.length > 0) return unsupported(names, gaps);
  if (claim === undefined) return { state: 'absent', names };
  if (!isOwnedBy(claim.owners, conversation)) {
    return {
      state: 'blocked',
      names,
      reason: ConditionReason.SandboxFailed,
      message: `SandboxClaim ${claim.name} exists in namespace ${namespace} but is not owned by this Conversation: delete the claim or rename the Conversation`,
      recheck: false,
    };
  }
  if (claim.deleting) {
    return {
      state: 'pending',
      names,
      message: `SandboxClaim ${claim.name} is being deleted; a new one follows`,
    };
  }
  // Only a Ready written for the claim's current generation counts (claim-ready.ts).
  const claimReady = currentClaimReady(claim);
  if (claimReady?.status === 'False' && claimReady.reason !== undefined) {
    if (claimReady.reason === 'WarmPoolNotFound' || claimReady.reason === 'TemplateNotFound') {
      // Our own read found them: either the claim controller has not caught up yet, or
      // our read is stale (they were deleted since). A fresh read will tell.
      return {
        state: 'pending',
        names,
        message: `SandboxClaim ${claim.name}: ${describeCondition(claimReady)}`,
        recheck: true,
      };
    }
    if (FAILED_REASONS.has(claimReady.reason)) {
      return {
        state: 'blocked',
        names,
        reason: ConditionReason.SandboxFailed,
        message: `SandboxClaim ${claim.name} failed: ${describeCondition(claimReady)}`,
        recheck: false,
      };
    }
  }
  if (claim.sandboxName === undefined) {
    return {
      state: 'pending',
      names,
      message: claimUnboundMessage(claim.name),
    };
  }
  const sb = sandbox.sandbox;
  if (sb === undefined) {
    return {
      state: 'pending',
      names,
      message: `waiting for Sandbox ${claim.sandboxName} of SandboxClaim ${claim.name}`,
    };
  }
  const withPod: SandboxNames = { ...names, podName: sb.podName };
  const sandboxReady = readyCondition(sb.conditions);
  if (sandboxReady?.status === 'True') {
    const ip = sandbox.pod?.podIP ?? sb.podIPs[0];
    const claimVerdict = claimReadiness(claim);
    if (!claimVerdict.ready)
      return { state: 'pending', names: withPod, message: claimVerdict.message };
    if (ip !== undefined && ip !== '') {
      const endpoint = `${ip}:${HARNESS_PORT}`;
      return {
        state: 'ready',
        names: { ...withPod, endpoint },
        message: `harness pod ${sb.podName} is ready at ${endpoint}`,
      };
    }
    return {
      state: 'pending',
      names: withPod,
      message: `Sandbox ${sb.name} is Ready but pod ${sb.podName} has no IP yet`,
    };
  }
  if (sandboxReady?.reason !== undefined && FAILED_REASONS.has(sandboxReady.reason)) {
    return {
      state: 'blocked',
      names: withPod,
      reason: ConditionReason.SandboxFailed,
      message: `Sandbox ${sb.name} (pod ${sb.podName}) failed: ${describeCondition(sandboxReady)}`,
      recheck: false,
    };
  }
  return {
    state: 'pending',
    names: withPod,
    message: `waiting for Sandbox ${sb.name} to become Ready: ${describeCondition(sandboxReady)}`,
  };
}

/**
 * Blocked on spec fields the backend cannot honour. Rechecked on a timer: the template that
 * decides it is not watched.
 */
function unsupported(names: SandboxNames, gaps: readonly SpecGap[]): SandboxAssessment {
  return {
    state: 'blocked',
    names,
    reason: ConditionReason.SpecFieldUnsupported,
    message: gaps.map((gap) => gap.message).join('; '),
    recheck: true,
  };
}

function assessPod(
  pod: ObservedPod,
  names: SandboxNames,
  snapshot: ConversationSnapshot,
): SandboxAssessment {
  const namespace = snapshot.conversation.metadata.namespace ?? '';
  if (!isOwnedBy(pod.owners, snapshot.conversation)) {
    return {
      state: 'blocked',
      names,
      reason: ConditionReason.SandboxFailed,
      message: `pod ${pod.name} exists in namespace ${namespace} but is not owned by this Conversation: delete the pod or rename the Conversation`,
      recheck: false,
    };
  }
  if (pod.deleting) {
    return {
      state: 'pending',
      names,
      message: `pod ${pod.name} is terminating; a new one follows`,
    };
  }
  if (isPodFinished(pod)) {
    const why = [pod.statusReason, pod.statusMessage].filter((s) => s !== undefined).join(': ');
    return {
      state: 'blocked',
      names,
      reason: ConditionReason.SandboxFailed,
      message: `pod ${pod.name} ${pod.phase === 'Failed' ? 'failed' : 'exited'}${why === '' ? '' : ` (${why})`}; it is replaced`,
      recheck: false,
    };
  }
  if (pod.phase === 'Running' && pod.ready && pod.podIP !== undefined && pod.podIP !== '') {
    const endpoint = `${pod.podIP}:${HARNESS_PORT}`;
    return {
      state: 'ready',
      names: { ...names, endpoint },
      message: `harness pod ${pod.name} is ready at ${endpoint}`,
    };
  }
  return {
    state: 'pending',
    names,
    message: podPendingMessage(pod.name, pod.phase),
  };
}
