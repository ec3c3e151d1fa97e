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
  ServerConfiguration,
  createConfiguration,
  setHeaderOptions,
} from '@kubernetes/client-node';
import type {
  Configuration,
  KubeConfig,
  RequestContext,
  SecurityAuthentication,
  V1Pod,
} from '@kubernetes/client-node';
import { Agent as HttpAgent } from 'node:http';
import { Agent as HttpsAgent } from 'node:https';
import type { Conversation, ConversationStatus } from '../api/v1alpha1';
import { ConversationResource } from '../api/v1alpha1';
import { AppError } from '../../common/errors';
import type { ApiFailure } from './classify-create-failure';
import { CONVERSATION_FINALIZER, FIELD_MANAGER } from './child-meta';
import type { SandboxClaimManifest } from './agent-sandbox-api';
import { AgentSandboxApi } from './agent-sandbox-api';
import type { PodManifest, PodSpecManifest } from './desired-pod';
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

/** The kinds of object the reconciler reads. */
export const ObjectKind = {
  Conversation: 'conversation',
  Claim: 'claim',
  Sandbox: 'sandbox',
  Pod: 'pod',
  WarmPool: 'warmpool',
  SandboxTemplate: 'sandboxtemplate',
  PodTemplate: 'podtemplate',
} as const;
export type ObjectKind = (typeof ObjectKind)[keyof typeof ObjectKind];

/** Reads one object as wire JSON; undefined for NotFound. */
export interface ObjectReader {
  get(kind: ObjectKind, namespace: string, name: string): Promise<unknown>;
}

/**
 * The raw API calls behind {@link ConversationKube}: wire JSON in and out, every failure
 * thrown (AlreadyExists included), except that deletes treat NotFound and a uid
 * precondition mismatch (409) as done and return undefined.
 */
