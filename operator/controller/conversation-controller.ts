/**
 * The Conversation controller: watches Conversations and the children that report on
 * them (SandboxClaims, Sandboxes, our plain pods), turns every event into the owning
 * Conversation's key, and runs {@link ConversationReconciler} passes from a work queue
 * (one pass per key at a time, backoff on errors, timed requeues for idle and retention
 * deadlines, a periodic resync).
 *
 * Built on @kubernetes/client-node 1.x `makeInformer` (list + watch with resourceVersion
 * and 410 handling), not on @dot-i/k8s-operator: docs/operator.md says why.
 */
import { CoreV1Api, CustomObjectsApi, makeInformer } from '@kubernetes/client-node';
import type {
  Informer,
  KubeConfig,
  KubernetesListObject,
  KubernetesObject,
  ObjectCache,
} from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { ConversationResource } from '../api/v1alpha1';
import { LogComponent } from '../../common/log';
import { ChildLabel } from './child-meta';
import type { Clock } from './clock';
import { systemClock } from './clock';
import { ConversationReconciler } from './conversation-reconciler';
import { AgentSandboxApi } from './desired-claim';
import type { ConversationKube } from './kube-client';
import { apiErrorMessage, createConversationKube } from './kube-client';
import { isObjectList, ownerKeys } from './watch-keys';
import { WorkQueue } from './work-queue';

/** Options of {@link ConversationController}. */
export interface ConversationControllerOptions {
  readonly kubeConfig: KubeConfig;
  readonly logger: Logger;
  /** @default the wall clock */
  readonly clock?: Clock;
  /** Watch one namespace only (tests); @default every namespace */
  readonly namespace?: string;
  /** Concurrent passes (distinct keys). @default 2 */
  readonly workers?: number;
  /** Watch SandboxClaims and Sandboxes (agent-sandbox installed). @default true */
  readonly agentSandbox?: boolean;
  /** Image of the built-in harness pod spec. @default DEFAULT_HARNESS_IMAGE */
  readonly harnessImage?: string;
  /**
   * Delay before looking again for a missing warm pool or template, which nothing
   * watches. @default BLOCKED_RECHECK_MS (30 s)
   */
  readonly blockedRecheckMs?: number;
  /** Every Conversation is queued again this often. @default 600_000 (10 min) */
  readonly resyncMs?: number;
  /** Backoff of failed passes. @default 100 ms doubling to 60 s */
  readonly baseDelayMs?: number;
  readonly maxDelayMs?: number;
  /** Replaces the cluster adapter (tests). @default createConversationKube(kubeConfig) */
  readonly kube?: ConversationKube;
  /**
   * Decides whether this replica reconciles a Conversation now: with several replicas,
   * only the holder of the conversation's lease writes its children and status. A
   * Conversation that is not owned is queued again after `retryAfterMs`.
   * @default every Conversation is owned (one replica)
   */
  readonly ownership?: (ref: OwnedConversation) => Promise<Ownership>;
  /** Called after every pass, for metrics. */
  readonly onPass?: (outcome: PassOutcome) => void;
}

/** The Conversation an {@link ConversationControllerOptions.ownership} check is about. */
export interface OwnedConversation {
  readonly namespace: string;
  readonly name: string;
  readonly uid: string;
}

/** Whether this replica may reconcile a Conversation now. */
export type Ownership =
  { readonly owned: true } | { readonly owned: false; readonly retryAfterMs: number };

/** What one pass did, for metrics. */
export interface PassOutcome {
  readonly result: 'success' | 'error' | 'not_owned';
  readonly durationMs: number;
}

/** Delay before an informer that stopped on an error lists and watches again. */
const INFORMER_RESTART_MS = { first: 500, max: 30_000 } as const;

