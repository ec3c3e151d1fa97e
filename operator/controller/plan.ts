/**
 * The pure core of a Conversation reconcile pass: snapshot + now → ordered actions, the
 * lifecycle decision (open, closing, closed, deleting) and the soonest timed requeue.
 * No I/O and no clock: `now` comes in, so every rule is table-tested.
 *
 * Rules (docs/design.md, "Kubernetes objects"; docs/operator.md):
 * - Finalizer first: without `polychrome.dev/cleanup` the only action is to add it.
 * - Deletion: release the sandbox (delete the claim or pod we own), wait until it is
 *   gone, then drop the finalizer.
 * - Idle: after `spec.idleTimeout` since `status.lastTurnTime`, with no turn in flight,
 *   the sandbox is released and the conversation is closed (`status.closedTime`). A
 *   missing `lastTurnTime`, an absent or zero timeout, disables idle closing.
 * - Reopen: a `status.lastTurnTime` later than `status.closedTime` (or a cleared
 *   `closedTime`) means a turn arrived: the conversation is open again.
 * - Retention: `spec.retention` (default 24h) after `status.closedTime` the object is
 *   deleted. A malformed value disables deletion (report says why).
 * - Retention never fights GitOps: `spec.retention: never`, or an object Argo CD or Flux
 *   tracks, is closed but never deleted (Git would recreate it with a new uid and an empty
 *   journal); the plan names the hold and the report says it.
 */
import type { Conversation } from '../api/v1alpha1/conversation-types';
import type { SandboxAssessment } from './assess-sandbox';
import { assessSandbox, isPodFinished } from './assess-sandbox';
import { CONVERSATION_FINALIZER, POD_SPEC_HASH_ANNOTATION, isOwnedBy } from './child-meta';
import type { SandboxClaimManifest } from './agent-sandbox-api';
import { claimPlanOf, sameClaimEnv, warmPoolNameOf } from './desired-claim';
import type { PodManifest } from './desired-pod';
import { desiredPod } from './desired-pod';
import { readIdle, readRetention, retentionHoldOf, type DurationRule } from './idle-and-retention';
import { SHARED_READ_TTL_MS } from './cached-reads';
import type { ConversationSnapshot } from './snapshot';
import { formatTime, parseTime } from './wire-time';

/** How long to wait before looking again for a warm pool or template nothing watches. */
export const BLOCKED_RECHECK_MS = 30_000;

/**
 * How long to wait before looking again when the claim controller cannot find a warm pool
 * or template our read found: past the life of that read (`sharedReadTtlMs`,
 * cached-reads.ts), so the next pass reads them afresh.
 */
export function staleReadRecheckMs(sharedReadTtlMs: number): number {
  return sharedReadTtlMs + 1_000;
}

/** {@link staleReadRecheckMs} for the default life of a shared read. */
export const STALE_READ_RECHECK_MS = staleReadRecheckMs(SHARED_READ_TTL_MS);

/** Action kinds, in the order a pass may run them. */
export const ActionKind = {
  AddFinalizer: 'add-finalizer',
  CreateClaim: 'create-claim',
  DeleteClaim: 'delete-claim',
  CreatePod: 'create-pod',
  DeletePod: 'delete-pod',
  DeleteConversation: 'delete-conversation',
  RemoveFinalizer: 'remove-finalizer',
} as const;
export type ActionKind = (typeof ActionKind)[keyof typeof ActionKind];

/** One write `act` performs. Deletes carry the uid they expect (a precondition). */
export type Action =
  | { readonly kind: 'add-finalizer' }
  | { readonly kind: 'remove-finalizer' }
  | { readonly kind: 'create-claim'; readonly claim: SandboxClaimManifest }
  | {
      readonly kind: 'delete-claim';
      readonly name: string;
      readonly uid: string;
      readonly why: string;
    }
  | { readonly kind: 'create-pod'; readonly pod: PodManifest }
  | {
      readonly kind: 'delete-pod';
      readonly name: string;
      readonly uid: string;
      readonly why: string;
    }
  | { readonly kind: 'delete-conversation'; readonly why: string };

/** Where the conversation is in its life. */
export const Lifecycle = {
  /** A sandbox is wanted. */
  Open: 'open',
  /** Idle past its timeout: this pass releases the sandbox and records `closedTime`. */
  Closing: 'closing',
  /** `status.closedTime` is set and no turn came since: no sandbox; retention runs. */
  Closed: 'closed',
  /** `metadata.deletionTimestamp` is set: cleanup behind the finalizer. */
  Deleting: 'deleting',
} as const;
export type Lifecycle = (typeof Lifecycle)[keyof typeof Lifecycle];