export interface KubeApi extends ObjectReader {
  /** The created claim. */
  createClaim(claim: SandboxClaimManifest): Promise<unknown>;
  /** The created pod. */
  createPod(pod: PodManifest): Promise<unknown>;
  /** The object as the delete left it, or undefined when it was already gone. */
  remove(
    kind: typeof ObjectKind.Claim | typeof ObjectKind.Pod | typeof ObjectKind.Conversation,
    namespace: string,
    name: string,
    uid: string,
  ): Promise<unknown>;
  /** Merge-patches `metadata.finalizers`, guarded by the resourceVersion; the patched object. */
  patchFinalizers(conversation: Conversation, finalizers: string[]): Promise<unknown>;
  /** The object after the status write. */
  replaceStatus(conversation: Conversation, status: ConversationStatus): Promise<unknown>;
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

async function ignoring(codes: readonly number[], write: () => Promise<unknown>): Promise<unknown> {
  try {
    return await write();
  } catch (err: unknown) {
    const code = apiStatusCode(err);
    if (code !== undefined && codes.includes(code)) return undefined;
    throw err;
  }
}

/** Wire JSON of a typed client-node object (Dates become RFC 3339 strings). */
function toWire(value: unknown): unknown {
  return JSON.parse(JSON.stringify(value));
}

const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

/**
 * How long a pooled connection to kube-apiserver may sit idle before this side closes it.
 * kube-apiserver closes a connection idle for 90 s (its http.Server IdleTimeout) and sends
 * no `Keep-Alive: timeout` hint that Node's agent would follow. A request written to a
 * connection at the moment the server closes it fails ("socket hang up", ECONNRESET), and
 * nothing resends it: node-fetch does not retry, and a POST must not be resent blindly.
 * Closing an idle connection first, well inside the server's timeout, leaves no such window.
 */
export const KUBE_IDLE_SOCKET_MS = 60_000;

/**
 * An API client whose requests share one keep-alive connection pool. client-node 1.x
 * builds a new https.Agent for every request, so each call would open (and TLS-handshake)
 * a connection of its own. Headers (a bearer token, re-read as the kubeconfig says) are
 * still applied to every request; the TLS settings (CA, client certificate) are those of
 * the first request, for the life of the client. A pooled connection idle for
 * `idleSocketMs` ({@link KUBE_IDLE_SOCKET_MS} unless given) is closed by this side.
 */
export function makeKeepAliveApiClient<T>(
  kc: KubeConfig,
  apiClientType: new (config: Configuration) => T,
  options: { idleSocketMs?: number } = {},
): T {
  // Node's agent sets this as the socket timeout and destroys a pooled socket that times
  // out while free; on a socket in use it only emits 'timeout', which nothing here acts on.
  const timeout = options.idleSocketMs ?? KUBE_IDLE_SOCKET_MS;
  const cluster = kc.getCurrentCluster();
  if (cluster === null) throw new AppError('failed_precondition', 'the kubeconfig has no cluster');
  let shared: HttpsAgent | HttpAgent | undefined;
  const auth: SecurityAuthentication = {
    getName: () => 'keep-alive kubeconfig',
    async applySecurityAuthentication(context: RequestContext): Promise<void> {
      await kc.applySecurityAuthentication(context);
      if (shared === undefined) {
        const fresh = context.getAgent();
        // A proxy agent is kept as client-node made it.
        if (!(fresh instanceof HttpsAgent) && !(fresh instanceof HttpAgent)) return;
        shared =
          fresh instanceof HttpsAgent
            ? new HttpsAgent({ ...fresh.options, keepAlive: true, timeout })
            : new HttpAgent({ keepAlive: true, timeout });
      }
      context.setAgent(shared);
    },
  };
  return new apiClientType(
    createConfiguration({
      baseServer: new ServerConfiguration(cluster.server, {}),
      authMethods: { default: auth },
    }),
  );
}

/** The {@link KubeApi} of a cluster. */
export function createKubeApi(kc: KubeConfig): KubeApi {
  const objects = makeKeepAliveApiClient(kc, CustomObjectsApi);
  const core = makeKeepAliveApiClient(kc, CoreV1Api);
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
  const custom = {
    [ObjectKind.Conversation]: conv,
    [ObjectKind.Claim]: { ...ext, plural: AgentSandboxApi.claimPlural },
    [ObjectKind.Sandbox]: {
      group: AgentSandboxApi.coreGroup,
      version: AgentSandboxApi.version,
      plural: AgentSandboxApi.sandboxPlural,
    },
    [ObjectKind.WarmPool]: { ...ext, plural: AgentSandboxApi.warmPoolPlural },
    [ObjectKind.SandboxTemplate]: { ...ext, plural: AgentSandboxApi.templatePlural },
  } as const;

  return {
    async get(kind, namespace, name) {
      switch (kind) {
        case ObjectKind.Pod: {
          const pod = await orUndefinedIfNotFound(() =>
            core.readNamespacedPod({ namespace, name }),
          );
          return pod === undefined ? undefined : toWire(pod);
        }
        case ObjectKind.PodTemplate: {
          const template = await orUndefinedIfNotFound(() =>
            core.readNamespacedPodTemplate({ namespace, name }),
          );
          return template === undefined ? undefined : toWire(template);
        }
        default:
          return orUndefinedIfNotFound((): Promise<unknown> =>
            objects.getNamespacedCustomObject({ ...custom[kind], namespace, name }),
          );
      }
    },
    createClaim(claim) {
      return objects.createNamespacedCustomObject({
        ...custom[ObjectKind.Claim],
        namespace: claim.metadata.namespace,
        body: claim,
        fieldManager: FIELD_MANAGER,
      });
    },
    async createPod(pod) {
      // Our pod manifests use core/v1 field names only, which the serializer keeps.
      const body: V1Pod = pod;
      return toWire(
        await core.createNamespacedPod({
          namespace: pod.metadata.namespace,
          body,
          fieldManager: FIELD_MANAGER,
        }),
      );
    },
    async remove(kind, namespace, name, uid) {
      const body = { preconditions: { uid } };
      return ignoring([404, 409], async (): Promise<unknown> => {
        if (kind === ObjectKind.Pod) {
          return toWire(await core.deleteNamespacedPod({ namespace, name, body }));
        }
        return objects.deleteNamespacedCustomObject({ ...custom[kind], namespace, name, body });
      });
    },
    patchFinalizers(c, finalizers) {
      return objects.patchNamespacedCustomObject(
        {
          ...conv,
          ...target(c),
          body: { metadata: { resourceVersion: c.metadata.resourceVersion, finalizers } },
          fieldManager: FIELD_MANAGER,
        },
        mergePatch,
      );
    },
    replaceStatus(c, status) {
      return objects.replaceNamespacedCustomObjectStatus({
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
      await ignoring([404], () =>
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
