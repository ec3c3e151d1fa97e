/**
 * The pure status report of a Conversation reconcile pass: snapshot + plan + what `act`
 * did → the whole next `status`. The reconciler writes it once, through the status
 * subresource, and only when it differs from the stored status (an idle pass writes
 * nothing). Fields other writers own (`lastTurnTime`, `currentTurn`, `journal`, a
 * `Progressing` condition while a turn is in flight, `Degraded` TurnAmbiguous) are carried
 * over unchanged.
 */
import type { Condition, ConversationStatus } from '../api/v1alpha1';
import type { DegradedReason } from '../api/v1alpha1';
import { ConditionReason, ConditionType, ConversationPhase } from '../api/v1alpha1';
import { canonicalJson } from '../../common/canonical-json';
import type { BlockedReason, SandboxNames } from './assess-sandbox';
import { claimUnboundMessage, podPendingMessage } from './assess-sandbox';
import type { CreateFailure } from './classify-create-failure';
import type { Action, ReconcilePlan } from './plan';
import { ActionKind, Lifecycle, formatTime } from './plan';
import type { ConversationSnapshot } from './snapshot';

/** What `act` did: the actions that completed, in order, and the one that failed, if any. */
export interface ActOutcome {
  readonly completed: readonly Action[];
  readonly failed?: {
    readonly action: Action;
    readonly message: string;
    /** A classified cause a person can act on (absent: report the message as is). */
    readonly cause?: CreateFailure;
  };
}

/** A condition before it is stamped with a generation and transition time. */
interface ConditionInput {
  readonly type: ConditionType;
  readonly status: 'True' | 'False' | 'Unknown';
  readonly reason: ConditionReason;
  readonly message: string;
}

/**
 * The next status. `observedGeneration` moves to `metadata.generation` only when no
 * action failed; every condition is stamped with the generation it describes and keeps
 * its `lastTransitionTime` while its status does not change.
 */
