import {
  ApiException,
  CoordinationV1Api,
  V1MicroTime,
  type KubeConfig,
  type V1Lease,
} from '@kubernetes/client-node';
import { AppError } from '../../common/errors';
import {
  decideAcquire,
  isHeldLeaseStale,
  leaseNameFor,
  observe,
  type LeaseRecord,
  type Observation,
} from './lease-rules';

/** Annotation on a conversation's Lease: the holder's public API URL. */
export const API_ENDPOINT_ANNOTATION = 'polychrome.dev/api-endpoint';

/** The conversation a lease guards. */
export interface ConversationRef {
  namespace: string;
  name: string;
  uid: string;
}

/**
 * A lease this replica holds. `fencingToken` (the Lease's `leaseTransitions` when we took
 * it) goes into every dispatch this holder writes, so a stale holder's writes can be told
 * apart. `signal` aborts when the lease is lost (taken, deleted, or not renewable for a
 * whole duration): stop acting for the conversation at once.
 */
export interface LeaseHandle {
  readonly conversation: ConversationRef;
  readonly leaseName: string;
  readonly holder: string;
  readonly fencingToken: number;
  readonly signal: AbortSignal;
}

/** Why {@link ConversationLeases.tryAcquire} did not get the lease. */
export interface LeaseBusy {
  readonly holder: string;
  /** The holder's public API, when it advertises one: requests for the conversation go there. */
  readonly holderEndpoint?: string;
  /** When this replica may try again (local clock). */
  readonly retryAtMs: number;
}

/** Options for {@link ConversationLeases}. */
export interface ConversationLeasesOptions {
  kubeConfig: KubeConfig;
  /** This replica's identity, written as holderIdentity (e.g. the pod name). */
  identity: string;
  /**
   * This replica's public API URL, written on the leases it holds
   * ({@link API_ENDPOINT_ANNOTATION}) so other replicas can forward requests to it.
   */
  apiEndpoint?: string;
  /** @default 15000 */
  leaseDurationMs?: number;
  /** @default 5000 */
  renewIntervalMs?: number;
  /** @default Date.now */
  nowMs?: () => number;
  /** Called on acquire, take-over and loss, for metrics and logs. */
  onTransition?: (
    event: 'acquired' | 'taken_over' | 'renewed' | 'lost' | 'released',
    handle: LeaseHandle,
  ) => void;
}

interface Held {
  handle: LeaseHandle;
  abort: AbortController;
  resourceVersion: string;
  lastRenewedAtMs: number;
}

function toRecord(lease: V1Lease): LeaseRecord {
  return {
    holder: lease.spec?.holderIdentity ?? '',
    leaseDurationMs: (lease.spec?.leaseDurationSeconds ?? 0) * 1000,
    transitions: lease.spec?.leaseTransitions ?? 0,
    resourceVersion: lease.metadata?.resourceVersion ?? '',
  };
}

function isStatus(err: unknown, ...codes: number[]): boolean {
  return err instanceof ApiException && codes.includes(err.code);
}

/**
 * One coordination.k8s.io/v1 Lease per conversation, so exactly one control-plane replica
 * writes a conversation's turns and status. Acquire is a version-checked create, or a
 * version-checked replace of a released or expired lease; a lost race is a 409 and means
 * "someone else holds it". Held leases are renewed every `renewIntervalMs` and released
 * (holder cleared) on {@link ConversationLeases.close}.
 */
export class ConversationLeases {
  private readonly api: CoordinationV1Api;
  private readonly durationMs: number;
  private readonly renewIntervalMs: number;
  private readonly now: () => number;
  private readonly observations = new Map<string, Observation>();
  private readonly held = new Map<string, Held>();
  private timer: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(private readonly opts: ConversationLeasesOptions) {
    this.api = opts.kubeConfig.makeApiClient(CoordinationV1Api);
    this.durationMs = opts.leaseDurationMs ?? 15_000;
    this.renewIntervalMs = opts.renewIntervalMs ?? 5_000;
    this.now = opts.nowMs ?? Date.now;
    if (this.renewIntervalMs >= this.durationMs) {
      throw new AppError(
        'invalid_argument',
        `lease renew interval ${this.renewIntervalMs} ms must be shorter than the lease duration ${this.durationMs} ms`,
      );
    }
  }

  /** Starts renewing held leases. */
  start(): void {
    if (this.timer !== undefined || this.closed) return;
    this.timer = setInterval(() => void this.renewAll(), this.renewIntervalMs);
    this.timer.unref();
  }

