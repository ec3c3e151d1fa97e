/**
 * The Conversation controller: watches Conversations and the children that report on
 * them (SandboxClaims, Sandboxes, our plain pods), turns every event into the owning
 * Conversation's key, and runs {@link ConversationReconciler} passes from a work queue
 * (one pass per key at a time, backoff on errors, timed requeues for idle and retention
 * deadlines, a periodic resync). Passes read from the watches' caches (`cached-reads.ts`)
 * with our own recent writes laid over them (`recent-writes.ts`); docs/operator.md, Scale.
 *
 * Built on @kubernetes/client-node 1.x `makeInformer` (list + watch with resourceVersion
 * and 410 handling), not on @dot-i/k8s-operator: docs/operator.md says why.
 */
import { CoreV1Api, CustomObjectsApi, makeInformer } from '@kubernetes/client-node';
import type {
  Informer,
  KubernetesListObject,
  KubernetesObject,
  ObjectCache,
} from '@kubernetes/client-node';
import { hostname } from 'node:os';
import type { Logger } from 'pino';
import { ConversationResource } from '../api/v1alpha1/conversation-types';
import { LogComponent } from '../../common/log';
import type { CacheSource } from './cached-reads';
import { CachedReader } from './cached-reads';
import { ChildLabel, SANDBOX_POD_LABEL } from './child-meta';
import { systemClock } from './clock';
import { ConversationEvents } from './conversation-events';
import { ConversationReconciler } from './conversation-reconciler';
import { EventRecorder } from './event-recorder';
import { AgentSandboxApi } from './agent-sandbox-api';
import { ObjectKind, createKubeApi } from './kube-api';
import { apiErrorMessage } from './kube-api-errors';
import { conversationKube } from './kube-client';
import { makeKeepAliveApiClient } from './keep-alive-client';
import { staleReadRecheckMs } from './plan';
import { RecentWrites } from './recent-writes';
import { isObjectList, ownerKeys } from './watch-keys';
import { WorkQueue } from './work-queue';
import {
  DEFAULT_WORKERS,
  type ConversationControllerOptions,
  type Ownership,
  type PassOutcome,
} from './controller-options';
import { tracedPass } from './reconcile-span';

/** Delay before an informer that stopped on an error lists and watches again. */
const INFORMER_RESTART_MS = { first: 500, max: 30_000 } as const;

/** An informer and whether its cache can be read (listed, watching, no error since). */
interface Watched {
  readonly what: string;
  readonly informer: Informer<KubernetesObject> & ObjectCache<KubernetesObject>;
  synced: boolean;
  errors: number;
}

/** Watches, queues and reconciles Conversations. `start()` once; `close()` is idempotent. */
export class ConversationController {
  private readonly queue: WorkQueue;
  private readonly reconciler: ConversationReconciler;
  private readonly log: Logger;
  private readonly recent = new RecentWrites();
  private readonly recorder: EventRecorder | undefined;
  private readonly events: ConversationEvents | undefined;
  private readonly caches = new Map<ObjectKind, CacheSource>();
  private readonly informers: Watched[] = [];
  private conversations: ObjectCache<KubernetesObject> | undefined;
  private readonly workerLoops: Promise<void>[] = [];
  private resyncTimer: NodeJS.Timeout | undefined;
  private closed = false;
  private started = false;