export function reportStatus(
  snapshot: ConversationSnapshot,
  plan: ReconcilePlan,
  outcome: ActOutcome,
  now: Date,
): ConversationStatus {
  const { conversation } = snapshot;
  const status = conversation.status ?? {};
  const generation = conversation.metadata.generation ?? 0;
  const nowText = formatTime(now.getTime());
  const clean = outcome.failed === undefined;
  const turn =
    status.currentTurn !== undefined && status.currentTurn !== '' ? status.currentTurn : undefined;
  const lifecycle =
    plan.lifecycle === Lifecycle.Closing
      ? clean
        ? Lifecycle.Closed
        : Lifecycle.Open
      : plan.lifecycle;
  const closedTime =
    plan.lifecycle === Lifecycle.Closing
      ? clean
        ? plan.closedTime
        : status.closedTime
      : lifecycle === Lifecycle.Open
        ? undefined
        : status.closedTime;

  const view = sandboxView(plan, outcome);
  // Typed with DegradedReason so a new cause cannot skip the Argo CD health test cases.
  const degradedCauses: (ConditionInput & { readonly reason: DegradedReason })[] = [];
  if (lifecycle === Lifecycle.Open && view.blocked !== undefined) {
    degradedCauses.push({
      type: ConditionType.Degraded,
      status: 'True',
      reason: view.blocked,
      message: view.message,
    });
  }
  if (plan.retention.error !== undefined) {
    degradedCauses.push({
      type: ConditionType.Degraded,
      status: 'True',
      reason: ConditionReason.RetentionInvalid,
      message: `spec.retention ${JSON.stringify(plan.retention.value ?? '')} cannot be used (${plan.retention.error}); the object will not be deleted automatically: set spec.retention to a duration such as 24h`,
    });
  }
  if (plan.idle.error !== undefined) {
    degradedCauses.push({
      type: ConditionType.Degraded,
      status: 'True',
      reason: ConditionReason.IdleTimeoutInvalid,
      message: `spec.idleTimeout ${JSON.stringify(plan.idle.value ?? '')} cannot be used (${plan.idle.error}); idle closing is disabled: set a duration such as 30m, or 0s to never close`,
    });
  }

  const closedMessage = `closed at ${closedTime ?? nowText}${
    plan.idle.value === undefined ? '' : ` after ${plan.idle.value} without a turn`
  }; the next turn reopens it${
    plan.retentionHold !== undefined
      ? `; the object is kept, never deleted by retention: ${plan.retentionHold}`
      : plan.retention.ms === undefined || closedTime === undefined
        ? ''
        : `; the object is deleted ${plan.retention.value ?? ''} after closing`
  }`;
  const terminating = 'the Conversation is being deleted; its sandbox is released first';

  let ready: ConditionInput;
  let progressing: ConditionInput;
  switch (lifecycle) {
    case Lifecycle.Deleting:
      ready = cond(ConditionType.Ready, 'False', ConditionReason.Terminating, terminating);
      progressing = cond(
        ConditionType.Progressing,
        'True',
        ConditionReason.Terminating,
        terminating,
      );
      break;
    case Lifecycle.Closed:
      ready = cond(ConditionType.Ready, 'False', ConditionReason.Closed, closedMessage);
      progressing = cond(ConditionType.Progressing, 'False', ConditionReason.Closed, closedMessage);
      break;
    case Lifecycle.Open:
      if (view.blocked !== undefined) {
        ready = cond(ConditionType.Ready, 'False', view.blocked, view.message);
        progressing = cond(ConditionType.Progressing, 'False', view.blocked, view.message);
      } else if (view.ready) {
        ready = cond(ConditionType.Ready, 'True', ConditionReason.SandboxReady, view.message);
        progressing = cond(
          ConditionType.Progressing,
          'False',
          ConditionReason.Idle,
          'no turn in flight',
        );
      } else {
        ready = cond(ConditionType.Ready, 'False', ConditionReason.SandboxPending, view.message);
        progressing = cond(
          ConditionType.Progressing,
          'True',
          ConditionReason.SandboxPending,
          view.message,
        );
      }
      break;
  }

  const previous = status.conditions ?? [];
  const find = (type: string): Condition | undefined => previous.find((c) => c.type === type);
  const stamp = (input: ConditionInput): Condition => {
    const old = find(input.type);
    return {
      type: input.type,
      status: input.status,
      observedGeneration: generation,
      lastTransitionTime:
        old !== undefined && old.status === input.status ? old.lastTransitionTime : nowText,
      reason: input.reason,
      message: input.message,
    };
  };

  // A turn in flight owns Progressing (TurnRunning, AwaitingApproval, AwaitingAnswer).
  const oldProgressing = find(ConditionType.Progressing);
  const progressingOut =
    turn !== undefined && lifecycle !== Lifecycle.Deleting
      ? (oldProgressing ??
        stamp(
          cond(
            ConditionType.Progressing,
            'True',
            ConditionReason.TurnRunning,
            `turn ${turn} in flight`,
          ),
        ))
      : stamp(progressing);

  // A quarantined turn stays Degraded until an admin resolves it; the turn code clears it.
  const oldDegraded = find(ConditionType.Degraded);
  const firstCause = degradedCauses[0];
  const degradedOut =
    oldDegraded?.status === 'True' && oldDegraded.reason === ConditionReason.TurnAmbiguous
      ? oldDegraded
      : stamp(
          firstCause === undefined
            ? cond(
                ConditionType.Degraded,
                'False',
                ConditionReason.Healthy,
                'nothing needs attention',
              )
            : { ...firstCause, message: degradedCauses.map((c) => c.message).join('; ') },
        );

  const readyOut = stamp(ready);
  const ours = new Set<string>([
    ConditionType.Ready,
    ConditionType.Progressing,
    ConditionType.Degraded,
  ]);
  const conditions = [
    readyOut,
    progressingOut,
    degradedOut,
    ...previous.filter((c) => !ours.has(c.type)),
  ];

  const phase = phaseOf(lifecycle, readyOut, progressingOut, degradedOut, turn);
  const observedGeneration = clean ? generation : status.observedGeneration;
  const names = lifecycle === Lifecycle.Open ? view.names : {};
  const sandbox = {
    ...(names.claimName === undefined ? {} : { claimName: names.claimName }),
    ...(names.sandboxName === undefined ? {} : { sandboxName: names.sandboxName }),
    ...(names.podName === undefined ? {} : { podName: names.podName }),
    ...(names.endpoint === undefined ? {} : { endpoint: names.endpoint }),
  };

  return {
    phase,
    conditions,
    ...(observedGeneration === undefined ? {} : { observedGeneration }),
    ...(status.lastTurnTime === undefined ? {} : { lastTurnTime: status.lastTurnTime }),
    ...(closedTime === undefined ? {} : { closedTime }),
    ...(status.currentTurn === undefined ? {} : { currentTurn: status.currentTurn }),
    ...(Object.keys(sandbox).length === 0 ? {} : { sandbox }),
    ...(status.journal === undefined ? {} : { journal: status.journal }),
  };
}