/** The outcome of {@link planReconcile}. */
export interface ReconcilePlan {
  readonly actions: readonly Action[];
  readonly lifecycle: Lifecycle;
  /**
   * False when the pass must end without a status write: the finalizer pass (add it and
   * return), the last pass (finalizer removed, the object may be gone), and a deleting
   * object that is not ours to clean.
   */
  readonly writeStatus: boolean;
  /** Milliseconds until the soonest time-based event, if any. */
  readonly requeueAfterMs?: number;
  readonly sandbox: SandboxAssessment;
  readonly idle: DurationRule;
  readonly retention: DurationRule;
  /** Why retention never deletes this object ({@link retentionHoldOf}); absent when it may. */
  readonly retentionHold?: string;
  /** For {@link Lifecycle.Closing}: the `status.closedTime` to record. */
  readonly closedTime?: string;
}

/** True when the Conversation carries our finalizer. */
export function hasFinalizer(conversation: Conversation): boolean {
  return conversation.metadata.finalizers?.includes(CONVERSATION_FINALIZER) ?? false;
}

/** Tunables of {@link planReconcile}. */
export interface PlanOptions {
  /**
   * Delay before looking again for a missing warm pool or template (nothing watches
   * them). Tests shorten it so a recovery is seen without waiting the default.
   * @default BLOCKED_RECHECK_MS
   */
  readonly blockedRecheckMs?: number;
  /**
   * Delay before looking again when the claim controller cannot find a warm pool or
   * template our read found: longer than a shared read lives (cached-reads.ts).
   * @default STALE_READ_RECHECK_MS
   */
  readonly staleReadRecheckMs?: number;
}

/** Plans one pass. Pure. */
export function planReconcile(
  snapshot: ConversationSnapshot,
  now: Date,
  options: PlanOptions = {},
): ReconcilePlan {
  const { conversation } = snapshot;
  const nowMs = now.getTime();
  const status = conversation.status ?? {};
  const sandbox = assessSandbox(snapshot);
  const idle = readIdle(conversation);
  const retention = readRetention(conversation);
  const retentionHold = retentionHoldOf(conversation);
  const base = {
    sandbox,
    idle,
    retention,
    ...(retentionHold === undefined ? {} : { retentionHold }),
  };
  // Milliseconds after closing that the object is deleted; undefined: never.
  const retentionMs = retentionHold === undefined ? retention.ms : undefined;

  if (conversation.metadata.deletionTimestamp !== undefined) {
    if (!hasFinalizer(conversation)) {
      return { ...base, actions: [], lifecycle: Lifecycle.Deleting, writeStatus: false };
    }
    const release = releaseActions(snapshot, 'the Conversation is being deleted');
    if (ownedChildExists(snapshot)) {
      return { ...base, actions: release, lifecycle: Lifecycle.Deleting, writeStatus: true };
    }
    return {
      ...base,
      actions: [{ kind: ActionKind.RemoveFinalizer }],
      lifecycle: Lifecycle.Deleting,
      writeStatus: false,
    };
  }

  if (!hasFinalizer(conversation)) {
    return {
      ...base,
      actions: [{ kind: ActionKind.AddFinalizer }],
      lifecycle: Lifecycle.Open,
      writeStatus: false,
    };
  }

  const closedMs = parseTime(status.closedTime);
  const lastTurnMs = parseTime(status.lastTurnTime);
  const reopened = closedMs !== undefined && lastTurnMs !== undefined && lastTurnMs > closedMs;
  if (closedMs !== undefined && !reopened) {
    const actions = [...releaseActions(snapshot, 'the conversation is closed')];
    const retentionAt = retentionMs === undefined ? undefined : closedMs + retentionMs;
    if (retentionAt !== undefined && nowMs >= retentionAt) {
      actions.push({
        kind: ActionKind.DeleteConversation,
        why: `retention ${retention.value ?? ''} after closing at ${status.closedTime ?? ''} has passed`,
      });
    }
    return {
      ...base,
      retention:
        retentionAt === undefined ? retention : { ...retention, deadline: formatTime(retentionAt) },
      actions,
      lifecycle: Lifecycle.Closed,
      writeStatus: true,
      requeueAfterMs: soonest(nowMs, [retentionAt]),
    };
  }

  const idleDue =
    idle.deadline !== undefined &&
    nowMs >= (parseTime(idle.deadline) ?? Infinity) &&
    (status.currentTurn === undefined || status.currentTurn === '');
  if (idleDue) {
    const retentionAt = retentionMs === undefined ? undefined : nowMs + retentionMs;
    return {
      ...base,
      actions: releaseActions(snapshot, `idle for ${idle.value ?? ''} since the last turn`),
      lifecycle: Lifecycle.Closing,
      writeStatus: true,
      closedTime: formatTime(nowMs),
      requeueAfterMs: soonest(nowMs, [retentionAt]),
    };
  }

  return {
    ...base,
    actions: ensureSandboxActions(snapshot, sandbox),
    lifecycle: Lifecycle.Open,
    writeStatus: true,
    requeueAfterMs: soonest(nowMs, [
      parseTime(idle.deadline),
      sandbox.state === 'blocked' && sandbox.recheck
        ? nowMs + (options.blockedRecheckMs ?? BLOCKED_RECHECK_MS)
        : undefined,
      sandbox.state === 'pending' && sandbox.recheck === true
        ? nowMs + (options.staleReadRecheckMs ?? STALE_READ_RECHECK_MS)
        : undefined,
    ]),
  };
}

