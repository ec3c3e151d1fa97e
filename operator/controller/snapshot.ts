/**
 * What one reconcile pass observed: the Conversation and, for its sandbox backend, the
 * children and the objects they depend on. `observe` builds it (reads only); `plan` and
 * `report` read it and nothing else. Only the fields those pure functions need are kept,
 * in wire form (timestamps as RFC 3339 strings), so tests build snapshots by hand.
 */
import type { Conversation } from '../api/v1alpha1/conversation-types';
import type { ClaimEnvVar } from './agent-sandbox-api';
import type { PodSpecManifest } from './desired-pod';

/** A `metav1.Condition`-like entry of a child's status. */
export interface ObservedCondition {
  readonly type: string;
  readonly status: string;
  readonly reason?: string;
  readonly message?: string;
  /** The `metadata.generation` it was written for, when recorded. */
  readonly observedGeneration?: number;
}

/** One `metadata.ownerReferences` item. */
export interface ObservedOwner {
  readonly apiVersion: string;
  readonly kind: string;
  readonly name: string;
  readonly uid: string;
  readonly controller?: boolean;
}

/** A SandboxClaim (extensions.agents.x-k8s.io/v1beta1). */
export interface ObservedClaim {
  readonly name: string;
  readonly uid: string;
  /** `metadata.generation` (the API server sets it on every custom object). */
  readonly generation?: number;
  /** `metadata.deletionTimestamp` is set. */
  readonly deleting: boolean;
  readonly owners: readonly ObservedOwner[];
  readonly warmPoolName?: string;
  /** `spec.env` as stored (name, value, containerName); empty when the claim sets none. */
  readonly env: readonly ClaimEnvVar[];
  /** `status.sandbox.name`: set once the claim has a Sandbox. */
  readonly sandboxName?: string;
  readonly conditions: readonly ObservedCondition[];
}

/** A Sandbox (agents.x-k8s.io/v1beta1). */
export interface ObservedSandbox {
  readonly name: string;
  readonly deleting: boolean;
  /** The annotation `agents.x-k8s.io/pod-name`, else the Sandbox's name. */
  readonly podName: string;
  /** `status.podIPs`, first is primary. */
  readonly podIPs: readonly string[];
  readonly conditions: readonly ObservedCondition[];
}

/** A harness pod (made by the Sandbox controller, or by us for the pod backend). */
export interface ObservedPod {
  readonly name: string;
  readonly uid: string;
  readonly deleting: boolean;
  readonly owners: readonly ObservedOwner[];
  readonly annotations: Readonly<Record<string, string>>;
  /** `status.phase`: Pending, Running, Succeeded, Failed, Unknown. */
  readonly phase?: string;
  /** `status.podIP`. */
  readonly podIP?: string;
  /** The pod's `Ready` condition is True. */
  readonly ready: boolean;
  /** `status.reason` / `status.message`, e.g. Evicted. */
  readonly statusReason?: string;
  readonly statusMessage?: string;
}

/** The SandboxTemplate a warm pool names: what decides which spec fields a claim can honour. */
export interface ObservedSandboxTemplate {
  /** `spec.envVarsInjectionPolicy` (Allowed, Overrides, Disallowed; absent means Disallowed). */
  readonly envVarsInjectionPolicy?: string;
  /** `spec.podTemplate.spec`, when it has containers. */
  readonly podSpec?: PodSpecManifest;
}

/** The agent-sandbox backend: warm pool → template, claim → Sandbox → pod. */
export interface AgentSandboxObservation {
  readonly backend: 'agent-sandbox';
  /** `spec.sandbox.warmPool ?? DEFAULT_WARM_POOL`. */
  readonly warmPoolName: string;
  /** Undefined when the SandboxWarmPool was not found. */
  readonly warmPool?: { readonly templateName?: string };
  /** Whether the pool's SandboxTemplate exists; undefined when not looked up (no pool). */
  readonly templateFound?: boolean;
  /** The pool's SandboxTemplate, when it was found. */
  readonly template?: ObservedSandboxTemplate;
  readonly claim?: ObservedClaim;
  readonly sandbox?: ObservedSandbox;
  readonly pod?: ObservedPod;
}

/** The plain pod backend: a PodTemplate (or the built-in spec) → pod. */
export interface PodObservation {
  readonly backend: 'pod';
  /** `spec.sandbox.template ?? DEFAULT_TEMPLATE`. */
  readonly templateName: string;
  /** `spec.sandbox.template` was set (a missing template is then an error, not a fallback). */
  readonly templateExplicit: boolean;
  /** `template.spec` of the PodTemplate; undefined when it was not found. */
  readonly templateSpec?: PodSpecManifest;
  readonly pod?: ObservedPod;
}

/** Everything one pass observed. */
export interface ConversationSnapshot {
  readonly conversation: Conversation;
  readonly sandbox: AgentSandboxObservation | PodObservation;
  /** Harness image for the built-in pod spec (deployment config, not observed). */
  readonly harnessImage: string;
}
