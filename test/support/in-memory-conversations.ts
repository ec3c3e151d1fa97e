/**
 * Conversation objects in memory behind the {@link ConversationStore} port of the turn
 * coordinator: what the reconciler's informer cache and the API server hold, as data only.
 * A status write replaces the stored object's status with what the coordinator computed
 * from it; nothing here decides anything about turns, access or phases.
 */
import { randomUUID } from 'node:crypto';
import { AppError } from '../../common/errors';
import { ConditionType, ConversationPhase } from '../../operator/api/v1alpha1/conditions';
import {
  ConversationResource,
  type Conversation,
} from '../../operator/api/v1alpha1/conversation-types';
import { type ConversationSpec } from '../../operator/api/v1alpha1/conversation-spec';
import { type ConversationStatus } from '../../operator/api/v1alpha1/conversation-status';
import type { ConversationStore } from '../../operator/turns/conversation-access';
import { DEFAULT_CONVERSATION_NAMESPACE } from '../../operator/config';

/** The status the reconciler writes once a conversation's sandbox runs at `endpoint`. */
export function readyStatus(endpoint: string): ConversationStatus {
  return {
    phase: ConversationPhase.Ready,
    conditions: [
      {
        type: ConditionType.Ready,
        status: 'True',
        observedGeneration: 1,
        lastTransitionTime: '2026-01-01T00:00:00.000Z',
        reason: 'SandboxReady',
        message: 'the harness is running',
      },
    ],
    sandbox: { endpoint },
  };
}

export interface InMemoryConversationsOptions {
  /** Namespace of created conversations. @default the control plane's, {@link DEFAULT_CONVERSATION_NAMESPACE} */
  readonly namespace?: string;
  /** The deployment's default spec for created conversations (`owner` is set per create). */
  readonly spec: ConversationSpec;
  /** The status a new object gets, as the reconciler would write it (e.g. {@link readyStatus}). */
  readonly status: () => ConversationStatus | undefined;
  /** How often {@link waitForSandbox} looks again. @default 10 */
  readonly pollMs?: number;
}

export class InMemoryConversations implements ConversationStore {
  private readonly objects = new Map<string, Conversation>();
  private versions = 0;
  /** Status writes applied, oldest first (uid and the status written). */
  readonly statusWrites: { readonly uid: string; readonly status: ConversationStatus }[] = [];

  constructor(private readonly options: InMemoryConversationsOptions) {}

  /**
   * Stores a new Conversation with `spec` (over the default spec) and returns it; its
   * status is `status`, or the one new objects get.
   */
  add(
    spec: Partial<ConversationSpec> = {},
    options: {
      readonly name?: string;
      readonly namespace?: string;
      readonly status?: ConversationStatus;
    } = {},
  ): Conversation {
    const uid = randomUUID();
    const name = options.name;
    this.versions += 1;
    const status = options.status ?? this.options.status();
    const conversation: Conversation = {
      apiVersion: ConversationResource.apiVersion,
      kind: ConversationResource.kind,
      metadata: {
        namespace: options.namespace ?? this.options.namespace ?? DEFAULT_CONVERSATION_NAMESPACE,
        name: name ?? `conv-${uid.slice(0, 8)}`,
        uid,
        generation: 1,
        resourceVersion: String(this.versions),
      },
      spec: { ...this.options.spec, ...spec },
      ...(status === undefined ? {} : { status }),
    };
    this.objects.set(uid, conversation);
    return conversation;
  }

  /** Replaces the stored object's spec (an edit through the API server). */
  editSpec(uid: string, edit: (spec: ConversationSpec) => ConversationSpec): Conversation {
    const current = this.required(uid);
    this.versions += 1;
    const next: Conversation = {
      ...current,
      metadata: {
        ...current.metadata,
        generation: (current.metadata.generation ?? 1) + 1,
        resourceVersion: String(this.versions),
      },
      spec: edit(current.spec),
    };
    this.objects.set(uid, next);
    return next;
  }

  /** Removes the object (a deletion that completed). */
  remove(uid: string): void {
    this.objects.delete(uid);
  }

  byUid(uid: string): Conversation | undefined {
    return this.objects.get(uid);
  }

  /** Every stored object (what an informer cache lists). */
  list(): Conversation[] {
    return [...this.objects.values()];
  }

  /** The stored object `namespace/name` (what an informer cache answers by name). */
  byName(namespace: string, name: string): Conversation | undefined {
    for (const object of this.objects.values()) {
      if (object.metadata.namespace === namespace && object.metadata.name === name) return object;
    }
    return undefined;
  }

  updateStatus(
    conversation: Conversation,
    next: (current: Conversation) => ConversationStatus,
  ): Promise<Conversation> {
    const uid = conversation.metadata.uid ?? '';
    const fresh = this.objects.get(uid);
    if (fresh === undefined) {
      return Promise.reject(new AppError('not_found', `conversation ${uid} no longer exists`));
    }
    const status = next(fresh);
    this.versions += 1;
    const written: Conversation = {
      ...fresh,
      metadata: { ...fresh.metadata, resourceVersion: String(this.versions) },
      status,
    };
    this.objects.set(uid, written);
    this.statusWrites.push({ uid, status });
    return Promise.resolve(written);
  }

  create(owner: string, signal: AbortSignal): Promise<Conversation> {
    if (signal.aborted) return Promise.reject(new AppError('cancelled', 'create was cancelled'));
    return Promise.resolve(this.add({ owner }));
  }

  async waitForSandbox(uid: string, timeoutMs: number, signal: AbortSignal): Promise<string> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const status = this.objects.get(uid)?.status;
      const ready = status?.conditions?.find((c) => c.type === ConditionType.Ready);
      const endpoint = status?.sandbox?.endpoint ?? '';
      if (ready?.status === 'True' && endpoint !== '') return endpoint;
      if (signal.aborted)
        throw new AppError('cancelled', 'stopped waiting: the turn was cancelled');
      if (Date.now() >= deadline) {
        throw new AppError(
          'unavailable',
          `the harness of conversation ${uid} is not ready after ${String(timeoutMs)} ms`,
        );
      }
      await new Promise((resolve) => setTimeout(resolve, this.options.pollMs ?? 10));
    }
  }

  private required(uid: string): Conversation {
    const conversation = this.objects.get(uid);
    if (conversation === undefined) throw new Error(`no conversation ${uid} in the test store`);
    return conversation;
  }
}
