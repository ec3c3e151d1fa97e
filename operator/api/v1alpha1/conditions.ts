/**
 * Condition types, reasons and phases of a Conversation (docs/design.md, "Kubernetes objects").
 * Declared once here, beside the CRD types: the reconciler's status report uses these
 * values and the CRD's `status.phase` enum is built from {@link ConversationPhase}.
 */

/**
 * Condition types. `Ready` summarises; `Progressing` is True while a turn is in flight;
 * `Degraded` is True when something needs a person (a quarantined turn, a bad spec).
 */
export const ConditionType = {
  /** The sandbox is up and the conversation accepts the next turn. */
  Ready: 'Ready',
  /** A turn is in flight, or the sandbox is being created. */
  Progressing: 'Progressing',
  /** Something needs an admin: a quarantined turn, a rolled-back journal, a malformed retention, a missing template or RuntimeClass. */
  Degraded: 'Degraded',
} as const;
export type ConditionType = (typeof ConditionType)[keyof typeof ConditionType];

/** `metav1.Condition.status` values. */
export const ConditionStatus = {
  True: 'True',
  False: 'False',
  Unknown: 'Unknown',
} as const;
export type ConditionStatus = (typeof ConditionStatus)[keyof typeof ConditionStatus];

/**
 * Condition reasons: PascalCase causes, each valid for the API server's reason pattern
 * `^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$`.
 */
export const ConditionReason = {
  /** Ready True: the sandbox pod runs and the harness answers. */
  SandboxReady: 'SandboxReady',
  /** Ready False / Progressing True: the claim or pod exists but is not ready yet. */
  SandboxPending: 'SandboxPending',
  /** Ready False / Degraded True: the sandbox failed (pod failed, claim reported an error). */
  SandboxFailed: 'SandboxFailed',
  /** Ready False / Degraded True: the named SandboxTemplate (or PodTemplate) does not exist. */
  SandboxTemplateMissing: 'SandboxTemplateMissing',
  /** Ready False / Degraded True: the named SandboxWarmPool does not exist. */
  WarmPoolMissing: 'WarmPoolMissing',
  /**
   * Ready False / Degraded True: admission rejected the harness pod because the
   * RuntimeClass its spec names does not exist; creation is retried with backoff.
   */
  RuntimeClassMissing: 'RuntimeClassMissing',
  /**
   * Ready False / Degraded True: the backend cannot honour a spec field (e.g. the warm
   * pool's SandboxTemplate does not allow the claim's env); the message names the field and
   * what to change, and no sandbox is made without it.
   */
  SpecFieldUnsupported: 'SpecFieldUnsupported',
  /** Progressing True: a turn runs; `status.currentTurn` names it. */
  TurnRunning: 'TurnRunning',
  /** Progressing True: the turn waits for a person to approve a tool call. */
  AwaitingApproval: 'AwaitingApproval',
  /** Progressing True: the turn waits for a person to answer the agent's question. */
  AwaitingAnswer: 'AwaitingAnswer',
  /** Degraded True: a turn's outcome is unknown and it is quarantined until an admin resolves it. */
  TurnAmbiguous: 'TurnAmbiguous',
  /**
   * Degraded True: the state plane's journal is shorter than `status.journal`, or differs
   * from it at the checkpointed head (a restored or rolled-back state volume). No turn is
   * appended until the journal is restored or an admin accepts the rollback (docs/turns.md,
   * "A rolled-back journal").
   */
  JournalRolledBack: 'JournalRolledBack',
  /** Progressing False: no turn in flight. */
  Idle: 'Idle',
  /** Ready False: closed after `spec.idleTimeout` or on request; the pod is released. */
  Closed: 'Closed',
  /** Degraded True: `spec.retention` cannot be parsed, so the object is never deleted. */
  RetentionInvalid: 'RetentionInvalid',
  /** Degraded True: `spec.idleTimeout` cannot be parsed, so idle closing is disabled. */
  IdleTimeoutInvalid: 'IdleTimeoutInvalid',
  /** Ready False / Progressing True: the object is being deleted; the sandbox is released first. */
  Terminating: 'Terminating',
  /** Degraded False: nothing needs attention. */
  Healthy: 'Healthy',
  /** Any type, Unknown: the operator has not finished observing the object yet. */
  Reconciling: 'Reconciling',
} as const;
export type ConditionReason = (typeof ConditionReason)[keyof typeof ConditionReason];

/**
 * The reasons of a `Degraded` True condition: the causes of the one status derivation
 * (controller/conversation-conditions.ts types them with this), a quarantined turn
 * (TurnAmbiguous) among them. Argo CD's health check (config/argocd) has a test case for
 * each, which hack/argocd-testdata.test.ts enforces.
 */
export const DegradedReason = {
  SandboxFailed: ConditionReason.SandboxFailed,
  SandboxTemplateMissing: ConditionReason.SandboxTemplateMissing,
  WarmPoolMissing: ConditionReason.WarmPoolMissing,
  RuntimeClassMissing: ConditionReason.RuntimeClassMissing,
  SpecFieldUnsupported: ConditionReason.SpecFieldUnsupported,
  TurnAmbiguous: ConditionReason.TurnAmbiguous,
  JournalRolledBack: ConditionReason.JournalRolledBack,
  RetentionInvalid: ConditionReason.RetentionInvalid,
  IdleTimeoutInvalid: ConditionReason.IdleTimeoutInvalid,
} as const;
export type DegradedReason = (typeof DegradedReason)[keyof typeof DegradedReason];

/**
 * `status.phase`: a display value for `kubectl get`, derived from the conditions. Code
 * decides on conditions, never on the phase.
 */
export const ConversationPhase = {
  /** Created; no sandbox yet or it is starting. */
  Pending: 'Pending',
  /** Sandbox ready, no turn in flight. */
  Ready: 'Ready',
  /** A turn is in flight. */
  Running: 'Running',
  /** A turn waits for a tool-call approval. */
  AwaitingApproval: 'AwaitingApproval',
  /** A turn waits for an answer to the agent's question. */
  AwaitingAnswer: 'AwaitingAnswer',
  /** Closed (idle or on request); the pod is released; the next turn reopens it. */
  Closed: 'Closed',
  /** `Degraded` is True; see its reason. */
  Degraded: 'Degraded',
  /** Being deleted; cleanup behind the finalizer runs. */
  Terminating: 'Terminating',
} as const;
export type ConversationPhase = (typeof ConversationPhase)[keyof typeof ConversationPhase];