  /** The handle for a conversation this replica holds, if it still holds it. */
  current(ref: ConversationRef): LeaseHandle | undefined {
    const held = this.held.get(key(ref));
    if (held === undefined || held.handle.signal.aborted) return undefined;
    if (isHeldLeaseStale(held.lastRenewedAtMs, this.durationMs, this.now())) {
      this.lose(held);
      return undefined;
    }
    return held.handle;
  }

  /**
   * Takes the conversation's lease if it is free, ours, released, or expired as observed
   * here. Returns the handle, or who holds it and when to try again.
   *
   * @throws ApiException for API failures other than a lost race (409).
   */
  async tryAcquire(ref: ConversationRef): Promise<LeaseHandle | LeaseBusy> {
    if (this.closed)
      throw new AppError('unavailable', 'this replica is shutting down; retry on another');
    const existing = this.current(ref);
    if (existing !== undefined) return existing;
    const name = leaseNameFor(ref.uid);
    let lease: V1Lease | undefined;
    try {
      lease = await this.api.readNamespacedLease({ namespace: ref.namespace, name });
    } catch (err: unknown) {
      if (!isStatus(err, 404)) throw err;
    }
    const now = this.now();
    const record = lease === undefined ? undefined : toRecord(lease);
    const obsKey = key(ref);
    if (record !== undefined)
      this.observations.set(obsKey, observe(record, this.observations.get(obsKey), now));
    const decision = decideAcquire(record, this.observations.get(obsKey), this.opts.identity, now);
    try {
      switch (decision.action) {
        case 'wait': {
          const endpoint = lease?.metadata?.annotations?.[API_ENDPOINT_ANNOTATION];
          return {
            holder: decision.holder,
            retryAtMs: decision.retryAtMs,
            ...(endpoint === undefined || endpoint === '' ? {} : { holderEndpoint: endpoint }),
          };
        }
        case 'create': {
          const created = await this.api.createNamespacedLease({
            namespace: ref.namespace,
            body: this.leaseBody(ref, name, 0, now),
          });
          return this.hold(ref, created, 0, 'acquired');
        }
        case 'renew':
        case 'take_over': {
          const body = this.leaseBody(ref, name, decision.fencingToken, now);
          body.metadata = { ...body.metadata, resourceVersion: record?.resourceVersion };
          if (decision.action === 'renew' && lease?.spec?.acquireTime !== undefined) {
            body.spec = { ...body.spec, acquireTime: lease.spec.acquireTime };
          }
          const replaced = await this.api.replaceNamespacedLease({
            namespace: ref.namespace,
            name,
            body,
          });
          return this.hold(
            ref,
            replaced,
            decision.fencingToken,
            decision.action === 'renew' ? 'acquired' : 'taken_over',
          );
        }
      }
    } catch (err: unknown) {
      // Another replica created or changed it between our read and write: it won.
      if (isStatus(err, 409))
        return { holder: 'unknown (lost a race)', retryAtMs: now + this.renewIntervalMs };
      throw err;
    }
  }

  /** Gives the lease up now (holder cleared) so another replica can take it at once. */
  async release(handle: LeaseHandle): Promise<void> {
    const held = this.held.get(key(handle.conversation));
    if (held === undefined || held.handle !== handle) return;
    this.held.delete(key(handle.conversation));
    held.abort.abort(new AppError('cancelled', `lease ${handle.leaseName} released`));
    try {
      const lease = await this.api.readNamespacedLease({
        namespace: handle.conversation.namespace,
        name: handle.leaseName,
      });
      if (lease.spec?.holderIdentity !== this.opts.identity) return;
      lease.spec = { ...lease.spec, holderIdentity: '', leaseDurationSeconds: 1 };
      await this.api.replaceNamespacedLease({
        namespace: handle.conversation.namespace,
        name: handle.leaseName,
        body: lease,
      });
      this.opts.onTransition?.('released', handle);
    } catch (err: unknown) {
      // Gone or taken meanwhile: nothing of ours to release.
      if (!isStatus(err, 404, 409)) throw err;
    }
  }

  /** Stops renewing and releases every held lease. Idempotent. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.timer !== undefined) clearInterval(this.timer);
    await Promise.allSettled([...this.held.values()].map((h) => this.release(h.handle)));
  }

  /** Renews every held lease once (the timer calls this; tests may too). */
  async renewAll(): Promise<void> {
    await Promise.allSettled([...this.held.values()].map((h) => this.renew(h)));
  }

