/**
 * What the turn code reads and writes of Conversation objects: lookups by uid from the
 * reconciler's informer cache, status writes (read-modify-write on a fresh copy, retried
 * on conflict), creating a conversation for the API, and waiting until its sandbox runs.
 */
import {
  ApiException,
  CustomObjectsApi,
  type KubeConfig,
  type KubernetesObject,
} from '@kubernetes/client-node';
import { AppError } from '../../common/errors';
import { makeKeepAliveApiClient } from '../controller/keep-alive-client';
import { ConditionType } from '../api/v1alpha1/conditions';
import { ConversationResource, type Conversation } from '../api/v1alpha1/conversation-types';
import { type ConversationSpec } from '../api/v1alpha1/conversation-spec';
import { type ConversationStatus } from '../api/v1alpha1/conversation-status';

export interface ConversationAccessOptions {
  readonly kubeConfig: KubeConfig;
  /** The informer cache's objects (the reconciler's view). */
  readonly cached: () => readonly KubernetesObject[];
  /** One object of that cache by namespace and name (no copy of the whole cache). */
  readonly cachedByName: (namespace: string, name: string) => KubernetesObject | undefined;
  /** Where and how the API creates a conversation when none is named. */
  readonly newConversation: { readonly namespace: string; readonly spec: ConversationSpec };
  /** How often waits look at the cache. @default 100 */
  readonly pollMs?: number;
}

const group = ConversationResource.group;
const version = ConversationResource.version;
const plural = ConversationResource.plural;

/**
 * What the turn coordinator uses of Conversation objects ({@link ConversationAccess} in
 * production): lookups by uid, status writes on a fresh copy, creation, the sandbox wait.
 */
export interface ConversationStore {
  /** The Conversation with this uid, if it exists. */
  byUid(uid: string): Conversation | undefined;
  /**
   * Writes `next(fresh)` as the status of a fresh copy of the object.
   *
   * @throws AppError `not_found` when the object is gone (or was created again).
   */
  updateStatus(
    conversation: Conversation,
    next: (current: Conversation) => ConversationStatus,
  ): Promise<Conversation>;
  /** Creates a conversation from the deployment's default spec, owned by `owner`. */
  create(owner: string, signal: AbortSignal): Promise<Conversation>;
  /**
   * The harness endpoint once the conversation's sandbox is Ready.
   *
   * @throws AppError `unavailable` after `timeoutMs`; `cancelled` when `signal` aborts.
   */
  waitForSandbox(uid: string, timeoutMs: number, signal: AbortSignal): Promise<string>;
}

export class ConversationAccess implements ConversationStore {
  private readonly api: CustomObjectsApi;
  /** Where each uid was last found, so a lookup is one cache get, not a scan. */
  private readonly names = new Map<string, { namespace: string; name: string }>();

  constructor(private readonly options: ConversationAccessOptions) {
    this.api = makeKeepAliveApiClient(options.kubeConfig, CustomObjectsApi);
  }

  /** The cached Conversation with this uid. */
  byUid(uid: string): Conversation | undefined {
    const known = this.names.get(uid);
    if (known !== undefined) {
      const obj = this.options.cachedByName(known.namespace, known.name);
      if (obj?.metadata?.uid === uid) return obj as unknown as Conversation;
      // Deleted, or the name reused by another object: look again.
      this.names.delete(uid);
    }
    for (const obj of this.options.cached()) {
      if (obj.metadata?.uid === uid) {
        this.names.set(uid, {
          namespace: obj.metadata.namespace ?? '',
          name: obj.metadata.name ?? '',
        });
        return obj as unknown as Conversation;
      }
    }
    return undefined;
  }

  /**
   * Rewrites the status from a fresh copy (so reconciler fields are never rolled back),
   * retrying when the object changed in between.
   *
   * @throws AppError `not_found` when the object is gone; ApiException otherwise.
   */
  async updateStatus(
    conversation: Conversation,
    next: (current: Conversation) => ConversationStatus,
  ): Promise<Conversation> {
    const namespace = conversation.metadata.namespace ?? '';
    const name = conversation.metadata.name ?? '';
    for (let attempt = 1; ; attempt += 1) {
      // The cached copy first (its resourceVersion guards the write); a conflict reads it.
      let fresh: Conversation;
      const cached = attempt === 1 ? this.byUid(conversation.metadata.uid ?? '') : undefined;
      try {
        fresh =
          cached ??
          ((await this.api.getNamespacedCustomObject({
            group,
            version,
            namespace,
            plural,
            name,
          })) as Conversation);
      } catch (error) {
        if (isStatus(error, 404)) {
          throw new AppError('not_found', `conversation ${namespace}/${name} no longer exists`);
        }
        throw error;
      }
      if (fresh.metadata.uid !== conversation.metadata.uid) {
        throw new AppError(
          'not_found',
          `conversation ${namespace}/${name} was deleted and created again`,
        );
      }
      try {
        return (await this.api.replaceNamespacedCustomObjectStatus({
          group,
          version,
          namespace,
          plural,
          name,
          body: { ...fresh, status: next(fresh) },
        })) as Conversation;
      } catch (error) {
        if (isStatus(error, 409) && attempt < 8) continue;
        throw error;
      }
    }
  }

