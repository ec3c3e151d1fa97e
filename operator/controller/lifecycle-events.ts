/**
 * The pure part of the Conversation's Kubernetes Events: from the status a Conversation had
 * before a pass, the status it has after it and the actions the pass completed, the
 * lifecycle Events to record (docs/operator.md, "Events"). Each is derived from a change,
 * not from a state, so a pass that changes nothing emits nothing, and a restarted control
 * plane that compares against the status the object already has re-emits nothing old.
 */
import type { Condition, ConversationStatus } from '../api/v1alpha1/conversation-status';
import type { Conversation } from '../api/v1alpha1/conversation-types';
import { ConditionReason, ConditionType } from '../api/v1alpha1/conditions';
import type { Action } from './plan';
import { ActionKind } from './plan';

/** `type` of an Event. */
export const EventType = {
  Normal: 'Normal',
  Warning: 'Warning',
} as const;
export type EventType = (typeof EventType)[keyof typeof EventType];

/**
 * Reasons of the lifecycle Events. Each Degraded reason (`WarmPoolMissing`, ...) is also an
 * Event reason of its own, a Warning, except TurnAmbiguous, which is `TurnQuarantined`.
 */
export const EventReason = {
  SandboxClaimed: 'SandboxClaimed',
  SandboxReady: 'SandboxReady',
  ClosedIdle: 'ClosedIdle',
  Reopened: 'Reopened',
  TurnQuarantined: 'TurnQuarantined',
  QuarantineResolved: 'QuarantineResolved',
  DeletedByRetention: 'DeletedByRetention',
  /** The step before the finalizer comes off (journal retention, the Lease) failed. */
  FinalizeFailed: 'FinalizeFailed',
} as const;
export type EventReason = (typeof EventReason)[keyof typeof EventReason];

/** `action` of the lifecycle Events: what the control plane did or saw. */
export const EventAction = {
  ClaimSandbox: 'ClaimSandbox',
  ObserveSandbox: 'ObserveSandbox',
  Close: 'Close',
  Reopen: 'Reopen',
  QuarantineTurn: 'QuarantineTurn',
  ResolveQuarantine: 'ResolveQuarantine',
  Delete: 'Delete',
  Reconcile: 'Reconcile',
} as const;
export type EventAction = (typeof EventAction)[keyof typeof EventAction];

/** The longest `note` the API server accepts, in bytes. */
export const NOTE_MAX_BYTES = 1024;

/** One Event to record about a Conversation. */
export interface LifecycleEvent {
  readonly type: EventType;
  /** An {@link EventReason} or a Degraded condition reason. */
  readonly reason: string;
  readonly action: EventAction;
  /** What happened and what to do, at most {@link NOTE_MAX_BYTES} bytes. */
  readonly note: string;
}

/** What one pass changed. */
export interface LifecycleChange {
  readonly conversation: Conversation;
  /** The status before the pass, as this replica last saw it (or the stored one at first sight). */
  readonly previous: ConversationStatus | undefined;
  /** The status after the pass: the one written, else the stored one. */
  readonly next: ConversationStatus | undefined;
  /** The actions the pass completed, in order. */
  readonly completed: readonly Action[];
  /** The action that failed, and why, if one did. */
  readonly failed?: { readonly action: Action; readonly message: string };
}

