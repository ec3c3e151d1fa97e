/**
 * The one adapter between the Conversation reconciler and @kubernetes/client-node 1.x
 * (STYLE.md §11): a narrow interface the reconciler uses, and its implementation.
 * Custom resources go through CustomObjectsApi, which sends and returns raw JSON. Pods
 * and PodTemplates go through CoreV1Api, whose ObjectSerializer drops keys it does not
 * know: our pod manifests use only core/v1 field names, and what we read is turned back
 * into wire JSON before anything looks at it.
 */
import {
  ApiException,
  CoreV1Api,
  CustomObjectsApi,
  PatchStrategy,
  setHeaderOptions,
} from '@kubernetes/client-node';
import type { KubeConfig, V1Pod } from '@kubernetes/client-node';
import type { Conversation, ConversationStatus } from '../api/v1alpha1';
import { ConversationResource } from '../api/v1alpha1';
import { AppError } from '../../common/errors';
import type { ApiFailure } from './classify-create-failure';
import { CONVERSATION_FINALIZER, FIELD_MANAGER } from './child-meta';
import type { SandboxClaimManifest } from './desired-claim';
import { AgentSandboxApi } from './desired-claim';
import type { PodManifest, PodSpecManifest } from './desired-pod';
import {
  fieldAt,
  isPodSpecManifest,
  isReconcilableConversation,
  readClaim,
  readPod,
  readSandbox,
  readWarmPool,
} from './read-objects';
import type { ObservedClaim, ObservedPod, ObservedSandbox } from './snapshot';