  /**
   * Creates a conversation from the deployment's default spec, owned by `owner`, and
   * waits until the reconciler's cache has it.
   */
  async create(owner: string, signal: AbortSignal): Promise<Conversation> {
    const { namespace, spec } = this.options.newConversation;
    let created: Conversation;
    try {
      created = (await this.api.createNamespacedCustomObject({
        group,
        version,
        namespace,
        plural,
        body: {
          apiVersion: ConversationResource.apiVersion,
          kind: ConversationResource.kind,
          metadata: { generateName: 'conv-', namespace },
          spec: { ...spec, owner },
        },
      })) as Conversation;
    } catch (error) {
      throw createFailure(error, namespace);
    }
    const uid = created.metadata.uid ?? '';
    await this.waitFor(
      () => this.byUid(uid) !== undefined,
      10_000,
      signal,
      () => `conversation ${namespace}/${created.metadata.name ?? ''} did not reach the cache`,
    );
    return this.byUid(uid) ?? created;
  }

  /**
   * Waits until the conversation's sandbox is Ready and returns the harness endpoint.
   *
   * @throws AppError `unavailable` after `timeoutMs`, naming what the status says.
   */
  async waitForSandbox(uid: string, timeoutMs: number, signal: AbortSignal): Promise<string> {
    let endpoint: string | undefined;
    let last = 'the conversation is not in the cache';
    await this.waitFor(
      () => {
        const conversation = this.byUid(uid);
        if (conversation === undefined) return false;
        const ready = conversation.status?.conditions?.find((c) => c.type === ConditionType.Ready);
        last =
          ready === undefined
            ? 'no Ready condition yet'
            : `Ready ${ready.status}: ${ready.message}`;
        endpoint = conversation.status?.sandbox?.endpoint;
        return ready?.status === 'True' && endpoint !== undefined && endpoint !== '';
      },
      timeoutMs,
      signal,
      () =>
        `the conversation's harness is not ready after ${String(timeoutMs)} ms (${last}); the turn is kept and resumes when you post again with the same idempotency key`,
    );
    return endpoint ?? '';
  }

  private async waitFor(
    done: () => boolean,
    timeoutMs: number,
    signal: AbortSignal,
    message: () => string,
  ): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    const pollMs = this.options.pollMs ?? 100;
    while (!done()) {
      if (signal.aborted)
        throw new AppError('cancelled', 'stopped waiting: the turn was cancelled');
      if (Date.now() >= deadline) throw new AppError('unavailable', message());
      await new Promise((resolve) => setTimeout(resolve, pollMs));
    }
  }
}

/** Why the API server refused to create a conversation, for the client and the log. */
function createFailure(error: unknown, namespace: string): unknown {
  if (!(error instanceof ApiException)) return error;
  const message = apiMessage(error);
  if (error.code === 422 || error.code === 400) {
    return new AppError(
      'failed_precondition',
      `the deployment's default conversation (POLYCHROME_NEW_CONVERSATION_SPEC) is refused by the API server: ${message}; an operator must fix that setting`,
      { cause: error },
    );
  }
  if (error.code === 403) {
    return new AppError(
      'internal',
      `the control plane may not create Conversations in namespace ${namespace} (RBAC: conversations create): ${message}`,
      { cause: error },
    );
  }
  return error;
}

function apiMessage(error: ApiException<unknown>): string {
  const body: unknown = error.body;
  if (typeof body === 'string') {
    try {
      const parsed: unknown = JSON.parse(body);
      const message: unknown =
        typeof parsed === 'object' && parsed !== null ? Reflect.get(parsed, 'message') : undefined;
      if (typeof message === 'string') return message;
    } catch {
      return body;
    }
  }
  return error.message;
}

function isStatus(error: unknown, code: number): boolean {
  return error instanceof ApiException && error.code === code;
}