function soonest(nowMs: number, times: readonly (number | undefined)[]): number | undefined {
  let best: number | undefined;
  for (const t of times) {
    // A deadline already passed was acted on in this pass (or waits on a watched change,
    // such as a turn finishing); requeueing it would spin.
    if (t === undefined || !Number.isFinite(t) || t <= nowMs) continue;
    const after = Math.ceil(t - nowMs);
    if (best === undefined || after < best) best = after;
  }
  return best;
}

function ownedChildExists(snapshot: ConversationSnapshot): boolean {
  const { conversation, sandbox } = snapshot;
  if (sandbox.backend === 'pod') {
    return sandbox.pod !== undefined && isOwnedBy(sandbox.pod.owners, conversation);
  }
  return sandbox.claim !== undefined && isOwnedBy(sandbox.claim.owners, conversation);
}

/** Deletes of the claim or pod we own that is not already going. Safe to repeat. */
function releaseActions(snapshot: ConversationSnapshot, why: string): Action[] {
  const { conversation, sandbox } = snapshot;
  if (sandbox.backend === 'pod') {
    const pod = sandbox.pod;
    return pod !== undefined && !pod.deleting && isOwnedBy(pod.owners, conversation)
      ? [{ kind: ActionKind.DeletePod, name: pod.name, uid: pod.uid, why }]
      : [];
  }
  const claim = sandbox.claim;
  return claim !== undefined && !claim.deleting && isOwnedBy(claim.owners, conversation)
    ? [{ kind: ActionKind.DeleteClaim, name: claim.name, uid: claim.uid, why }]
    : [];
}

/** The writes that bring an open conversation's sandbox to the desired one. */
function ensureSandboxActions(
  snapshot: ConversationSnapshot,
  assessment: SandboxAssessment,
): Action[] {
  const { conversation, sandbox } = snapshot;
  const turnInFlight =
    conversation.status?.currentTurn !== undefined && conversation.status.currentTurn !== '';
  if (sandbox.backend === 'agent-sandbox') {
    const claim = sandbox.claim;
    // Created even while the warm pool is missing, when no field needs its template:
    // agent-sandbox binds it once the pool appears, and its status change wakes us through
    // the claim watch. Never made with a field dropped (`wanted` is then undefined).
    const wanted = claimPlanOf(conversation, sandbox).claim;
    if (claim === undefined) {
      return wanted === undefined ? [] : [{ kind: ActionKind.CreateClaim, claim: wanted }];
    }
    if (claim.deleting || !isOwnedBy(claim.owners, conversation)) return [];
    const pool = warmPoolNameOf(conversation);
    if (claim.warmPoolName !== pool && !turnInFlight) {
      return [
        {
          kind: ActionKind.DeleteClaim,
          name: claim.name,
          uid: claim.uid,
          why: `spec.sandbox.warmPool changed from ${claim.warmPoolName ?? '(none)'} to ${pool}`,
        },
      ];
    }
    // agent-sandbox reads a claim's env only when it makes the Sandbox: a change of the
    // variables (spec.tools, or the template's own values) needs a new claim.
    if (wanted !== undefined && !sameClaimEnv(claim.env, wanted.spec.env) && !turnInFlight) {
      return [
        {
          kind: ActionKind.DeleteClaim,
          name: claim.name,
          uid: claim.uid,
          why: 'the harness environment the conversation needs (spec.tools) changed',
        },
      ];
    }
    return [];
  }

  if (assessment.state === 'blocked' && assessment.recheck) return [];
  const desired = desiredPod({
    conversation,
    ...(sandbox.templateSpec === undefined ? {} : { templateSpec: sandbox.templateSpec }),
    harnessImage: snapshot.harnessImage,
  });
  const pod = sandbox.pod;
  if (pod === undefined) return [{ kind: ActionKind.CreatePod, pod: desired }];
  if (pod.deleting || !isOwnedBy(pod.owners, conversation)) return [];
  if (isPodFinished(pod)) {
    return [
      {
        kind: ActionKind.DeletePod,
        name: pod.name,
        uid: pod.uid,
        why: `pod ${pod.phase ?? ''}; replacing it`,
      },
    ];
  }
  const wantedHash = desired.metadata.annotations[POD_SPEC_HASH_ANNOTATION];
  if (pod.annotations[POD_SPEC_HASH_ANNOTATION] !== wantedHash && !turnInFlight) {
    return [
      {
        kind: ActionKind.DeletePod,
        name: pod.name,
        uid: pod.uid,
        why: 'the desired pod spec changed; replacing the pod',
      },
    ];
  }
  return [];
}
