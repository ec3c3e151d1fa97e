/**
 * Snapshots for the reconciler's unit tests: a Conversation and its children in each
 * state the plan and report distinguish. Pure data; nothing here touches a cluster.
 */
import type { Conversation } from '../api/v1alpha1/conversation-types';
import type { ConversationSpec } from '../api/v1alpha1/conversation-spec';
import type { ConversationStatus } from '../api/v1alpha1/conversation-status';
import { DEFAULT_WARM_POOL } from '../api/v1alpha1/conversation-values';
import { CONVERSATION_FINALIZER } from './child-meta';
import { desiredPod } from './desired-pod';
import type {
  AgentSandboxObservation,
  ConversationSnapshot,
  ObservedClaim,
  ObservedPod,
  ObservedSandbox,
  ObservedSandboxTemplate,
  PodObservation,
} from './snapshot';

/** The time fixtures treat as "now". */
export const NOW = new Date('2026-11-30T12:00:00Z');
/** The fixtures' Conversation uid. */
export const UID = '0b0e8a3e-5d0e-4c55-9c1c-2f1a8f0c7a11';

/** A Conversation `c1` in namespace `team`, generation 1, with our finalizer. */
export function conversation(
  spec: Partial<ConversationSpec> = {},
  status?: ConversationStatus,
  meta: Partial<Conversation['metadata']> = {},
): Conversation {
  return {
    apiVersion: 'polychrome.dev/v1alpha1',
    kind: 'Conversation',
    metadata: {
      name: 'c1',
      namespace: 'team',
      uid: UID,
      generation: 1,
      resourceVersion: '100',
      finalizers: [CONVERSATION_FINALIZER],
      ...meta,
    },
    spec: { agent: { systemPrompt: 'hi' }, retention: '24h', ...spec },
    ...(status === undefined ? {} : { status }),
  };
}

const owner = {
  apiVersion: 'polychrome.dev/v1alpha1',
  kind: 'Conversation',
  name: 'c1',
  uid: UID,
  controller: true,
};

/** A claim named after the Conversation, owned by it, bound to Sandbox `sb-1` unless told. */
export function claim(over: Partial<ObservedClaim> = {}): ObservedClaim {
  return {
    name: 'c1',
    uid: 'claim-uid',
    generation: 1,
    deleting: false,
    owners: [owner],
    warmPoolName: DEFAULT_WARM_POOL,
    env: [],
    conditions: [],
    ...over,
  };
}

/**
 * A claim bound to Sandbox `sb-1` at generation 1, with the Ready condition agent-sandbox
 * v1.0 writes for that generation: True when `ready`, else False `SandboxNotReady`.
 */
export function boundClaim(ready: boolean, over: Partial<ObservedClaim> = {}): ObservedClaim {
  return claim({
    generation: 1,
    sandboxName: 'sb-1',
    conditions: [
      ready
        ? {
            type: 'Ready',
            status: 'True',
            reason: 'DependenciesReady',
            message: 'Pod is Ready',
            observedGeneration: 1,
          }
        : {
            type: 'Ready',
            status: 'False',
            reason: 'SandboxNotReady',
            message: 'Sandbox is not ready',
            observedGeneration: 1,
          },
    ],
    ...over,
  });
}

/** A Sandbox `sb-1` whose pod is `sb-1`. */
export function sandbox(ready: boolean, over: Partial<ObservedSandbox> = {}): ObservedSandbox {
  return {
    name: 'sb-1',
    deleting: false,
    podName: 'sb-1',
    podIPs: ready ? ['10.1.2.3'] : [],
    conditions: [
      ready
        ? { type: 'Ready', status: 'True', reason: 'DependenciesReady', message: 'Pod is Ready' }
        : {
            type: 'Ready',
            status: 'False',
            reason: 'DependenciesNotReady',
            message: 'Pod exists with phase: Pending',
          },
    ],
    ...over,
  };
}

/** A pod; Running and Ready with IP 10.1.2.3 when `ready`. */
export function pod(ready: boolean, over: Partial<ObservedPod> = {}): ObservedPod {
  return {
    name: 'c1',
    uid: 'pod-uid',
    deleting: false,
    owners: [owner],
    annotations: {},
    phase: ready ? 'Running' : 'Pending',
    ready,
    ...(ready ? { podIP: '10.1.2.3' } : {}),
    ...over,
  };
}

/**
 * The default SandboxTemplate of {@link agentSnapshot}: env injection Allowed, a `harness`
 * container with one variable of its own.
 */
export const ALLOWING_TEMPLATE: ObservedSandboxTemplate = {
  envVarsInjectionPolicy: 'Allowed',
  podSpec: {
    containers: [
      {
        name: 'harness',
        image: 'polychrome/harness:test',
        env: [{ name: 'POD_IP', valueFrom: { fieldRef: { fieldPath: 'status.podIP' } } }],
      },
    ],
  },
};

/** An agent-sandbox snapshot with the default warm pool and template present. */
export function agentSnapshot(
  c: Conversation,
  over: Partial<Omit<AgentSandboxObservation, 'backend'>> = {},
): ConversationSnapshot {
  return {
    conversation: c,
    harnessImage: 'polychrome/harness:test',
    sandbox: {
      backend: 'agent-sandbox',
      warmPoolName: c.spec.sandbox?.warmPool ?? DEFAULT_WARM_POOL,
      warmPool: { templateName: 'polychrome-harness' },
      templateFound: true,
      template: ALLOWING_TEMPLATE,
      ...over,
    },
  };
}

/** A pod-backend snapshot with no PodTemplate (built-in spec). */
export function podSnapshot(
  c: Conversation,
  over: Partial<Omit<PodObservation, 'backend'>> = {},
): ConversationSnapshot {
  return {
    conversation: c,
    harnessImage: 'polychrome/harness:test',
    sandbox: {
      backend: 'pod',
      templateName: 'polychrome-harness',
      templateExplicit: false,
      ...over,
    },
  };
}

/** The spec-hash annotation the current desired pod of `c` carries. */
export function currentPodAnnotations(c: Conversation): Record<string, string> {
  return desiredPod({ conversation: c, harnessImage: 'polychrome/harness:test' }).metadata
    .annotations;
}
