/**
 * The Agent and ModelConfig controller (docs/operator.md, "Agents and ModelConfigs"): it
 * watches both kinds, and from one work queue sets each object's Ready condition with the
 * pure cores `model-config-ready.ts` and `agent-ready.ts`. An Agent is queued when it
 * changes and when the ModelConfig or an Agent it names changes (a {@link ReferenceIndex}
 * per kind of reference); a ModelConfig when it changes and every `secretRecheckMs`, since
 * Secrets are not watched (the control plane may not watch them).
 *
 * Every replica runs one: the verdicts depend only on the objects and on what the control
 * plane's own identity may read, so replicas agree, and a status is written only when it
 * differs (a replica that lost the race gets a conflict and finds nothing left to do).
 * Events go out from the replica whose write changed Ready.
 *
 * A key Secret is read with a GET and reduced at once to whether the key is there; its
 * value is never kept, logged, or written to status or Events.
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
import { AgentResource } from '../api/v1alpha1/agent-resource';
import { ModelConfigResource } from '../api/v1alpha1/model-config-resource';
import type { ReadyStatus } from '../api/v1alpha1/ready-status';
import { LogComponent } from '../../common/log';
import { agentReady, agentTargets } from './agent-ready';
import { isAgent, isModelConfig, type AgentDirectory } from './agent-resource-reads';
import type { Clock } from './clock';
import { systemClock } from './clock';
import type { EventRegarding, EventWriteResult } from './event-recorder';
import { EventRecorder } from './event-recorder';
import { hostname } from 'node:os';
import { EventAction, EventType, NOTE_MAX_BYTES } from './lifecycle-events';
import type { ControlPlaneAccount, SecretLookup } from './model-config-ready';
import { modelConfigReady } from './model-config-ready';
import { apiErrorMessage, apiStatusCode } from './kube-api-errors';
import { makeKeepAliveApiClient } from './keep-alive-client';
import type { ReadyVerdict } from './ready-condition';
import {
  isReadyTransition,
  isSameReadyStatus,
  nextReadyStatus,
  readyConditionOf,
} from './ready-condition';
import { ReferenceIndex } from './reference-index';
import { isObjectList } from './watch-keys';
import { WorkQueue } from './work-queue';

/** Options of {@link AgentResourcesController}. */
export interface AgentResourcesControllerOptions {
  readonly kubeConfig: KubeConfig;
  readonly logger: Logger;
  /** The control plane's ServiceAccount, named in the SecretForbidden message. */
  readonly account: ControlPlaneAccount;
  /** Watch one namespace only. @default every namespace */
  readonly namespace?: string;
  /** How often every ModelConfig's Secret is read again. @default 30_000 */
  readonly secretRecheckMs?: number;
  /**
   * Events on Ready transitions (events.k8s.io/v1, `event-recorder.ts`); false: none.
   * @default events with the host name as reportingInstance
   */
  readonly events?:
    | false
    | {
        readonly reportingInstance?: string;
        readonly onWrite?: (result: EventWriteResult) => void;
      };
  readonly clock?: Clock;
  /** Backoff of failed passes. @default 100 ms doubling to 60 s */
  readonly baseDelayMs?: number;
  readonly maxDelayMs?: number;
}

/** Delay before a watch that stopped on an error lists and watches again. */
const RESTART_MS = { first: 500, max: 30_000 } as const;

type Kind = typeof AgentResource.kind | typeof ModelConfigResource.kind;
type Cache = Informer<KubernetesObject> & ObjectCache<KubernetesObject>;
type Resource = typeof AgentResource | typeof ModelConfigResource;

/** Watches Agents and ModelConfigs and keeps their Ready condition. */
export class AgentResourcesController {
  private readonly log: Logger;
  private readonly queue: WorkQueue;
  private readonly objects: CustomObjectsApi;
  private readonly core: CoreV1Api;
  private readonly clock: Clock;
  private readonly agents: Cache;
  private readonly modelConfigs: Cache;
  /** Agents by the ModelConfig they name, and by the Agents they name (`namespace/name`). */
  private readonly byModel = new ReferenceIndex();
  private readonly byTarget = new ReferenceIndex();
  private readonly recorder: EventRecorder | undefined;
  private worker: Promise<void> | undefined;
  private recheck: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(private readonly options: AgentResourcesControllerOptions) {
    this.log = options.logger.child({ component: LogComponent.Reconciler, part: 'agents' });
    this.queue = new WorkQueue({
      ...(options.baseDelayMs === undefined ? {} : { baseDelayMs: options.baseDelayMs }),
      ...(options.maxDelayMs === undefined ? {} : { maxDelayMs: options.maxDelayMs }),
    });
    this.objects = makeKeepAliveApiClient(options.kubeConfig, CustomObjectsApi);
    this.core = makeKeepAliveApiClient(options.kubeConfig, CoreV1Api);
    this.clock = options.clock ?? systemClock;
    if (options.events !== false) {
      const { reportingInstance = hostname(), onWrite } = options.events ?? {};
      this.recorder = new EventRecorder({
        kubeConfig: options.kubeConfig,
        logger: this.log,
        reportingInstance,
        ...(onWrite === undefined ? {} : { onWrite }),
      });
    }
    this.agents = this.watch(AgentResource, (obj, deleted) => this.agentChanged(obj, deleted));
    this.modelConfigs = this.watch(ModelConfigResource, (obj) => this.modelConfigChanged(obj));
  }