  private async renew(held: Held): Promise<void> {
    const { conversation, leaseName } = held.handle;
    try {
      const lease = await this.api.readNamespacedLease({
        namespace: conversation.namespace,
        name: leaseName,
      });
      if (lease.spec?.holderIdentity !== this.opts.identity) {
        this.lose(held);
        return;
      }
      lease.spec = { ...lease.spec, renewTime: new V1MicroTime(this.now()) };
      const renewed = await this.api.replaceNamespacedLease({
        namespace: conversation.namespace,
        name: leaseName,
        body: lease,
      });
      held.resourceVersion = renewed.metadata?.resourceVersion ?? '';
      held.lastRenewedAtMs = this.now();
      this.opts.onTransition?.('renewed', held.handle);
    } catch (err: unknown) {
      if (isStatus(err, 404, 409)) {
        this.lose(held);
        return;
      }
      // API trouble: keep trying until the lease would have expired for others.
      if (isHeldLeaseStale(held.lastRenewedAtMs, this.durationMs, this.now())) this.lose(held);
    }
  }

  private lose(held: Held): void {
    const k = key(held.handle.conversation);
    if (this.held.get(k) === held) this.held.delete(k);
    if (held.handle.signal.aborted) return;
    held.abort.abort(
      new AppError('conflict', `lease ${held.handle.leaseName} lost; another replica may hold it`),
    );
    this.opts.onTransition?.('lost', held.handle);
  }

  private hold(
    ref: ConversationRef,
    lease: V1Lease,
    fencingToken: number,
    event: 'acquired' | 'taken_over',
  ): LeaseHandle {
    const abort = new AbortController();
    const handle: LeaseHandle = {
      conversation: ref,
      leaseName: lease.metadata?.name ?? leaseNameFor(ref.uid),
      holder: this.opts.identity,
      fencingToken,
      signal: abort.signal,
    };
    this.held.set(key(ref), {
      handle,
      abort,
      resourceVersion: lease.metadata?.resourceVersion ?? '',
      lastRenewedAtMs: this.now(),
    });
    this.opts.onTransition?.(event, handle);
    return handle;
  }

  private leaseBody(
    ref: ConversationRef,
    name: string,
    transitions: number,
    nowMs: number,
  ): V1Lease {
    const at = new V1MicroTime(nowMs);
    return {
      apiVersion: 'coordination.k8s.io/v1',
      kind: 'Lease',
      metadata: {
        name,
        namespace: ref.namespace,
        labels: {
          'app.kubernetes.io/managed-by': 'polychrome',
          'polychrome.dev/conversation': ref.name,
        },
        ...(this.opts.apiEndpoint === undefined
          ? {}
          : { annotations: { [API_ENDPOINT_ANNOTATION]: this.opts.apiEndpoint } }),
        // Garbage-collected with its conversation.
        ownerReferences: [
          {
            apiVersion: 'polychrome.dev/v1alpha1',
            kind: 'Conversation',
            name: ref.name,
            uid: ref.uid,
          },
        ],
      },
      spec: {
        holderIdentity: this.opts.identity,
        leaseDurationSeconds: Math.ceil(this.durationMs / 1000),
        acquireTime: at,
        renewTime: at,
        leaseTransitions: transitions,
      },
    };
  }
}

/** True when {@link ConversationLeases.tryAcquire} returned a held lease. */
export function isLeaseHandle(value: LeaseHandle | LeaseBusy): value is LeaseHandle {
  return 'fencingToken' in value;
}

function key(ref: ConversationRef): string {
  return `${ref.namespace}/${ref.uid}`;
}

/**
 * The reconciler's ownership check backed by these leases: a Conversation is owned while
 * this replica holds (or can take) its lease; otherwise it is retried when the lease could
 * next be taken.
 */
export function leaseOwnership(
  leases: ConversationLeases,
  nowMs: () => number = Date.now,
): (ref: ConversationRef) => Promise<{ owned: true } | { owned: false; retryAfterMs: number }> {
  return async (ref) => {
    const got = await leases.tryAcquire(ref);
    return isLeaseHandle(got)
      ? { owned: true }
      : { owned: false, retryAfterMs: Math.max(100, got.retryAtMs - nowMs()) };
  };
}
