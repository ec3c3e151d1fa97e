/**
 * The narrow interface the Conversation reconciler reads and writes through
 * ({@link ConversationKube}), over the raw calls of `kube-api.ts`: objects narrowed to
 * what the reconciler reads, writes told to the recent-writes record.
 */
import type { KubeConfig } from '@kubernetes/client-node';
import type { ConversationStatus } from '../api/v1alpha1/conversation-status';
import type { Conversation } from '../api/v1alpha1/conversation-types';
import { AppError } from '../../common/errors';
import type { SandboxClaimManifest } from './agent-sandbox-api';
import { CONVERSATION_FINALIZER } from './child-meta';
import type { PodManifest, PodSpecManifest } from './desired-pod';
import { createKubeApi, ObjectKind, type KubeApi, type ObjectReader } from './kube-api';
import { apiStatusCode, ignoringStatus } from './kube-api-errors';
import {
  fieldAt,
  isPodSpecManifest,
  isReconcilableConversation,
  readClaim,
  readPod,
  readSandbox,
  readSandboxTemplate,
  readWarmPool,
} from './read-objects';
import type {
  ObservedClaim,
  ObservedPod,
  ObservedSandbox,
  ObservedSandboxTemplate,
} from './snapshot';

/** What the reconciler reads and writes. Reads return undefined for NotFound. */
export interface ConversationKube {
  getConversation(namespace: string, name: string): Promise<Conversation | undefined>;
  getClaim(namespace: string, name: string): Promise<ObservedClaim | undefined>;
  getSandbox(namespace: string, name: string): Promise<ObservedSandbox | undefined>;
  getPod(namespace: string, name: string): Promise<ObservedPod | undefined>;
  getWarmPool(namespace: string, name: string): Promise<{ templateName?: string } | undefined>;
  getSandboxTemplate(namespace: string, name: string): Promise<ObservedSandboxTemplate | undefined>;
  getPodTemplateSpec(namespace: string, name: string): Promise<PodSpecManifest | undefined>;
  /** Adds our finalizer; fails with a conflict if the object changed since it was read. */
  addFinalizer(conversation: Conversation): Promise<void>;
  /** Removes our finalizer; NotFound is success. */
  removeFinalizer(conversation: Conversation): Promise<void>;
  /** AlreadyExists is success: the next pass observes what is there. */
  createClaim(claim: SandboxClaimManifest): Promise<void>;
  /** NotFound and a uid mismatch are success. */
  deleteClaim(namespace: string, name: string, uid: string): Promise<void>;
  createPod(pod: PodManifest): Promise<void>;
  deletePod(namespace: string, name: string, uid: string): Promise<void>;
  deleteConversation(conversation: Conversation): Promise<void>;
  /** Replaces `status` through the status subresource, guarded by the resourceVersion read. */
  replaceStatus(conversation: Conversation, status: ConversationStatus): Promise<void>;
}

/**
 * Told about the writes a pass made, so reads from informer caches that have not caught
 * up yet still see them (`recent-writes.ts`).
 */
export interface WriteRecorder {
  /** `obj` is what a create, patch or update returned (or what a live read found). */
  wrote(kind: ObjectKind, obj: unknown): void;
  /** The object of that uid was deleted (or is being deleted). */
  deleted(kind: ObjectKind, namespace: string, name: string, uid: string): void;
  /** A write conflicted: what was recorded for the object is not current; forget it. */
  forget(kind: ObjectKind, namespace: string, name: string): void;
}

/** The {@link ConversationKube} of a cluster, reading every object with a GET. */
export function createConversationKube(kc: KubeConfig): ConversationKube {
  return conversationKube(createKubeApi(kc));
}

/**
 * The {@link ConversationKube} over `api`: objects are read through `reader` (the API
 * itself, or informer caches) and narrowed; writes go to `api` and are told to `recorder`.
 * After a create fails with AlreadyExists the object is read live once and recorded: the
 * reader did not show it (a cache that has not caught up, or an object our watches do not
 * select), and the next pass must see it rather than create again.
 */
