/**
 * The reconciler's hook for Kubernetes Events: after each pass, the status this replica
 * last saw of the Conversation is compared with the status it has now (written by the pass,
 * or by the turn code in between) and the actions the pass completed, and the lifecycle
 * Events that calls for (`lifecycle-events.ts`) are recorded (`event-recorder.ts`).
 *
 * At first sight (after a start, or after this replica took the Conversation over) the
 * baseline is the status the object already has, so an old transition is never emitted
 * again; a transition the turn code wrote before then is not emitted by this replica.
 */
import type { Conversation } from '../api/v1alpha1/conversation-types';
import type { ConversationStatus } from '../api/v1alpha1/conversation-status';
import { ConversationResource } from '../api/v1alpha1/conversation-types';
import type { EventRegarding } from './event-recorder';
import type { LifecycleChange, LifecycleEvent } from './lifecycle-events';
import { lifecycleEvents } from './lifecycle-events';
import type { Action } from './plan';
import { ActionKind } from './plan';

/** Where the Events go (an {@link EventRecorder} in production). */
export interface EventSink {
  record(regarding: EventRegarding, event: LifecycleEvent): void;
}

/** What one pass did, as the reconciler tells it. */
export interface PassEvents {
  /** The Conversation the pass observed. */
  readonly conversation: Conversation;
  readonly completed: readonly Action[];
  /** The status written by the pass, or undefined when it wrote none. */
  readonly written?: ConversationStatus;
  /** The action that failed, and why, if one did. */
  readonly failed?: LifecycleChange['failed'];
}

/** Conversations remembered at most; the least recently reconciled is forgotten first. */
export const REMEMBERED_CONVERSATIONS = 65_536;

/** Remembers the last status seen of each Conversation and records its lifecycle Events. */
export class ConversationEvents {
  // key namespace/name → the uid and the status after the last pass. Map order is
  // insertion order; a key is re-inserted after each pass.
  private readonly seen = new Map<
    string,
    { readonly uid: string; readonly status?: ConversationStatus }
  >();

  constructor(
    private readonly sink: EventSink,
    private readonly maxRemembered = REMEMBERED_CONVERSATIONS,
  ) {}

  /** Records the Events of one pass. Never throws. */
  afterPass(pass: PassEvents): void {
    const { conversation, completed, written, failed } = pass;
    const namespace = conversation.metadata.namespace ?? '';
    const name = conversation.metadata.name ?? '';
    const uid = conversation.metadata.uid ?? '';
    const key = `${namespace}/${name}`;
    const last = this.seen.get(key);
    const previous = last !== undefined && last.uid === uid ? last.status : conversation.status;
    const next = written ?? conversation.status;
    const regarding: EventRegarding = {
      apiVersion: conversation.apiVersion ?? ConversationResource.apiVersion,
      kind: conversation.kind ?? ConversationResource.kind,
      namespace,
      name,
      uid,
    };
    const change = { conversation, previous, next, completed, ...(failed ? { failed } : {}) };
    for (const event of lifecycleEvents(change)) {
      this.sink.record(regarding, event);
    }
    this.seen.delete(key);
    if (completed.some((a) => a.kind === ActionKind.RemoveFinalizer)) return;
    this.seen.set(key, { uid, ...(next === undefined ? {} : { status: next }) });
    for (const oldest of this.seen.keys()) {
      if (this.seen.size <= this.maxRemembered) break;
      this.seen.delete(oldest);
    }
  }

  /**
   * Forgets a Conversation: it is gone, or another replica reconciles it now (what it
   * emits is not ours to repeat; if it comes back, the stored status is the baseline).
   */
  forget(namespace: string, name: string): void {
    this.seen.delete(`${namespace}/${name}`);
  }
}