  constructor(private readonly options: ConversationControllerOptions) {
    this.log = options.logger.child({ component: LogComponent.Reconciler });
    this.queue = new WorkQueue({
      ...(options.baseDelayMs === undefined ? {} : { baseDelayMs: options.baseDelayMs }),
      ...(options.maxDelayMs === undefined ? {} : { maxDelayMs: options.maxDelayMs }),
    });
    const api = createKubeApi(options.kubeConfig);
    const reader = new CachedReader({
      live: api,
      caches: this.caches,
      recent: this.recent,
      ...(options.sharedReadTtlMs === undefined ? {} : { sharedTtlMs: options.sharedReadTtlMs }),
    });
    if (options.events !== false) {
      const { reportingInstance = hostname(), onWrite } = options.events ?? {};
      this.recorder = new EventRecorder({
        kubeConfig: options.kubeConfig,
        logger: this.log,
        reportingInstance,
        ...(onWrite === undefined ? {} : { onWrite }),
      });
      this.events = new ConversationEvents(this.recorder);
    }
    this.reconciler = new ConversationReconciler({
      kube: options.kube ?? conversationKube(api, reader, this.recent),
      clock: options.clock ?? systemClock,
      logger: options.logger,
      ...(options.harnessImage === undefined ? {} : { harnessImage: options.harnessImage }),
      ...(options.blockedRecheckMs === undefined
        ? {}
        : { blockedRecheckMs: options.blockedRecheckMs }),
      ...(options.sharedReadTtlMs === undefined
        ? {}
        : { staleReadRecheckMs: staleReadRecheckMs(options.sharedReadTtlMs) }),
      ...(this.events === undefined ? {} : { events: this.events }),
      ...(options.beforeFinalizerRemoved === undefined
        ? {}
        : { beforeFinalizerRemoved: options.beforeFinalizerRemoved }),
    });
  }

  /**
   * Starts the watches and then the workers. Resolves once every informer has listed and
   * begun to watch (or failed to, and will retry) and the workers run; events then flow
   * until {@link close}.
   *
   * @throws nothing: a watch that fails to list or watch is logged and restarted with a
   *   backoff, so the controller also starts before agent-sandbox's CRDs are installed.
   */
  async start(): Promise<void> {
    if (this.started) return;
    this.started = true;
    const kc = this.options.kubeConfig;
    const ns = this.options.namespace;
    const objects = makeKeepAliveApiClient(kc, CustomObjectsApi);
    const core = makeKeepAliveApiClient(kc, CoreV1Api);
    const customPath = (group: string, version: string, plural: string): string =>
      ns === undefined
        ? `/apis/${group}/${version}/${plural}`
        : `/apis/${group}/${version}/namespaces/${ns}/${plural}`;
    const listCustom =
      (group: string, version: string, plural: string) =>
      async (): Promise<KubernetesListObject<KubernetesObject>> => {
        const raw: unknown =
          ns === undefined
            ? await objects.listClusterCustomObject({ group, version, plural })
            : await objects.listNamespacedCustomObject({ group, version, plural, namespace: ns });
        if (!isObjectList(raw)) throw new Error(`listing ${plural} returned something else`);
        return raw;
      };

    const { group, version, plural } = ConversationResource;
    const conversations = this.watch(
      'conversations',
      ObjectKind.Conversation,
      customPath(group, version, plural),
      listCustom(group, version, plural),
      (obj) => {
        const name = obj.metadata?.name;
        const namespace = obj.metadata?.namespace;
        if (namespace !== undefined) this.options.onConversationNamespace?.(namespace);
        return name === undefined || namespace === undefined ? [] : [`${namespace}/${name}`];
      },
    );
    this.conversations = conversations.informer;
    conversations.informer.on('delete', (obj) => this.deleted(obj));
    this.caches.set(ObjectKind.Conversation, cacheOf(conversations));

    const podsPath = ns === undefined ? '/api/v1/pods' : `/api/v1/namespaces/${ns}/pods`;
    const listPods = (labelSelector: string) => async () =>
      ns === undefined
        ? core.listPodForAllNamespaces({ labelSelector })
        : core.listNamespacedPod({ namespace: ns, labelSelector });
    const podSelector = ChildLabel.ConversationUid;
    const pods = [
      this.watch(
        'pods',
        ObjectKind.Pod,
        podsPath,
        listPods(podSelector),
        (obj) => ownerKeys(obj, ConversationResource.kind),
        podSelector,
      ),
    ];

    if (this.options.agentSandbox ?? true) {
      const ext = AgentSandboxApi.extensionsGroup;
      const v = AgentSandboxApi.version;
      const claims = this.watch(
        'sandboxclaims',
        ObjectKind.Claim,
        customPath(ext, v, AgentSandboxApi.claimPlural),
        listCustom(ext, v, AgentSandboxApi.claimPlural),
        (obj) => ownerKeys(obj, ConversationResource.kind),
      );
      // A Sandbox is owned by its claim, and the claim is named after its Conversation.
      const sandboxes = this.watch(
        'sandboxes',
        ObjectKind.Sandbox,
        customPath(AgentSandboxApi.coreGroup, v, AgentSandboxApi.sandboxPlural),
        listCustom(AgentSandboxApi.coreGroup, v, AgentSandboxApi.sandboxPlural),
        (obj) => ownerKeys(obj, 'SandboxClaim'),
      );
      this.caches.set(ObjectKind.Claim, cacheOf(claims));
      this.caches.set(ObjectKind.Sandbox, cacheOf(sandboxes));
      // agent-sandbox's pods (not labelled by us): read for their IP only. Their changes
      // reach us through the Sandbox's status, so they queue nothing.
      pods.push(
        this.watch(
          'sandbox pods',
          ObjectKind.Pod,
          podsPath,
          listPods(SANDBOX_POD_LABEL),
          () => [],
          SANDBOX_POD_LABEL,
        ),
      );
    }
    this.caches.set(ObjectKind.Pod, cacheOf(...pods));

    // Workers start once the caches are filled (client-go's WaitForCacheSync): the keys
    // the initial lists queue wait until then, so their first passes read the caches, not
    // the API. A watch that failed to start leaves its kind to GETs until it restarts.
    await Promise.all(this.informers.map((watched) => this.startInformer(watched)));
    if (this.closed) return;
    const workers = Math.max(1, this.options.workers ?? DEFAULT_WORKERS);
    for (let i = 0; i < workers; i++) this.workerLoops.push(this.work());
    const resyncMs = this.options.resyncMs ?? 600_000;
    this.resyncTimer = setInterval(() => this.resync(), resyncMs);
    this.resyncTimer.unref();
  }