export function conversationKube(
  api: KubeApi,
  reader: ObjectReader = api,
  recorder?: WriteRecorder,
): ConversationKube {
  // Schema checks of a cached object are done once per object (the cache replaces it on
  // every change).
  const checked = new WeakMap<object, boolean>();
  const reconcilable = (raw: unknown): raw is Conversation => {
    if (typeof raw !== 'object' || raw === null) return false;
    let ok = checked.get(raw);
    if (ok === undefined) {
      ok = isReconcilableConversation(raw);
      checked.set(raw, ok);
    }
    return ok;
  };
  const learnAfterConflict = async (
    kind: typeof ObjectKind.Claim | typeof ObjectKind.Pod,
    namespace: string,
    name: string,
  ): Promise<void> => {
    if (recorder === undefined) return;
    const existing = await api.get(kind, namespace, name);
    if (existing !== undefined) recorder.wrote(kind, existing);
  };
  // A conflict means the Conversation the pass worked on is not current, be it from the
  // cache or from our own last write (after a watch that relisted past it): the next pass
  // reads the cache.
  const conflictForgets = async (c: Conversation, write: () => Promise<unknown>) => {
    try {
      return await write();
    } catch (err: unknown) {
      if (apiStatusCode(err) === 409) {
        recorder?.forget(
          ObjectKind.Conversation,
          c.metadata.namespace ?? '',
          c.metadata.name ?? '',
        );
      }
      throw err;
    }
  };
  const removed = async (
    kind: typeof ObjectKind.Claim | typeof ObjectKind.Pod | typeof ObjectKind.Conversation,
    namespace: string,
    name: string,
    uid: string,
  ): Promise<void> => {
    await api.remove(kind, namespace, name, uid);
    recorder?.deleted(kind, namespace, name, uid);
  };

  return {
    async getConversation(namespace, name) {
      const raw = await reader.get(ObjectKind.Conversation, namespace, name);
      if (raw === undefined) return undefined;
      if (!reconcilable(raw)) {
        throw new AppError(
          'failed_precondition',
          `Conversation ${namespace}/${name} does not match the polychrome.dev/v1alpha1 schema; fix or delete it`,
          { details: { namespace, conversation: name } },
        );
      }
      return raw;
    },
    async getClaim(namespace, name) {
      const raw = await reader.get(ObjectKind.Claim, namespace, name);
      return raw === undefined ? undefined : readClaim(raw);
    },
    async getSandbox(namespace, name) {
      const raw = await reader.get(ObjectKind.Sandbox, namespace, name);
      return raw === undefined ? undefined : readSandbox(raw);
    },
    async getPod(namespace, name) {
      const raw = await reader.get(ObjectKind.Pod, namespace, name);
      return raw === undefined ? undefined : readPod(raw);
    },
    async getWarmPool(namespace, name) {
      const raw = await reader.get(ObjectKind.WarmPool, namespace, name);
      return raw === undefined ? undefined : readWarmPool(raw);
    },
    async getSandboxTemplate(namespace, name) {
      const raw = await reader.get(ObjectKind.SandboxTemplate, namespace, name);
      return raw === undefined ? undefined : (readSandboxTemplate(raw) ?? {});
    },
    async getPodTemplateSpec(namespace, name) {
      const template = await reader.get(ObjectKind.PodTemplate, namespace, name);
      if (template === undefined) return undefined;
      const spec = fieldAt(template, 'template', 'spec');
      if (!isPodSpecManifest(spec)) {
        throw new AppError(
          'failed_precondition',
          `PodTemplate ${namespace}/${name} has no containers in template.spec; fix the PodTemplate`,
          { details: { namespace, podTemplate: name } },
        );
      }
      return spec;
    },
    async addFinalizer(c) {
      const patched = await conflictForgets(c, () =>
        api.patchFinalizers(c, [...(c.metadata.finalizers ?? []), CONVERSATION_FINALIZER]),
      );
      recorder?.wrote(ObjectKind.Conversation, patched);
    },
    async removeFinalizer(c) {
      await ignoringStatus([404], () =>
        api.patchFinalizers(
          c,
          (c.metadata.finalizers ?? []).filter((f) => f !== CONVERSATION_FINALIZER),
        ),
      );
    },
    async createClaim(claim) {
      try {
        recorder?.wrote(ObjectKind.Claim, await api.createClaim(claim));
      } catch (err: unknown) {
        if (apiStatusCode(err) !== 409) throw err;
        await learnAfterConflict(ObjectKind.Claim, claim.metadata.namespace, claim.metadata.name);
      }
    },
    async deleteClaim(namespace, name, uid) {
      await removed(ObjectKind.Claim, namespace, name, uid);
    },
    async createPod(pod) {
      try {
        recorder?.wrote(ObjectKind.Pod, await api.createPod(pod));
      } catch (err: unknown) {
        if (apiStatusCode(err) === 409) {
          await learnAfterConflict(ObjectKind.Pod, pod.metadata.namespace, pod.metadata.name);
        }
        throw err;
      }
    },
    async deletePod(namespace, name, uid) {
      await removed(ObjectKind.Pod, namespace, name, uid);
    },
    async deleteConversation(c) {
      await api.remove(
        ObjectKind.Conversation,
        c.metadata.namespace ?? '',
        c.metadata.name ?? '',
        c.metadata.uid ?? '',
      );
    },
    async replaceStatus(c, status) {
      const written = await conflictForgets(c, () => api.replaceStatus(c, status));
      recorder?.wrote(ObjectKind.Conversation, written);
    },
  };
}