/** The Events one pass's changes call for, in the order they happened. Pure. */
export function lifecycleEvents(change: LifecycleChange): LifecycleEvent[] {
  const { previous = {}, next = {}, completed, conversation } = change;
  const events: LifecycleEvent[] = [];

  if (
    previous.closedTime !== undefined &&
    next.closedTime === undefined &&
    conversation.metadata.deletionTimestamp === undefined
  ) {
    events.push({
      type: EventType.Normal,
      reason: EventReason.Reopened,
      action: EventAction.Reopen,
      note: `reopened: a turn arrived${next.lastTurnTime === undefined ? '' : ` at ${next.lastTurnTime}`} after it closed at ${previous.closedTime}; a new sandbox is claimed and the journal is replayed into it`,
    });
  }

  for (const action of completed) {
    const event = actionEvent(conversation, action);
    if (event !== undefined) events.push(event);
  }
  if (change.failed?.action.kind === ActionKind.RemoveFinalizer) {
    // The deletion waits on it (journal retention, the Lease): say why, and what to do.
    events.push({
      type: EventType.Warning,
      reason: EventReason.FinalizeFailed,
      action: EventAction.Delete,
      note: `the Conversation keeps its finalizer, retried with backoff: ${change.failed.message}`,
    });
  }

  const readyBefore = conditionOf(previous, ConditionType.Ready);
  const readyAfter = conditionOf(next, ConditionType.Ready);
  if (
    readyAfter?.status === 'True' &&
    readyAfter.reason === ConditionReason.SandboxReady &&
    readyBefore?.status !== 'True'
  ) {
    events.push({
      type: EventType.Normal,
      reason: EventReason.SandboxReady,
      action: EventAction.ObserveSandbox,
      note: `${readyAfter.message}; the conversation takes turns`,
    });
  }

  if (next.closedTime !== undefined && next.closedTime !== previous.closedTime) {
    const message = readyAfter?.reason === ConditionReason.Closed ? readyAfter.message : undefined;
    events.push({
      type: EventType.Normal,
      reason: EventReason.ClosedIdle,
      action: EventAction.Close,
      note: message ?? `closed at ${next.closedTime}; the next turn reopens it`,
    });
  }

  const degradedBefore = trueReason(conditionOf(previous, ConditionType.Degraded));
  const degradedAfterCondition = conditionOf(next, ConditionType.Degraded);
  const degradedAfter = trueReason(degradedAfterCondition);
  if (
    degradedBefore === ConditionReason.TurnAmbiguous &&
    degradedAfter !== ConditionReason.TurnAmbiguous
  ) {
    events.push({
      type: EventType.Normal,
      reason: EventReason.QuarantineResolved,
      action: EventAction.ResolveQuarantine,
      note: `the quarantined turn was resolved (Degraded TurnAmbiguous cleared); the conversation takes turns again${
        degradedAfter === undefined ? '' : `, once Degraded ${degradedAfter} is fixed`
      }`,
    });
  }
  if (degradedAfter !== undefined && degradedAfter !== degradedBefore) {
    const message = degradedAfterCondition?.message ?? '';
    events.push(
      degradedAfter === ConditionReason.TurnAmbiguous
        ? {
            type: EventType.Warning,
            reason: EventReason.TurnQuarantined,
            action: EventAction.QuarantineTurn,
            note: message,
          }
        : {
            type: EventType.Warning,
            reason: degradedAfter,
            action: EventAction.Reconcile,
            note: message,
          },
    );
  }
  return events.map((e) => ({ ...e, note: truncateNote(e.note) }));
}

function actionEvent(conversation: Conversation, action: Action): LifecycleEvent | undefined {
  switch (action.kind) {
    case ActionKind.CreateClaim:
      return {
        type: EventType.Normal,
        reason: EventReason.SandboxClaimed,
        action: EventAction.ClaimSandbox,
        note: `created SandboxClaim ${action.claim.metadata.name} on warm pool ${action.claim.spec.warmPoolRef.name}; waiting for agent-sandbox to bind a sandbox`,
      };
    case ActionKind.CreatePod:
      return {
        type: EventType.Normal,
        reason: EventReason.SandboxClaimed,
        action: EventAction.ClaimSandbox,
        note: `created harness pod ${action.pod.metadata.name}; waiting for it to become Ready`,
      };
    case ActionKind.DeleteConversation:
      return {
        type: EventType.Normal,
        reason: EventReason.DeletedByRetention,
        action: EventAction.Delete,
        note: `deleting Conversation ${conversation.metadata.name ?? ''}: ${action.why}; set spec.retention (or never) to keep closed conversations longer`,
      };
    case ActionKind.AddFinalizer:
    case ActionKind.RemoveFinalizer:
    case ActionKind.DeleteClaim:
    case ActionKind.DeletePod:
      return undefined;
  }
}

function conditionOf(status: ConversationStatus, type: ConditionType): Condition | undefined {
  return status.conditions?.find((c) => c.type === type);
}

function trueReason(condition: Condition | undefined): string | undefined {
  return condition?.status === 'True' ? condition.reason : undefined;
}

/** `note` cut to {@link NOTE_MAX_BYTES} bytes of UTF-8, ending in `…` when cut. */
export function truncateNote(note: string): string {
  if (Buffer.byteLength(note, 'utf8') <= NOTE_MAX_BYTES) return note;
  const ellipsis = '…';
  let out = '';
  let bytes = Buffer.byteLength(ellipsis, 'utf8');
  for (const ch of note) {
    const size = Buffer.byteLength(ch, 'utf8');
    if (bytes + size > NOTE_MAX_BYTES) break;
    out += ch;
    bytes += size;
  }
  return out + ellipsis;
}