/** True when two statuses are the same JSON (key order aside). */
export function isSameStatus(
  a: ConversationStatus | undefined,
  b: ConversationStatus | undefined,
): boolean {
  return canonicalJson(a ?? {}) === canonicalJson(b ?? {});
}

function cond(
  type: ConditionType,
  status: 'True' | 'False',
  reason: ConditionReason,
  message: string,
): ConditionInput {
  return { type, status, reason, message };
}

function phaseOf(
  lifecycle: Lifecycle,
  ready: Condition,
  progressing: Condition,
  degraded: Condition,
  turn: string | undefined,
): ConversationPhase {
  if (lifecycle === Lifecycle.Deleting) return ConversationPhase.Terminating;
  if (degraded.status === 'True') return ConversationPhase.Degraded;
  if (lifecycle === Lifecycle.Closed) return ConversationPhase.Closed;
  if (turn !== undefined) {
    if (progressing.reason === ConditionReason.AwaitingApproval) {
      return ConversationPhase.AwaitingApproval;
    }
    if (progressing.reason === ConditionReason.AwaitingAnswer)
      return ConversationPhase.AwaitingAnswer;
    return ConversationPhase.Running;
  }
  return ready.status === 'True' ? ConversationPhase.Ready : ConversationPhase.Pending;
}

/** The sandbox as it stands after the actions that ran. */
function sandboxView(
  plan: ReconcilePlan,
  outcome: ActOutcome,
): {
  readonly names: SandboxNames;
  readonly ready: boolean;
  readonly blocked?: BlockedReason;
  readonly message: string;
} {
  const assessed = plan.sandbox;
  let names: SandboxNames = assessed.names;
  let message: string | undefined;
  for (const action of outcome.completed) {
    switch (action.kind) {
      case ActionKind.CreateClaim:
        names = { claimName: action.claim.metadata.name };
        message = claimUnboundMessage(action.claim.metadata.name);
        break;
      case ActionKind.CreatePod:
        names = { podName: action.pod.metadata.name };
        message = podPendingMessage(action.pod.metadata.name, 'Pending');
        break;
      case ActionKind.DeleteClaim:
      case ActionKind.DeletePod:
        names = {};
        message = `replacing the sandbox: ${action.why}`;
        break;
      case ActionKind.AddFinalizer:
      case ActionKind.RemoveFinalizer:
      case ActionKind.DeleteConversation:
        break;
    }
  }
  if (assessed.state === 'blocked') {
    return { names, ready: false, blocked: assessed.reason, message: assessed.message };
  }
  const failed = outcome.failed;
  if (
    failed?.cause?.kind === 'runtime-class-missing' &&
    failed.action.kind === ActionKind.CreatePod
  ) {
    return {
      names,
      ready: false,
      blocked: ConditionReason.RuntimeClassMissing,
      message: runtimeClassMissingMessage(
        failed.cause.runtimeClassName,
        failed.action.pod.metadata.name,
        failed.action.pod.metadata.namespace,
      ),
    };
  }
  if (message !== undefined) return { names, ready: false, message };
  switch (assessed.state) {
    case 'ready':
      return { names, ready: true, message: assessed.message };
    case 'pending':
      return { names, ready: false, message: assessed.message };
    case 'absent':
      return {
        names,
        ready: false,
        message:
          outcome.failed === undefined
            ? 'no sandbox yet'
            : `could not create the sandbox: ${outcome.failed.message}`,
      };
  }
}

/**
 * What to do about a pod admission rejected for a missing RuntimeClass. `gvisor` is the
 * one the built-in spec and config/sandbox name, so it gets the install steps; any other
 * name came from a PodTemplate the admin wrote.
 */
function runtimeClassMissingMessage(runtimeClass: string, pod: string, namespace: string): string {
  const fix =
    runtimeClass === 'gvisor'
      ? 'install gVisor on the nodes and apply config/cluster/runtime-class.yaml'
      : `create RuntimeClass ${JSON.stringify(runtimeClass)} for a runtime installed on the nodes`;
  return `RuntimeClass ${JSON.stringify(runtimeClass)} not found, so admission rejected pod ${pod} in namespace ${namespace}: ${fix} (or set the sandbox template's runtimeClassName); the pod is retried with backoff`;
}
