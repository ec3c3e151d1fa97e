/**
 * The raw Kubernetes calls of the Conversation reconciler, over @kubernetes/client-node 1.x
 * (STYLE.md §11). Custom resources go through CustomObjectsApi, which sends and returns raw
 * JSON. Pods and PodTemplates go through CoreV1Api, whose ObjectSerializer drops keys it
 * does not know: our pod manifests use only core/v1 field names, and what we read is turned
 * back into wire JSON before anything looks at it.
 */
import {
  CoreV1Api,
  CustomObjectsApi,
  PatchStrategy,
  setHeaderOptions,
} from '@kubernetes/client-node';
import type { KubeConfig, V1Pod } from '@kubernetes/client-node';
import type { ConversationStatus } from '../api/v1alpha1/conversation-status';
import type { Conversation } from '../api/v1alpha1/conversation-types';
import { ConversationResource } from '../api/v1alpha1/conversation-types';
import type { SandboxClaimManifest } from './agent-sandbox-api';
import { AgentSandboxApi } from './agent-sandbox-api';
import { FIELD_MANAGER } from './child-meta';
import type { PodManifest } from './desired-pod';
import { makeKeepAliveApiClient } from './keep-alive-client';
import { apiStatusCode, ignoringStatus } from './kube-api-errors';

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

async function orUndefinedIfNotFound<T>(read: () => Promise<T>): Promise<T | undefined> {
  try {
    return await read();
  } catch (err: unknown) {
    if (apiStatusCode(err) === 404) return undefined;
    throw err;
  }
}

/** Wire JSON of a typed client-node object (Dates become RFC 3339 strings). */
function toWire(value: unknown): unknown {
  return JSON.parse(JSON.stringify(value));
}

const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

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
      return ignoringStatus([404, 409], async (): Promise<unknown> => {
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
