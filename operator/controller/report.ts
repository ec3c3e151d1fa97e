/**
 * The pure status report of a Conversation reconcile pass: snapshot + plan + what `act`
 * did → the whole next `status`. The reconciler writes it once, through the status
 * subresource, and only when it differs from the stored status (an idle pass writes
 * nothing). The turn code's fields (`lastTurnTime`, `currentTurn`, `agent`, `turns`, `journal`) are
 * carried over unchanged; `phase` and the conditions come from the one derivation
 * (conversation-conditions.ts), fed with this pass's {@link SandboxVerdict}.
 */
import type { ConversationStatus } from '../api/v1alpha1/conversation-status';
import { ConditionReason, ConditionType } from '../api/v1alpha1/conditions';
import { canonicalJson } from '../../common/canonical-json';
import type { BlockedReason, SandboxNames } from './assess-sandbox';
import { claimUnboundMessage, podPendingMessage } from './assess-sandbox';
import type { CreateFailure } from './classify-create-failure';
import type { Action, ReconcilePlan } from './plan';
import { ActionKind, Lifecycle } from './plan';
import { formatTime } from './wire-time';
import type { ConversationSnapshot } from './snapshot';
import type { ConditionInput, SandboxVerdict } from './conversation-conditions';
import { conversationConditions } from './conversation-conditions';

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

  let verdict: SandboxVerdict;
  switch (lifecycle) {
    case Lifecycle.Deleting:
      verdict = { lifecycle, ready: ready('False', ConditionReason.Terminating, terminating) };
      break;
    case Lifecycle.Closed:
      verdict = { lifecycle, ready: ready('False', ConditionReason.Closed, closedMessage) };
      break;
    case Lifecycle.Open:
      verdict = {
        lifecycle,
        ready:
          view.blocked !== undefined
            ? ready('False', view.blocked, view.message)
            : view.ready
              ? ready('True', ConditionReason.SandboxReady, view.message)
              : ready('False', ConditionReason.SandboxPending, view.message),
      };
      break;
  }
  // The turn code's facts are carried over as stored, so the stored status is the input.
  const derived = conversationConditions(conversation, verdict, nowText);

  const observedGeneration = clean ? generation : status.observedGeneration;
  const names = lifecycle === Lifecycle.Open ? view.names : {};
  const sandbox = {
    ...(names.claimName === undefined ? {} : { claimName: names.claimName }),
    ...(names.sandboxName === undefined ? {} : { sandboxName: names.sandboxName }),
    ...(names.podName === undefined ? {} : { podName: names.podName }),
    ...(names.endpoint === undefined ? {} : { endpoint: names.endpoint }),
  };

  return {
    ...derived,
    ...(observedGeneration === undefined ? {} : { observedGeneration }),
    ...(status.lastTurnTime === undefined ? {} : { lastTurnTime: status.lastTurnTime }),
    ...(closedTime === undefined ? {} : { closedTime }),
    ...(status.currentTurn === undefined ? {} : { currentTurn: status.currentTurn }),
    ...(status.agent === undefined ? {} : { agent: status.agent }),
    ...(Object.keys(sandbox).length === 0 ? {} : { sandbox }),
    ...(status.turns === undefined ? {} : { turns: status.turns }),
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

function ready(status: 'True' | 'False', reason: ConditionReason, message: string): ConditionInput {
  return { type: ConditionType.Ready, status, reason, message };
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
