/**
 * Watches Namespaces and keeps each one's onboarded objects in line with its label
 * (docs/operator.md, "Conversation namespaces"), through a work queue keyed by namespace
 * name and {@link NamespaceOnboarder}. A namespace is queued when the watch delivers it
 * labelled, when it was labelled before (so removing the label, or changing its value,
 * removes what was made), and on every resync, which reads the provisioner's Secrets once
 * and passes them to every labelled namespace, so a rotated harness CA or approval key
 * reaches every copy within one resync. At start, namespaces that still hold an onboarded
 * NetworkPolicy are queued too, so a label removed while the process was down is noticed.
 *
 * One replica runs it (the provisioner's Deployment); two would agree, since every write is
 * a create that fails on a race or a write at the resourceVersion read.
 */
import {
  ListWatch,
  NetworkingV1Api,
  Watch,
  type CoreV1Api,
  type KubeConfig,
  type KubernetesObject,
  type V1Namespace,
} from '@kubernetes/client-node';

import { WorkQueue } from '../controller/work-queue';
import { ONBOARDED_LABEL } from './catalog';
import type { NamespaceOnboarder, OnboardingLog } from './onboarder';
import { wantsOnboarding, type CredentialSources } from './plan';

/** Options of {@link OnboardingController}. */
export interface OnboardingControllerOptions {
  readonly kubeConfig: KubeConfig;
  readonly core: Pick<CoreV1Api, 'listNamespace'>;
  readonly onboarder: NamespaceOnboarder;
  readonly log: OnboardingLog;
  /** How often every labelled namespace is synced again (rotation, drift). @default 120 000 */
  readonly resyncMs?: number;
  /** Backoff of failed syncs. @default 100 ms doubling to 60 s */
  readonly baseDelayMs?: number;
  readonly maxDelayMs?: number;
}

/** Delay before a refused or broken namespace watch starts again: doubling, capped. */
const WATCH_RESTART_MS = { first: 1_000, max: 60_000 } as const;

/** The namespace watch and its worker. */
export class OnboardingController {
  private readonly queue: WorkQueue;
  private readonly informer: ListWatch<V1Namespace>;
  /** Namespaces that may hold objects of ours: labelled now, or seen holding them. */
  private readonly candidates = new Set<string>();
  private sources: CredentialSources | undefined;
  private worker: Promise<void> | undefined;
  private timer: NodeJS.Timeout | undefined;
  private closed = false;
  private watchDelayMs: number = WATCH_RESTART_MS.first;

  constructor(private readonly options: OnboardingControllerOptions) {
    this.queue = new WorkQueue({
      ...(options.baseDelayMs === undefined ? {} : { baseDelayMs: options.baseDelayMs }),
      ...(options.maxDelayMs === undefined ? {} : { maxDelayMs: options.maxDelayMs }),
    });
    this.informer = new ListWatch<V1Namespace>(
      '/api/v1/namespaces',
      new Watch(options.kubeConfig),
      () => options.core.listNamespace(),
      false,
    );
    for (const verb of ['add', 'update'] as const) {
      this.informer.on(verb, (ns: KubernetesObject) => this.noticed(ns));
    }
    this.informer.on('delete', (ns: KubernetesObject) => {
      const name = ns.metadata?.name;
      if (name !== undefined) this.candidates.delete(name);
    });
    this.informer.on('error', (err: unknown) => this.watchFailed(err, 'namespace watch failed'));
  }

  /**
   * Finds namespaces that hold an onboarded NetworkPolicy, starts the watch and the worker,
   * and resyncs every `resyncMs`. Resolves after the first list.
   */
  async start(): Promise<void> {
    if (this.worker !== undefined || this.closed) return;
    await this.findHeld();
    await this.startWatch();
    this.worker = this.work();
    const resyncMs = this.options.resyncMs ?? 120_000;
    this.timer = setInterval(() => this.resync(), resyncMs);
    this.timer.unref();
    this.resync();
  }

  /**
   * Syncs every namespace that is or was onboarded again, with the provisioner's Secrets
   * read afresh (called by the timer, and by the provisioner after it renewed something).
   */
  resync(): void {
    if (this.closed) return;
    this.sources = undefined;
    for (const name of this.candidates) this.queue.add(name);
  }

  /** Stops the watch, the timer and the worker; waits for a sync in progress. Idempotent. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    clearInterval(this.timer);
    this.queue.shutDown();
    await this.informer.stop();
    await this.worker;
  }

  /** Namespaces that hold an onboarded NetworkPolicy become candidates (a refusal is logged). */
  private async findHeld(): Promise<void> {
    const net = this.options.kubeConfig.makeApiClient(NetworkingV1Api);
    try {
      const held = await net.listNetworkPolicyForAllNamespaces({
        labelSelector: `${ONBOARDED_LABEL.key}=${ONBOARDED_LABEL.value}`,
      });
      for (const policy of held.items) {
        const namespace = policy.metadata?.namespace;
        if (namespace !== undefined) this.candidates.add(namespace);
      }
    } catch (err) {
      this.options.log.warn(
        { err: err instanceof Error ? err.message : String(err) },
        'could not list onboarded NetworkPolicies; namespaces offboarded while stopped are not cleaned up',
      );
    }
  }

  private async startWatch(): Promise<void> {
    if (this.closed) return;
    try {
      await this.informer.start();
    } catch (err) {
      this.watchFailed(err, 'namespace watch did not start');
    }
  }

  /** Logs a failed list or watch (a 403 names the missing ClusterRole) and starts it again. */
  private watchFailed(err: unknown, message: string): void {
    if (this.closed) return;
    this.options.log.warn(
      { err: err instanceof Error ? err.message : String(err), retryMs: this.watchDelayMs },
      `${message} (the provisioner needs config/cluster's ClusterRole polychrome-onboarding)`,
    );
    const timer = setTimeout(() => void this.startWatch(), this.watchDelayMs);
    timer.unref();
    this.watchDelayMs = Math.min(this.watchDelayMs * 2, WATCH_RESTART_MS.max);
  }

  private noticed(ns: KubernetesObject): void {
    const name = ns.metadata?.name;
    if (name === undefined || this.closed) return;
    // The list went through: a later failure starts from the first delay again.
    this.watchDelayMs = WATCH_RESTART_MS.first;
    if (wantsOnboarding(ns.metadata?.labels ?? {})) this.candidates.add(name);
    if (this.candidates.has(name)) this.queue.add(name);
  }

  private async work(): Promise<void> {
    for (;;) {
      const name = await this.queue.get();
      if (name === undefined) return;
      try {
        await this.sync(name);
      } catch (err) {
        const retryMs = this.queue.addRateLimited(name);
        this.options.log.warn(
          { namespace: name, err: err instanceof Error ? err.message : String(err), retryMs },
          'onboarding sync failed',
        );
      } finally {
        this.queue.done(name);
      }
    }
  }

  private async sync(name: string): Promise<void> {
    const ns = this.informer.get(name);
    if (ns === undefined) {
      this.candidates.delete(name);
      return;
    }
    this.sources ??= await this.options.onboarder.readSources();
    const result = await this.options.onboarder.sync(ns, this.sources);
    const labelled = wantsOnboarding(ns.metadata?.labels ?? {});
    if (result.raced || result.pending.some((p) => p.op === 'wait')) {
      this.queue.addRateLimited(name);
      return;
    }
    this.queue.forget(name);
    // Offboarded and nothing of ours left: no need to look again.
    if (!labelled && result.pending.length === 0) this.candidates.delete(name);
  }
}
