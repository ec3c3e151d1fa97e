/**
 * Keeps the harness egress NetworkPolicy (`harness-egress.ts`) current in every namespace
 * that holds Conversations: it watches the `kubernetes` Service and its EndpointSlices in
 * `default` and our policies, and rewrites each namespace's policy from a work queue keyed
 * by namespace whenever the API server's addresses change or a policy was changed by
 * someone else. Namespaces come from {@link HarnessEgressController.addNamespace} (the
 * Conversation watch, wired in operator/main.ts) and from the policies already there.
 *
 * Every replica runs one: both render the same policy from the same objects and write only
 * when the stored one differs, so they agree without a lease. A policy is never deleted:
 * it selects only harness pods and only allows, so one left in a namespace without
 * Conversations opens nothing that a harness pod there would not get anyway.
 */
import {
  CoreV1Api,
  DiscoveryV1Api,
  ListWatch,
  NetworkingV1Api,
  Watch,
  type KubeConfig,
  type KubernetesListObject,
  type KubernetesObject,
  type V1NetworkPolicy,
} from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { LogComponent } from '../../common/log';
import { FIELD_MANAGER } from './child-meta';
import {
  HARNESS_EGRESS_LABELS,
  HARNESS_EGRESS_POLICY_NAME,
  KubernetesService,
  apiServerInputs,
  harnessEgressPolicy,
  isSameEgressPolicy,
  type EgressInputs,
  type NetworkPolicyManifest,
} from './harness-egress';
import { apiErrorMessage, apiStatusCode } from './kube-api-errors';
import { makeKeepAliveApiClient } from './keep-alive-client';
import { isAtLeast } from './resource-version';
import { WorkQueue } from './work-queue';

/** Options of {@link HarnessEgressController}. */
export interface HarnessEgressControllerOptions {
  readonly kubeConfig: KubeConfig;
  readonly logger: Logger;
  /** Watch and write policies in this namespace only (as the Conversation watch). @default all */
  readonly namespace?: string;
  /** Backoff of failed writes. @default 100 ms doubling to 60 s */
  readonly baseDelayMs?: number;
  readonly maxDelayMs?: number;
}

/** Delay before a watch that stopped on an error lists and watches again. */
const RESTART_MS = { first: 500, max: 30_000 } as const;

/** One watch: its cache, whether it is current, and the last refusal. */
interface Source {
  readonly what: string;
  readonly informer: ListWatch<KubernetesObject>;
  synced: boolean;
  /** The API server refused to list or watch (403): the message, naming the permission. */
  forbidden: string | undefined;
  errors: number;
  delayMs: number;
}

const SELECTOR = Object.entries(HARNESS_EGRESS_LABELS)
  .map(([k, v]) => `${k}=${v}`)
  .join(',');

/** Watches the API server's addresses and writes the harness egress policies. */
export class HarnessEgressController {
  private readonly log: Logger;
  private readonly queue: WorkQueue;
  private readonly net: NetworkingV1Api;
  private readonly namespaces = new Set<string>();
  private readonly slices: Source;
  private readonly service: Source;
  private readonly policies: Source;
  /** What each namespace's last write returned, until the watch delivers it. */
  private readonly written = new Map<string, V1NetworkPolicy>();
  private lastInputs: string | undefined;
  private worker: Promise<void> | undefined;
  private closed = false;

  constructor(private readonly options: HarnessEgressControllerOptions) {
    this.log = options.logger.child({ component: LogComponent.Reconciler, part: 'harness-egress' });
    this.queue = new WorkQueue({
      ...(options.baseDelayMs === undefined ? {} : { baseDelayMs: options.baseDelayMs }),
      ...(options.maxDelayMs === undefined ? {} : { maxDelayMs: options.maxDelayMs }),
    });
    const kc = options.kubeConfig;
    this.net = makeKeepAliveApiClient(kc, NetworkingV1Api);
    const discovery = makeKeepAliveApiClient(kc, DiscoveryV1Api);
    const core = makeKeepAliveApiClient(kc, CoreV1Api);
    const { namespace: apiNs, name, sliceLabel } = KubernetesService;
    const sliceSelector = `${sliceLabel}=${name}`;
    const nameSelector = `metadata.name=${name}`;
    const allAgain = (): void => this.queueAll();
    this.slices = this.source(
      `EndpointSlices ${sliceSelector} in namespace ${apiNs}`,
      `/apis/discovery.k8s.io/v1/namespaces/${apiNs}/endpointslices`,
      () =>
        discovery.listNamespacedEndpointSlice({ namespace: apiNs, labelSelector: sliceSelector }),
      allAgain,
      { labelSelector: sliceSelector },
    );
    this.service = this.source(
      `Service ${apiNs}/${name}`,
      `/api/v1/namespaces/${apiNs}/services`,
      () => core.listNamespacedService({ namespace: apiNs, fieldSelector: nameSelector }),
      allAgain,
      { fieldSelector: nameSelector },
    );
    const ns = options.namespace;
    this.policies = this.source(
      'harness egress NetworkPolicies',
      ns === undefined
        ? '/apis/networking.k8s.io/v1/networkpolicies'
        : `/apis/networking.k8s.io/v1/namespaces/${ns}/networkpolicies`,
      () =>
        ns === undefined
          ? this.net.listNetworkPolicyForAllNamespaces({ labelSelector: SELECTOR })
          : this.net.listNamespacedNetworkPolicy({ namespace: ns, labelSelector: SELECTOR }),
      (obj, deleted) => {
        const namespace = obj.metadata?.namespace;
        if (namespace === undefined || obj.metadata?.name !== HARNESS_EGRESS_POLICY_NAME) return;
        // Deleted by someone: our last write no longer stands for the stored object.
        if (deleted) this.written.delete(namespace);
        // Every change is checked (and undone when it is not ours).
        if (this.track(namespace)) this.queue.add(namespace);
      },
      { labelSelector: SELECTOR },
    );
  }