/** What the reconciler reads and writes. Reads return undefined for NotFound. */
export interface ConversationKube {
  getConversation(namespace: string, name: string): Promise<Conversation | undefined>;
  getClaim(namespace: string, name: string): Promise<ObservedClaim | undefined>;
  getSandbox(namespace: string, name: string): Promise<ObservedSandbox | undefined>;
  getPod(namespace: string, name: string): Promise<ObservedPod | undefined>;
  getWarmPool(namespace: string, name: string): Promise<{ templateName?: string } | undefined>;
  hasSandboxTemplate(namespace: string, name: string): Promise<boolean>;
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

/** HTTP status of a client-node API error, or undefined for anything else. */
export function apiStatusCode(err: unknown): number | undefined {
  return err instanceof ApiException && typeof err.code === 'number' ? err.code : undefined;
}

/** The Status message of an API error, else the error's message. */
export function apiErrorMessage(err: unknown): string {
  if (err instanceof ApiException) {
    const body: unknown = err.body;
    const parsed: unknown = typeof body === 'string' ? safeParse(body) : body;
    const message = fieldAt(parsed, 'message');
    if (typeof message === 'string') return `${err.code}: ${message}`;
    return `HTTP ${err.code}`;
  }
  return err instanceof Error ? err.message : String(err);
}

/**
 * The Status fields of a failed call, for `classifyCreateFailure`: `code` and
 * `reason` from the Status body (the code falls back to the HTTP status), `message` as
 * {@link apiErrorMessage} gives it without the code prefix.
 */
export function apiFailureOf(err: unknown): ApiFailure {
  if (err instanceof ApiException) {
    const body: unknown = err.body;
    const parsed: unknown = typeof body === 'string' ? safeParse(body) : body;
    const code = fieldAt(parsed, 'code');
    const reason = fieldAt(parsed, 'reason');
    const message = fieldAt(parsed, 'message');
    return {
      ...(typeof code === 'number'
        ? { code }
        : typeof err.code === 'number'
          ? { code: err.code }
          : {}),
      ...(typeof reason === 'string' && reason !== '' ? { reason } : {}),
      message: typeof message === 'string' ? message : `HTTP ${err.code}`,
    };
  }
  return { message: err instanceof Error ? err.message : String(err) };
}

function safeParse(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

async function orUndefinedIfNotFound<T>(read: () => Promise<T>): Promise<T | undefined> {
  try {
    return await read();
  } catch (err: unknown) {
    if (apiStatusCode(err) === 404) return undefined;
    throw err;
  }
}

async function ignoring(codes: readonly number[], write: () => Promise<unknown>): Promise<void> {
  try {
    await write();
  } catch (err: unknown) {
    const code = apiStatusCode(err);
    if (code !== undefined && codes.includes(code)) return;
    throw err;
  }
}

/** Wire JSON of a typed client-node object (Dates become RFC 3339 strings). */
function toWire(value: unknown): unknown {
  return JSON.parse(JSON.stringify(value));
}

const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

/** The {@link ConversationKube} for a cluster. */
export function createConversationKube(kc: KubeConfig): ConversationKube {
  const objects = kc.makeApiClient(CustomObjectsApi);
  const core = kc.makeApiClient(CoreV1Api);
  const conv = {
    group: ConversationResource.group,
    version: ConversationResource.version,
    plural: ConversationResource.plural,
  };
  const ext = { group: AgentSandboxApi.extensionsGroup, version: AgentSandboxApi.version };
  const target = (c: Conversation): { namespace: string; name: string } => ({
    namespace: c.metadata.namespace ?? '',
    name: c.metadata.name ?? '',
  });
  const patchFinalizers = (c: Conversation, finalizers: string[]): Promise<unknown> =>
    objects.patchNamespacedCustomObject(
      {
        ...conv,
        ...target(c),
        body: { metadata: { resourceVersion: c.metadata.resourceVersion, finalizers } },
        fieldManager: FIELD_MANAGER,
      },
      mergePatch,
    );

  return {
    async getConversation(namespace, name) {
      const raw: unknown = await orUndefinedIfNotFound(() =>
        objects.getNamespacedCustomObject({ ...conv, namespace, name }),
      );
      if (raw === undefined) return undefined;
      if (!isReconcilableConversation(raw)) {
        throw new AppError(
          'failed_precondition',
          `Conversation ${namespace}/${name} does not match the polychrome.dev/v1alpha1 schema; fix or delete it`,
          { details: { namespace, conversation: name } },
        );
      }
      return raw;
    },
    async getClaim(namespace, name) {
      const raw: unknown = await orUndefinedIfNotFound(() =>
        objects.getNamespacedCustomObject({
          ...ext,
          plural: AgentSandboxApi.claimPlural,
          namespace,
          name,
        }),
      );
      return raw === undefined ? undefined : readClaim(raw);
    },
    async getSandbox(namespace, name) {
      const raw: unknown = await orUndefinedIfNotFound(() =>
        objects.getNamespacedCustomObject({
          group: AgentSandboxApi.coreGroup,
          version: AgentSandboxApi.version,
          plural: AgentSandboxApi.sandboxPlural,
          namespace,
          name,
        }),
      );
      return raw === undefined ? undefined : readSandbox(raw);
    },
    async getPod(namespace, name) {
      const pod = await orUndefinedIfNotFound(() => core.readNamespacedPod({ namespace, name }));
      return pod === undefined ? undefined : readPod(toWire(pod));
    },
    async getWarmPool(namespace, name) {
      const raw: unknown = await orUndefinedIfNotFound(() =>
        objects.getNamespacedCustomObject({
          ...ext,
          plural: AgentSandboxApi.warmPoolPlural,
          namespace,
          name,
        }),
      );
      return raw === undefined ? undefined : readWarmPool(raw);
    },
    async hasSandboxTemplate(namespace, name) {
      const raw: unknown = await orUndefinedIfNotFound(() =>
        objects.getNamespacedCustomObject({
          ...ext,
          plural: AgentSandboxApi.templatePlural,
          namespace,
          name,
        }),
      );
      return raw !== undefined;
    },
    async getPodTemplateSpec(namespace, name) {
      const template = await orUndefinedIfNotFound(() =>
        core.readNamespacedPodTemplate({ namespace, name }),
      );
      if (template === undefined) return undefined;
      const spec = fieldAt(toWire(template), 'template', 'spec');
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
      await patchFinalizers(c, [...(c.metadata.finalizers ?? []), CONVERSATION_FINALIZER]);
    },
    async removeFinalizer(c) {
      await ignoring([404], () =>
        patchFinalizers(
          c,
          (c.metadata.finalizers ?? []).filter((f) => f !== CONVERSATION_FINALIZER),
        ),
      );
    },
    async createClaim(claim) {
      await ignoring([409], () =>
        objects.createNamespacedCustomObject({
          ...ext,
          plural: AgentSandboxApi.claimPlural,
          namespace: claim.metadata.namespace,
          body: claim,
          fieldManager: FIELD_MANAGER,
        }),
      );
    },
    async deleteClaim(namespace, name, uid) {
      await ignoring([404, 409], () =>
        objects.deleteNamespacedCustomObject({
          ...ext,
          plural: AgentSandboxApi.claimPlural,
          namespace,
          name,
          body: { preconditions: { uid } },
        }),
      );
    },
    async createPod(pod) {
      const body: V1Pod = pod;
      await core.createNamespacedPod({
        namespace: pod.metadata.namespace,
        body,
        fieldManager: FIELD_MANAGER,
      });
    },
    async deletePod(namespace, name, uid) {
      await ignoring([404, 409], () =>
        core.deleteNamespacedPod({ namespace, name, body: { preconditions: { uid } } }),
      );
    },
    async deleteConversation(c) {
      await ignoring([404, 409], () =>
        objects.deleteNamespacedCustomObject({
          ...conv,
          ...target(c),
          body: { preconditions: { uid: c.metadata.uid } },
        }),
      );
    },
    async replaceStatus(c, status) {
      await objects.replaceNamespacedCustomObjectStatus({
        ...conv,
        ...target(c),
        body: {
          apiVersion: c.apiVersion,
          kind: c.kind,
          metadata: { ...c.metadata },
          spec: c.spec,
          status,
        },
        fieldManager: FIELD_MANAGER,
      });
    },
  };
}