  /** Queues one Conversation now (e.g. after the turn code changed something, or in tests). */
  enqueue(namespace: string, name: string): void {
    this.queue.add(`${namespace}/${name}`);
  }

  /** Queues every Conversation the watch knows. */
  resync(): void {
    for (const obj of this.conversations?.list() ?? []) {
      const { name, namespace } = obj.metadata ?? {};
      if (name !== undefined && namespace !== undefined) this.enqueue(namespace, name);
    }
  }

  /** Stops the watches and workers; waits for passes in progress. Idempotent. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.resyncTimer !== undefined) clearInterval(this.resyncTimer);
    this.queue.shutDown();
    await Promise.all(this.informers.map((watched) => watched.informer.stop()));
    await Promise.all(this.workerLoops);
    await this.recorder?.close();
  }

  /** Resolves once the Event writes queued so far are done (tests). */
  async eventsSettled(): Promise<void> {
    await this.recorder?.settled();
  }

  private watch(
    what: string,
    kind: ObjectKind,
    path: string,
    list: () => Promise<KubernetesListObject<KubernetesObject>>,
    keysOf: (obj: KubernetesObject) => string[],
    labelSelector?: string,
  ): Watched {
    const informer = makeInformer(this.options.kubeConfig, path, list, labelSelector);
    const watched: Watched = { what, informer, synced: false, errors: 0 };
    const onEvent = (deleted: boolean) => (obj: KubernetesObject) => {
      // The echo of our own write to a Conversation changes nothing the pass that wrote
      // it did not already know: no pass for it.
      const ownEcho = this.recent.observe(kind, obj, deleted);
      if (ownEcho && kind === ObjectKind.Conversation) return;
      for (const key of keysOf(obj)) this.queue.add(key);
    };
    informer.on('add', onEvent(false));
    informer.on('update', onEvent(false));
    informer.on('delete', onEvent(true));
    let delay: number = INFORMER_RESTART_MS.first;
    informer.on('connect', () => {
      delay = INFORMER_RESTART_MS.first;
    });
    // The informer stops on an error; list and watch again after a backoff. Until then
    // its kind is read with GETs.
    informer.on('error', (err: unknown) => {
      watched.synced = false;
      watched.errors += 1;
      if (this.closed) return;
      this.log.warn({ watch: what, err: apiErrorMessage(err), retryMs: delay }, 'watch failed');
      const timer = setTimeout(() => void this.startInformer(watched), delay);
      timer.unref();
      delay = Math.min(delay * 2, INFORMER_RESTART_MS.max);
    });
    this.informers.push(watched);
    return watched;
  }