  /** Lists and starts both watches, then the worker and the Secret re-check. */
  async start(): Promise<void> {
    if (this.worker !== undefined || this.closed) return;
    await Promise.all([this.agents, this.modelConfigs].map((w) => this.startWatch(w)));
    if (this.closed) return;
    this.worker = this.work();
    this.recheck = setInterval(
      () => this.queueKind(this.modelConfigs, ModelConfigResource.kind),
      this.options.secretRecheckMs ?? 30_000,
    );
    this.recheck.unref();
  }

  /** Stops the watches, the timer and the worker; waits for a pass in progress. Idempotent. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.recheck !== undefined) clearInterval(this.recheck);
    this.queue.shutDown();
    await Promise.all([this.agents.stop(), this.modelConfigs.stop()]);
    await this.worker;
    await this.recorder?.close();
  }

  /**
   * The Agents and ModelConfigs of `namespace` as the watches hold them, for the turns
   * (operator/turns/agent-roster.ts); an object that does not match its CRD is absent.
   */
  directory(namespace: string): AgentDirectory {
    return {
      agent: (name) => {
        const obj = this.agents.get(name, namespace);
        return isAgent(obj) ? obj : undefined;
      },
      modelConfig: (name) => {
        const obj = this.modelConfigs.get(name, namespace);
        return isModelConfig(obj) ? obj : undefined;
      },
    };
  }

  /** Resolves once the Event writes queued so far are done (tests). */
  async eventsSettled(): Promise<void> {
    await this.recorder?.settled();
  }

  private agentChanged(obj: KubernetesObject, deleted: boolean): void {
    const key = keyOf(obj);
    if (key === undefined) return;
    const namespace = key.slice(0, key.indexOf('/'));
    if (deleted || !isAgent(obj)) {
      this.byModel.delete(key);
      this.byTarget.delete(key);
    } else {
      this.byModel.set(key, [`${namespace}/${obj.spec.modelRef.name}`]);
      this.byTarget.set(
        key,
        agentTargets(obj.spec).map((name) => `${namespace}/${name}`),
      );
    }
    if (!deleted) this.queue.add(`${AgentResource.kind}|${key}`);
    for (const referrer of this.byTarget.referrers(key)) {
      this.queue.add(`${AgentResource.kind}|${referrer}`);
    }
  }

  private modelConfigChanged(obj: KubernetesObject): void {
    const key = keyOf(obj);
    if (key === undefined) return;
    this.queue.add(`${ModelConfigResource.kind}|${key}`);
    for (const referrer of this.byModel.referrers(key)) {
      this.queue.add(`${AgentResource.kind}|${referrer}`);
    }
  }

  private queueKind(cache: Cache, kind: Kind): void {
    for (const obj of cache.list()) {
      const key = keyOf(obj);
      if (key !== undefined) this.queue.add(`${kind}|${key}`);
    }
  }

  private watch(
    resource: Resource,
    onChange: (obj: KubernetesObject, deleted: boolean) => void,
  ): Cache {
    const { group, version, plural } = resource;
    const ns = this.options.namespace;
    const path =
      ns === undefined
        ? `/apis/${group}/${version}/${plural}`
        : `/apis/${group}/${version}/namespaces/${ns}/${plural}`;
    const list = async (): Promise<KubernetesListObject<KubernetesObject>> => {
      const raw: unknown =
        ns === undefined
          ? await this.objects.listClusterCustomObject({ group, version, plural })
          : await this.objects.listNamespacedCustomObject({
              group,
              version,
              plural,
              namespace: ns,
            });
      if (!isObjectList(raw)) throw new Error(`listing ${plural} returned something else`);
      return raw;
    };
    const informer = makeInformer(this.options.kubeConfig, path, list);
    informer.on('add', (obj) => onChange(obj, false));
    informer.on('update', (obj) => onChange(obj, false));
    informer.on('delete', (obj) => onChange(obj, true));
    let delay: number = RESTART_MS.first;
    informer.on('connect', () => {
      delay = RESTART_MS.first;
    });
    informer.on('error', (err: unknown) => {
      if (this.closed) return;
      this.log.warn({ watch: plural, err: apiErrorMessage(err), retryMs: delay }, 'watch failed');
      const timer = setTimeout(() => void this.startWatch(informer), delay);
      timer.unref();
      delay = Math.min(delay * 2, RESTART_MS.max);
    });
    return informer;
  }