/** Watches, queues and reconciles Conversations. `start()` once; `close()` is idempotent. */
export class ConversationController {
  private readonly queue: WorkQueue;
  private readonly reconciler: ConversationReconciler;
  private readonly log: Logger;
  private readonly informers: Informer<KubernetesObject>[] = [];
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
    this.reconciler = new ConversationReconciler({
      kube: options.kube ?? createConversationKube(options.kubeConfig),
      clock: options.clock ?? systemClock,
      logger: options.logger,
      ...(options.harnessImage === undefined ? {} : { harnessImage: options.harnessImage }),
      ...(options.blockedRecheckMs === undefined
        ? {}
        : { blockedRecheckMs: options.blockedRecheckMs }),
    });
  }

  /**
   * Starts the watches and the workers. Resolves once every informer has begun its first
   * list; events then flow until {@link close}.
   *
   * @throws nothing: a watch that fails to list or watch is logged and restarted with a
   *   backoff, so the controller also starts before agent-sandbox's CRDs are installed.
   */
  async start(): Promise<void> {
    if (this.started) return;
    this.started = true;
    const kc = this.options.kubeConfig;
    const ns = this.options.namespace;
    const objects = kc.makeApiClient(CustomObjectsApi);
    const core = kc.makeApiClient(CoreV1Api);
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
      customPath(group, version, plural),
      listCustom(group, version, plural),
      (obj) => {
        const name = obj.metadata?.name;
        const namespace = obj.metadata?.namespace;
        return name === undefined || namespace === undefined ? [] : [`${namespace}/${name}`];
      },
    );
    this.conversations = conversations;

    const podSelector = ChildLabel.ConversationUid;
    this.watch(
      'pods',
      ns === undefined ? '/api/v1/pods' : `/api/v1/namespaces/${ns}/pods`,
      async () =>
        ns === undefined
          ? core.listPodForAllNamespaces({ labelSelector: podSelector })
          : core.listNamespacedPod({ namespace: ns, labelSelector: podSelector }),
      (obj) => ownerKeys(obj, ConversationResource.kind),
      podSelector,
    );

    if (this.options.agentSandbox ?? true) {
      const ext = AgentSandboxApi.extensionsGroup;
      const v = AgentSandboxApi.version;
      this.watch(
        'sandboxclaims',
        customPath(ext, v, AgentSandboxApi.claimPlural),
        listCustom(ext, v, AgentSandboxApi.claimPlural),
        (obj) => ownerKeys(obj, ConversationResource.kind),
      );
      // A Sandbox is owned by its claim, and the claim is named after its Conversation.
      this.watch(
        'sandboxes',
        customPath(AgentSandboxApi.coreGroup, v, AgentSandboxApi.sandboxPlural),
        listCustom(AgentSandboxApi.coreGroup, v, AgentSandboxApi.sandboxPlural),
        (obj) => ownerKeys(obj, 'SandboxClaim'),
      );
    }

    const workers = Math.max(1, this.options.workers ?? 2);
    for (let i = 0; i < workers; i++) this.workerLoops.push(this.work());
    const resyncMs = this.options.resyncMs ?? 600_000;
    this.resyncTimer = setInterval(() => this.resync(), resyncMs);
    this.resyncTimer.unref();
    await Promise.all(this.informers.map((informer) => this.startInformer(informer, 'initial')));
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
    await Promise.all(this.informers.map((informer) => informer.stop()));
    await Promise.all(this.workerLoops);
  }

  private watch(
    what: string,
    path: string,
    list: () => Promise<KubernetesListObject<KubernetesObject>>,
    keysOf: (obj: KubernetesObject) => string[],
    labelSelector?: string,
  ): Informer<KubernetesObject> & ObjectCache<KubernetesObject> {
    const informer = makeInformer(this.options.kubeConfig, path, list, labelSelector);
    const enqueue = (obj: KubernetesObject): void => {
      for (const key of keysOf(obj)) this.queue.add(key);
    };
    informer.on('add', enqueue);
    informer.on('update', enqueue);
    informer.on('delete', enqueue);
    let delay: number = INFORMER_RESTART_MS.first;
    informer.on('connect', () => {
      delay = INFORMER_RESTART_MS.first;
    });
    // The informer stops on an error; list and watch again after a backoff.
    informer.on('error', (err: unknown) => {
      if (this.closed) return;
      this.log.warn({ watch: what, err: apiErrorMessage(err), retryMs: delay }, 'watch failed');
      const timer = setTimeout(() => void this.startInformer(informer, what), delay);
      timer.unref();
      delay = Math.min(delay * 2, INFORMER_RESTART_MS.max);
    });
    this.informers.push(informer);
    return informer;
  }

  private async startInformer(informer: Informer<KubernetesObject>, what: string): Promise<void> {
    if (this.closed) return;
    try {
      await informer.start();
    } catch (err: unknown) {
      this.log.warn({ watch: what, err: apiErrorMessage(err) }, 'watch did not start');
    }
  }

  /** Conversations the watch knows, for status gauges. */
  knownConversations(): readonly KubernetesObject[] {
    return this.conversations?.list() ?? [];
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
          this.queue.forget(key);
          this.queue.addAfter(key, ownership.retryAfterMs);
          report('not_owned');
          continue;
        }
        const result = await this.reconciler.reconcile(namespace, name);
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