  /** Lists and starts the watches, then the worker. Resolves after the first lists. */
  async start(): Promise<void> {
    if (this.worker !== undefined || this.closed) return;
    await Promise.all([this.slices, this.service, this.policies].map((s) => this.startSource(s)));
    if (this.closed) return;
    this.worker = this.work();
    this.queueAll();
  }

  /**
   * `namespace` holds a Conversation: its policy is written now and kept current. Called
   * for every Conversation event; only a namespace not known yet is queued (a known one is
   * queued by every change of the addresses or of its policy). Outside the one namespace
   * this controller is limited to, nothing happens.
   */
  addNamespace(namespace: string): void {
    if (this.namespaces.has(namespace)) return;
    if (this.track(namespace)) this.queue.add(namespace);
  }

  /** Adds `namespace` to those kept current; false when it is not this controller's. */
  private track(namespace: string): boolean {
    const only = this.options.namespace;
    if (this.closed || (only !== undefined && namespace !== only)) return false;
    this.namespaces.add(namespace);
    return true;
  }

  /** Stops the watches and the worker; waits for a write in progress. Idempotent. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.queue.shutDown();
    await Promise.all([this.slices, this.service, this.policies].map((s) => s.informer.stop()));
    await this.worker;
  }

  /**
   * What the policies are rendered from now; undefined while a watch has not listed yet
   * (nothing is written then). A refused watch closes every policy.
   */
  inputs(): EgressInputs | undefined {
    const refused = [this.slices, this.service].filter((s) => s.forbidden !== undefined);
    if (refused.length > 0) {
      const what = refused.map((s) => `${s.what} (${s.forbidden ?? ''})`).join('; ');
      return {
        kind: 'closed',
        reason:
          `the control plane may not read ${what}: it needs get, list and watch on ` +
          `discovery.k8s.io endpointslices and on the Service ${KubernetesService.name} ` +
          `(config/cluster/cluster-role.yaml); until then harness pods get no HTTPS egress`,
      };
    }
    if (!this.slices.synced || !this.service.synced) return undefined;
    return apiServerInputs(
      this.slices.informer.list(KubernetesService.namespace),
      this.service.informer.get(KubernetesService.name, KubernetesService.namespace),
    );
  }

  private queueAll(): void {
    for (const namespace of this.namespaces) this.queue.add(namespace);
  }

  private source(
    what: string,
    path: string,
    list: () => Promise<KubernetesListObject<KubernetesObject>>,
    onObject: (obj: KubernetesObject, deleted: boolean) => void,
    selectors: { labelSelector?: string; fieldSelector?: string },
  ): Source {
    const informer = new ListWatch<KubernetesObject>(
      path,
      new Watch(this.options.kubeConfig),
      list,
      false,
      selectors.labelSelector,
      selectors.fieldSelector,
    );
    const source: Source = {
      what,
      informer,
      synced: false,
      forbidden: undefined,
      errors: 0,
      delayMs: RESTART_MS.first,
    };
    for (const verb of ['add', 'update', 'delete'] as const) {
      informer.on(verb, (obj) => onObject(obj, verb === 'delete'));
    }
    informer.on('error', (err: unknown) => {
      source.synced = false;
      source.errors += 1;
      if (apiStatusCode(err) === 403) source.forbidden = apiErrorMessage(err);
      if (this.closed) return;
      this.log.warn(
        { watch: what, err: apiErrorMessage(err), retryMs: source.delayMs },
        'watch failed',
      );
      // A refusal closes the policies now; they open again once the watch lists.
      if (source.forbidden !== undefined) this.queueAll();
      const timer = setTimeout(() => void this.startSource(source), source.delayMs);
      timer.unref();
      source.delayMs = Math.min(source.delayMs * 2, RESTART_MS.max);
    });
    return source;
  }