  private async startInformer(watched: Watched): Promise<void> {
    if (this.closed) return;
    const errorsBefore = watched.errors;
    try {
      await watched.informer.start();
      // start() resolves after the list and the start of the watch; a failure of either
      // was reported through 'error' before it resolved.
      if (watched.errors === errorsBefore) watched.synced = true;
    } catch (err: unknown) {
      this.log.warn({ watch: watched.what, err: apiErrorMessage(err) }, 'watch did not start');
    }
  }

  /** Conversations the watch knows, for status gauges. */
  knownConversations(): readonly KubernetesObject[] {
    return this.conversations?.list() ?? [];
  }

  /** One Conversation of the informer cache, if the cache has it. */
  knownConversation(namespace: string, name: string): KubernetesObject | undefined {
    return this.conversations?.get(name, namespace);
  }

  private deleted(obj: KubernetesObject): void {
    const { namespace, name, uid } = obj.metadata ?? {};
    const hook = this.options.afterDeleted;
    if (hook === undefined || namespace === undefined || name === undefined || uid === undefined)
      return;
    hook({ namespace, name, uid }).catch((err: unknown) => {
      this.log.warn(
        { namespace, conversation: name, uid, err: apiErrorMessage(err) },
        'cleaning up after a deleted Conversation failed',
      );
    });
  }

  private async checkOwnership(namespace: string, name: string): Promise<Ownership> {
    const check = this.options.ownership;
    if (check === undefined) return { owned: true };
    const uid = this.conversations?.get(name, namespace)?.metadata?.uid;
    // Not in the cache (deleted, or not seen yet): the pass only reads and finds nothing.
    if (uid === undefined) return { owned: true };
    return check({ namespace, name, uid });
  }

  private async work(): Promise<void> {
    for (;;) {
      const key = await this.queue.get();
      if (key === undefined) return;
      const slash = key.indexOf('/');
      const namespace = key.slice(0, slash);
      const name = key.slice(slash + 1);
      const started = Date.now();
      const report = (result: PassOutcome['result']): void =>
        this.options.onPass?.({ result, durationMs: Date.now() - started });
      try {
        const ownership = await this.checkOwnership(namespace, name);
        if (!ownership.owned) {
          // Another replica records this conversation's Events now.
          this.events?.forget(namespace, name);
          this.queue.forget(key);
          this.queue.addAfter(key, ownership.retryAfterMs);
          report('not_owned');
          continue;
        }
        const result = await tracedPass(
          namespace,
          name,
          this.knownConversation(namespace, name),
          () => this.reconciler.reconcile(namespace, name),
        );
        this.queue.forget(key);
        if (result.requeueAfterMs !== undefined) this.queue.addAfter(key, result.requeueAfterMs);
        report('success');
      } catch (err: unknown) {
        const retryMs = this.queue.addRateLimited(key);
        this.log.warn(
          { namespace, conversation: name, err: apiErrorMessage(err), retryMs },
          'reconcile failed',
        );
        report('error');
      } finally {
        this.queue.done(key);
      }
    }
  }
}

/** The cache of one or more informers of a kind, searched in order. */
function cacheOf(...sources: readonly Watched[]): CacheSource {
  return {
    get(name, namespace) {
      for (const source of sources) {
        const obj = source.informer.get(name, namespace);
        if (obj !== undefined) return obj;
      }
      return undefined;
    },
    synced: () => sources.every((source) => source.synced),
  };
}