  private async startWatch(informer: Cache): Promise<void> {
    if (this.closed) return;
    try {
      await informer.start();
    } catch (err: unknown) {
      this.log.warn({ err: apiErrorMessage(err) }, 'watch did not start');
    }
  }

  private async work(): Promise<void> {
    for (;;) {
      const item = await this.queue.get();
      if (item === undefined) return;
      const [kind, key = ''] = item.split('|');
      const slash = key.indexOf('/');
      const namespace = key.slice(0, slash);
      const name = key.slice(slash + 1);
      try {
        if (kind === AgentResource.kind) await this.reconcileAgent(namespace, name);
        else await this.reconcileModelConfig(namespace, name);
        this.queue.forget(item);
      } catch (err: unknown) {
        const retryMs = this.queue.addRateLimited(item);
        // A conflict is another replica's write of the same verdict: retried, not news.
        const level = apiStatusCode(err) === 409 ? 'debug' : 'warn';
        this.log[level](
          { kind, namespace, name, err: apiErrorMessage(err), retryMs },
          'reconcile failed',
        );
      } finally {
        this.queue.done(item);
      }
    }
  }

  private async reconcileModelConfig(namespace: string, name: string): Promise<void> {
    const obj = this.modelConfigs.get(name, namespace);
    if (!isModelConfig(obj)) return;
    const ref = obj.spec.secretKeyRef;
    const lookup = ref === undefined ? undefined : await this.lookUpSecret(namespace, ref);
    const verdict = modelConfigReady({
      namespace,
      name,
      account: this.options.account,
      ...(ref === undefined || lookup === undefined ? {} : { secretKeyRef: ref, lookup }),
    });
    await this.writeReady(ModelConfigResource, obj, verdict);
  }

  /**
   * GETs the Secret as the control plane and keeps only whether the key holds a value.
   *
   * @throws the API error for anything but 403 and 404 (retried with backoff).
   */
  private async lookUpSecret(
    namespace: string,
    ref: { readonly name: string; readonly key: string },
  ): Promise<SecretLookup> {
    try {
      const secret = await this.core.readNamespacedSecret({ namespace, name: ref.name });
      const value = secret.data?.[ref.key];
      return { kind: 'found', hasKey: typeof value === 'string' && value !== '' };
    } catch (err: unknown) {
      const code = apiStatusCode(err);
      if (code === 403) return { kind: 'forbidden' };
      if (code === 404) return { kind: 'not_found' };
      throw err;
    }
  }

  private async reconcileAgent(namespace: string, name: string): Promise<void> {
    const obj = this.agents.get(name, namespace);
    if (!isAgent(obj)) return;
    const model = this.modelConfigs.get(obj.spec.modelRef.name, namespace);
    const verdict = agentReady({
      spec: obj.spec,
      modelConfig: isModelConfig(model) ? { ready: readyConditionOf(model.status) } : undefined,
      agentExists: (target) => this.agents.get(target, namespace) !== undefined,
    });
    await this.writeReady(AgentResource, obj, verdict);
  }

  /** Writes the status `verdict` calls for, when it differs from the stored one. */
  private async writeReady(
    resource: Resource,
    obj: {
      metadata: {
        name?: string;
        namespace?: string;
        generation?: number;
        uid?: string;
        resourceVersion?: string;
      };
      status?: ReadyStatus;
    },
    verdict: ReadyVerdict,
  ): Promise<void> {
    const { name = '', namespace = '', generation = 0, uid = '' } = obj.metadata;
    const next = nextReadyStatus(obj.status, verdict, generation, this.clock.now());
    if (isSameReadyStatus(obj.status, next)) return;
    await this.objects.replaceNamespacedCustomObjectStatus({
      group: resource.group,
      version: resource.version,
      plural: resource.plural,
      namespace,
      name,
      body: { ...obj, status: next },
    });
    if (!isReadyTransition(obj.status, next)) return;
    this.log.info(
      { kind: resource.kind, namespace, name, ready: verdict.status, reason: verdict.reason },
      'Ready changed',
    );
    const regarding: EventRegarding = {
      apiVersion: resource.apiVersion,
      kind: resource.kind,
      namespace,
      name,
      uid,
    };
    this.recorder?.record(regarding, {
      type: verdict.status === 'True' ? EventType.Normal : EventType.Warning,
      reason: verdict.reason,
      action: EventAction.Reconcile,
      note: truncateUtf8(verdict.message, NOTE_MAX_BYTES),
    });
  }
}

function keyOf(obj: KubernetesObject): string | undefined {
  const { name, namespace } = obj.metadata ?? {};
  return name === undefined || namespace === undefined ? undefined : `${namespace}/${name}`;
}

/** `text` cut to at most `maxBytes` of UTF-8, on a character boundary. */
function truncateUtf8(text: string, maxBytes: number): string {
  let out = text;
  while (Buffer.byteLength(out, 'utf8') > maxBytes) out = out.slice(0, -1);
  return out;
}