  private async startSource(source: Source): Promise<void> {
    if (this.closed) return;
    const errorsBefore = source.errors;
    try {
      await source.informer.start();
    } catch (err: unknown) {
      this.log.warn({ watch: source.what, err: apiErrorMessage(err) }, 'watch did not start');
      return;
    }
    if (source.errors !== errorsBefore) return;
    source.synced = true;
    source.forbidden = undefined;
    source.delayMs = RESTART_MS.first;
    this.queueAll();
  }

  private async work(): Promise<void> {
    for (;;) {
      const namespace = await this.queue.get();
      if (namespace === undefined) return;
      try {
        await this.sync(namespace);
        this.queue.forget(namespace);
      } catch (err: unknown) {
        const retryMs = this.queue.addRateLimited(namespace);
        this.log.warn(
          { namespace, err: apiErrorMessage(err), retryMs },
          'could not write the harness egress NetworkPolicy',
        );
      } finally {
        this.queue.done(namespace);
      }
    }
  }

  /** Writes `namespace`'s policy when the stored one is not the desired one. */
  private async sync(namespace: string): Promise<void> {
    const inputs = this.inputs();
    if (inputs === undefined) return;
    this.noteInputs(inputs);
    const desired = harnessEgressPolicy(namespace, inputs);
    const existing = this.existing(namespace);
    if (existing !== undefined && isSameEgressPolicy(existing, desired)) return;
    const written =
      existing === undefined
        ? await this.create(desired)
        : await this.replace(desired, existing.metadata?.resourceVersion);
    this.written.set(namespace, written);
    this.log.info(
      { namespace, policy: HARNESS_EGRESS_POLICY_NAME, open: inputs.kind === 'known' },
      'harness egress NetworkPolicy written',
    );
  }

  /** The stored policy: the watch's, or our last write while the watch lags behind it. */
  private existing(namespace: string): V1NetworkPolicy | undefined {
    const cached = this.policies.synced
      ? wire(this.policies.informer.get(HARNESS_EGRESS_POLICY_NAME, namespace))
      : undefined;
    const ours = this.written.get(namespace);
    const seen = cached?.metadata?.resourceVersion;
    const wrote = ours?.metadata?.resourceVersion;
    if (ours === undefined || wrote === undefined) return cached;
    if (seen !== undefined && isAtLeast(seen, wrote)) {
      this.written.delete(namespace);
      return cached;
    }
    return ours;
  }

  private async create(desired: NetworkPolicyManifest): Promise<V1NetworkPolicy> {
    const namespace = desired.metadata.namespace;
    try {
      return await this.net.createNamespacedNetworkPolicy({
        namespace,
        body: desired,
        fieldManager: FIELD_MANAGER,
      });
    } catch (err: unknown) {
      if (apiStatusCode(err) !== 409) throw err;
      // One of that name our watch does not select (its labels were removed): take it over.
      const found = await this.net.readNamespacedNetworkPolicy({
        namespace,
        name: HARNESS_EGRESS_POLICY_NAME,
      });
      return this.replace(desired, found.metadata?.resourceVersion);
    }
  }

  private async replace(
    desired: NetworkPolicyManifest,
    resourceVersion: string | undefined,
  ): Promise<V1NetworkPolicy> {
    const body = {
      ...desired,
      metadata: {
        ...desired.metadata,
        ...(resourceVersion === undefined ? {} : { resourceVersion }),
      },
    };
    try {
      return await this.net.replaceNamespacedNetworkPolicy({
        namespace: desired.metadata.namespace,
        name: HARNESS_EGRESS_POLICY_NAME,
        body,
        fieldManager: FIELD_MANAGER,
      });
    } catch (err: unknown) {
      // Written over by someone in between: the next pass reads the watch's version.
      if (apiStatusCode(err) === 409) this.written.delete(desired.metadata.namespace);
      throw err;
    }
  }

  /** Logs the addresses (or why the policies are closed) each time they change. */
  private noteInputs(inputs: EgressInputs): void {
    const key = JSON.stringify(inputs);
    if (key === this.lastInputs) return;
    this.lastInputs = key;
    if (inputs.kind === 'known') {
      this.log.info(
        { ipv4: inputs.addresses.ipv4, ipv6: inputs.addresses.ipv6 },
        'harness egress excludes the API server addresses',
      );
    } else {
      this.log.error({ reason: inputs.reason }, 'harness egress closed');
    }
  }
}

/** Wire JSON of a cached policy (a typed list yields class instances with Date fields). */
function wire(obj: KubernetesObject | undefined): V1NetworkPolicy | undefined {
  return obj === undefined ? undefined : (JSON.parse(JSON.stringify(obj)) as V1NetworkPolicy);
}
