import {
  ApiException,
  CoordinationV1Api,
  Observable,
  V1MicroTime,
  type ConfigurationOptions,
  type KubeConfig,
  type V1Lease,
} from '@kubernetes/client-node';
import { AppError } from '../../common/errors';
import { makeKeepAliveApiClient } from '../controller/kube-client';
import {
  decideAcquire,
  isHeldLeaseStale,
  leaseLabelsFor,
  leaseNameFor,
  observe,
  type LeaseRecord,
  type Observation,
} from './lease-rules';

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
  /**
   * The holder's identity as the Lease says (anyone who may write the Lease can change it:
   * use it as a name to look up, never as an address).
   */
  readonly holder: string;
  /** When this replica may try again (local clock). */
  readonly retryAtMs: number;
}

/** What the turn coordinator uses of the leases ({@link ConversationLeases} in production). */
export interface LeaseSource {
  /** The conversation's lease: held already, taken now, or busy (another replica holds it). */
  tryAcquire(ref: ConversationRef): Promise<LeaseHandle | LeaseBusy>;
  /**
   * Raises a held lease's fencing token past `highestToken`, the highest the journal has
   * accepted, when the Lease started over below it (see
   * {@link ConversationLeases.advancePast}). Undefined: this source's leases never start over.
   */
  advancePast?(handle: LeaseHandle, highestToken: number): Promise<LeaseHandle | undefined>;
}

/** Options for {@link ConversationLeases}. */
export interface ConversationLeasesOptions {
  kubeConfig: KubeConfig;
  /**
   * The control plane's own namespace: every conversation's Lease is there, whatever the
   * conversation's namespace, so that only the control plane's ServiceAccount (which alone
   * may write Leases there) can change one (docs/operator.md, "Conversation leases").
   */
  namespace: string;
  /** This replica's identity, written as holderIdentity (e.g. the pod name). */
  identity: string;
  /**
   * How long a lease lasts. The only duration expiry is judged by: the Lease's own
   * `leaseDurationSeconds` is written from it for people to read, and never read back.
   * @default 15000
   */
  leaseDurationMs?: number;
  /** @default 5000 */
  renewIntervalMs?: number;
  /**
   * Longest wait for the API server to answer one request (create, read, replace). A
   * request that takes longer is aborted and fails like any other: a timed-out renewal is
   * a failed renewal. A renewal also never waits past the lease's expiry, so a hung API
   * server cannot keep this replica believing it holds a lease others may take. Must be
   * shorter than `leaseDurationMs`.
   * @default min(5000, leaseDurationMs / 3)
   */
  requestTimeoutMs?: number;
  /**
   * Renewals (and releases) in flight at once. Each held lease is renewed on its own
   * schedule, `renewIntervalMs` after its last renewal, so renewals spread over the
   * interval instead of arriving together. @default 8
   */
  maxConcurrentRenewals?: number;
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
  /** The Lease as our last write left it: the next renewal replaces it without a read. */
  lease: V1Lease;
  lastRenewedAtMs: number;
  renewing: boolean;
}

/** What the rules read of a Lease; its duration is not among it (lease-rules.ts). */
function toRecord(lease: V1Lease): LeaseRecord {
  return {
    holder: lease.spec?.holderIdentity ?? '',
    transitions: lease.spec?.leaseTransitions ?? 0,
    resourceVersion: lease.metadata?.resourceVersion ?? '',
  };
}

function isStatus(err: unknown, ...codes: number[]): boolean {
  return err instanceof ApiException && codes.includes(err.code);
}

/**
 * One coordination.k8s.io/v1 Lease per conversation, in the control plane's own namespace,
 * so exactly one control-plane replica writes a conversation's turns and status. Acquire is
 * a version-checked create, or a version-checked replace of a released or expired lease; a
 * lost race is a 409 and means "someone else holds it". Held leases are renewed `renewIntervalMs` after their last
 * renewal and released (holder cleared) on {@link ConversationLeases.close}.
 *
 * Cost per conversation: acquiring a fresh lease is one create (a lease this replica has
 * never seen is created first and read only if that fails); each renewal is one replace
 * of the Lease as our last write returned it (a read follows only a conflict), so N held
 * leases cost N / renewIntervalMs writes per second, spread evenly, at most
 * `maxConcurrentRenewals` at a time.
 */
export class ConversationLeases implements LeaseSource {
  private readonly api: CoordinationV1Api;
  private readonly namespace: string;
  private readonly durationMs: number;
  private readonly renewIntervalMs: number;
  private readonly requestTimeoutMs: number;
  private readonly maxConcurrent: number;
  private readonly now: () => number;
  private readonly observations = new Map<string, Observation>();
  private readonly held = new Map<string, Held>();
  /** Uids of conversations the API no longer has ({@link ConversationLeases.forget}). */
  private readonly gone = new RecentUids(GONE_UIDS_KEPT);
  private timer: NodeJS.Timeout | undefined;
  private inFlight = 0;
  private readonly slotWaiters: (() => void)[] = [];
  private closed = false;

  constructor(private readonly opts: ConversationLeasesOptions) {
    this.api = makeKeepAliveApiClient(opts.kubeConfig, CoordinationV1Api);
    this.namespace = opts.namespace;
    if (this.namespace === '') {
      throw new AppError(
        'invalid_argument',
        "conversation leases need the control plane's own namespace (POLYCHROME_NAMESPACE or POD_NAMESPACE); got an empty one",
      );
    }
    this.durationMs = opts.leaseDurationMs ?? 15_000;
    this.renewIntervalMs = opts.renewIntervalMs ?? 5_000;
    this.requestTimeoutMs =
      opts.requestTimeoutMs ?? Math.min(5_000, Math.floor(this.durationMs / 3));
    this.maxConcurrent = Math.max(1, opts.maxConcurrentRenewals ?? 8);
    this.now = opts.nowMs ?? Date.now;
    if (this.renewIntervalMs >= this.durationMs) {
      throw new AppError(
        'invalid_argument',
        `lease renew interval ${this.renewIntervalMs} ms must be shorter than the lease duration ${this.durationMs} ms`,
      );
    }
    if (
      !Number.isSafeInteger(this.requestTimeoutMs) ||
      this.requestTimeoutMs <= 0 ||
      this.requestTimeoutMs >= this.durationMs
    ) {
      throw new AppError(
        'invalid_argument',
        `lease request timeout ${this.requestTimeoutMs} ms must be a positive integer shorter than the lease duration ${this.durationMs} ms`,
      );
    }
  }

  /** Starts renewing held leases, each when it is due. */
  start(): void {
    if (this.timer !== undefined || this.closed) return;
    // A tenth of the interval: a lease is renewed at most that late.
    const tickMs = Math.max(50, Math.floor(this.renewIntervalMs / 10));
    this.timer = setInterval(() => this.renewDue(), tickMs);
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
    if (this.gone.has(ref.uid)) throw goneError(ref);
    const got = await this.acquire(ref);
    // Forgotten while the create or replace was in flight: a caller whose cache had not yet
    // seen the deletion made a Lease for a conversation that no longer exists. Delete it
    // again, or it would be renewed forever.
    if (isLeaseHandle(got) && this.gone.has(ref.uid)) {
      await this.retire(ref);
      throw goneError(ref);
    }
    return got;
  }

  private async acquire(ref: ConversationRef): Promise<LeaseHandle | LeaseBusy> {
    const existing = this.current(ref);
    if (existing !== undefined) return existing;
    const name = leaseNameFor(ref.uid);
    const obsKey = key(ref);
    if (!this.observations.has(obsKey)) {
      // Never seen here: most likely a new conversation with no Lease yet. Create it
      // without reading first; AlreadyExists means it exists, and it is read below.
      const now = this.now();
      try {
        const created = await this.timed(`creating Lease ${this.namespace}/${name}`, (o) =>
          this.api.createNamespacedLease(
            { namespace: this.namespace, body: this.leaseBody(ref, name, 0, now) },
            o,
          ),
        );
        return this.hold(ref, created, 0, 'acquired', now);
      } catch (err: unknown) {
        if (!isStatus(err, 409)) throw err;
      }
    }
    let lease: V1Lease | undefined;
    try {
      lease = await this.timed(`reading Lease ${this.namespace}/${name}`, (o) =>
        this.api.readNamespacedLease({ namespace: this.namespace, name }, o),
      );
    } catch (err: unknown) {
      if (!isStatus(err, 404)) throw err;
    }
    const now = this.now();
    const record = lease === undefined ? undefined : toRecord(lease);
    if (record !== undefined)
      this.observations.set(obsKey, observe(record, this.observations.get(obsKey), now));
    const decision = decideAcquire(
      record,
      this.observations.get(obsKey),
      this.opts.identity,
      now,
      this.durationMs,
    );
    try {
      switch (decision.action) {
        case 'wait':
          return { holder: decision.holder, retryAtMs: decision.retryAtMs };
        case 'create': {
          const created = await this.timed(`creating Lease ${this.namespace}/${name}`, (o) =>
            this.api.createNamespacedLease(
              { namespace: this.namespace, body: this.leaseBody(ref, name, 0, now) },
              o,
            ),
          );
          return this.hold(ref, created, 0, 'acquired', now);
        }
        case 'renew':
        case 'take_over': {
          const body = this.leaseBody(ref, name, decision.fencingToken, now);
          body.metadata = { ...body.metadata, resourceVersion: record?.resourceVersion };
          if (decision.action === 'renew' && lease?.spec?.acquireTime !== undefined) {
            body.spec = { ...body.spec, acquireTime: lease.spec.acquireTime };
          }
          const replaced = await this.timed(`replacing Lease ${this.namespace}/${name}`, (o) =>
            this.api.replaceNamespacedLease({ namespace: this.namespace, name, body }, o),
          );
          return this.hold(
            ref,
            replaced,
            decision.fencingToken,
            decision.action === 'renew' ? 'acquired' : 'taken_over',
            now,
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
    await this.limited(async () => {
      const released = (lease: V1Lease, o: ConfigurationOptions): Promise<V1Lease> =>
        this.api.replaceNamespacedLease(
          {
            namespace: this.namespace,
            name: handle.leaseName,
            body: { ...lease, spec: { ...lease.spec, holderIdentity: '' } },
          },
          o,
        );
      try {
        await this.timed(`releasing Lease ${handle.leaseName}`, (o) =>
          this.writeOurs(held.lease, released, handle, o),
        );
        this.opts.onTransition?.('released', handle);
      } catch (err: unknown) {
        // Gone or taken meanwhile: nothing of ours to release.
        if (!isStatus(err, 404, 409) && !(err instanceof NotOurs)) throw err;
      }
    });
  }

  /**
   * Raises the fencing token of a lease this replica holds past `highestToken`, the highest
   * token the conversation's journal has accepted (docs/state-plane.md, "Fencing"), when
   * the Lease still names this replica at the handle's token. That happens when the Lease
   * started over below the journal's mark: it was deleted and created again, or it is the
   * first one after an upgrade from Leases in conversation namespaces (docs/operator.md,
   * "Conversation leases"). One version-checked replace sets `leaseTransitions` to
   * `highestToken + 1`, as a take-over would: the old handle is lost and the new one
   * returned. Safe because only the control plane writes the Lease: a writer with a higher
   * token that the Lease does not name had its Lease deleted under it, and it is fenced
   * from the first write made with the new token on.
   *
   * @returns the new handle; undefined when the journal is not ahead of the handle, or the
   *   Lease is gone or names another holder or another token (a real take-over: this
   *   replica lost it, and its next renewal says so).
   * @throws ApiException or AppError `unavailable` when the API server fails or times out.
   */
  async advancePast(handle: LeaseHandle, highestToken: number): Promise<LeaseHandle | undefined> {
    const held = this.held.get(key(handle.conversation));
    if (held === undefined || held.handle !== handle || highestToken < handle.fencingToken)
      return undefined;
    const fencingToken = highestToken + 1;
    const sentAtMs = this.now();
    try {
      const raised = await this.timed(`raising Lease ${this.namespace}/${handle.leaseName}`, (o) =>
        this.writeOurs(
          held.lease,
          (lease, options) =>
            this.api.replaceNamespacedLease(
              {
                namespace: this.namespace,
                name: handle.leaseName,
                body: {
                  ...lease,
                  spec: {
                    ...lease.spec,
                    leaseTransitions: fencingToken,
                    acquireTime: new V1MicroTime(sentAtMs),
                    renewTime: new V1MicroTime(sentAtMs),
                  },
                },
              },
              options,
            ),
          handle,
          o,
        ),
      );
      held.abort.abort(
        new AppError(
          'conflict',
          `lease ${handle.leaseName} moved on to fencing token ${String(fencingToken)}; act with the new handle`,
        ),
      );
      return this.hold(handle.conversation, raised, fencingToken, 'taken_over', sentAtMs);
    } catch (err: unknown) {
      // Not ours to move: the fence stopped this write, and the next renewal finds the
      // lease gone and gives it up, as it would have without this call.
      if (isStatus(err, 404) || err instanceof NotOurs) return undefined;
      throw err;
    }
  }

  /**
   * The conversation is being deleted (its sandbox is gone; its finalizer comes off next):
   * stops holding its lease and deletes its Lease. The Lease is in the control plane's
   * namespace, so nothing else deletes it. Idempotent; a Lease already gone is done.
   *
   * @throws ApiException or AppError `unavailable` when the delete fails; the caller retries.
   */
  async retire(ref: ConversationRef): Promise<void> {
    const k = key(ref);
    const held = this.held.get(k);
    if (held !== undefined) {
      this.held.delete(k);
      held.abort.abort(new AppError('cancelled', `conversation ${ref.uid} is being deleted`));
    }
    this.observations.delete(k);
    const name = leaseNameFor(ref.uid);
    try {
      await this.timed(`deleting Lease ${this.namespace}/${name}`, (o) =>
        this.api.deleteNamespacedLease({ namespace: this.namespace, name }, o),
      );
    } catch (err: unknown) {
      if (!isStatus(err, 404)) throw err;
    }
  }

  /**
   * The conversation is gone from the API (its informer reported the deletion): retires its
   * Lease as {@link retire} does, and never takes one for its uid again. Every replica
   * calls this, not only the one that ran the finalizer: another replica whose cache still
   * held the Conversation may have created the Lease again after it was retired (it found
   * none, and a missing Lease is free to take). Uids are never reused, so refusing this one
   * for good loses nothing. Only the most recent {@link GONE_UIDS_KEPT} are remembered; a
   * conversation deleted longer ago is in no replica's cache to act on.
   *
   * @throws ApiException or AppError `unavailable` when the delete fails.
   */
  async forget(ref: ConversationRef): Promise<void> {
    this.gone.add(ref.uid);
    await this.retire(ref);
  }

  /** Stops renewing and releases every held lease. Idempotent. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.timer !== undefined) clearInterval(this.timer);
    await Promise.allSettled([...this.held.values()].map((h) => this.release(h.handle)));
  }

  /** Renews every held lease once, now (tests; the timer renews each lease when due). */
  async renewAll(): Promise<void> {
    await Promise.allSettled(
      [...this.held.values()].filter((h) => !h.renewing).map((h) => this.queueRenewal(h)),
    );
  }

  /** Queues the renewals that are due, oldest first; they run as slots free up. */
  private renewDue(): void {
    if (this.closed) return;
    const now = this.now();
    const due = [...this.held.values()]
      .filter((h) => !h.renewing && now - h.lastRenewedAtMs >= this.renewIntervalMs)
      .sort((a, b) => a.lastRenewedAtMs - b.lastRenewedAtMs);
    // renew() handles API failures; the catch is for a throwing onTransition.
    for (const held of due) void this.queueRenewal(held).catch(() => undefined);
  }

  private async queueRenewal(held: Held): Promise<void> {
    held.renewing = true;
    try {
      await this.limited(() => this.renew(held));
    } finally {
      held.renewing = false;
    }
  }

  private async renew(held: Held): Promise<void> {
    if (this.held.get(key(held.handle.conversation)) !== held) return;
    // The lease counts from when the renewal was sent, not from its answer: others judge
    // its expiry from a write made after the send, so a late answer must not extend it.
    const sentAtMs = this.now();
    const leftMs = held.lastRenewedAtMs + this.durationMs - sentAtMs;
    if (leftMs <= 0) {
      this.lose(held);
      return;
    }
    try {
      const renewed = await this.timed(
        `renewing Lease ${held.handle.leaseName}`,
        (o) =>
          this.writeOurs(
            held.lease,
            (lease, options) =>
              this.api.replaceNamespacedLease(
                {
                  namespace: this.namespace,
                  name: held.handle.leaseName,
                  body: { ...lease, spec: { ...lease.spec, renewTime: new V1MicroTime(sentAtMs) } },
                },
                options,
              ),
            held.handle,
            o,
          ),
        // Never past the lease's expiry: by then this replica must know it lost it.
        Math.min(this.requestTimeoutMs, leftMs),
      );
      held.lease = renewed;
      held.lastRenewedAtMs = sentAtMs;
      this.opts.onTransition?.('renewed', held.handle);
    } catch (err: unknown) {
      if (isStatus(err, 404) || err instanceof NotOurs) {
        this.lose(held);
        return;
      }
      // API trouble: keep trying until the lease would have expired for others.
      if (isHeldLeaseStale(held.lastRenewedAtMs, this.durationMs, this.now())) this.lose(held);
    }
  }

  /**
   * Replaces the Lease starting from `last` (what our last write returned). On a conflict
   * (someone else wrote it since) it is read once: if we still hold it, the write is
   * retried on what was read; if not, {@link NotOurs}.
   */
  private async writeOurs(
    last: V1Lease,
    write: (lease: V1Lease, options: ConfigurationOptions) => Promise<V1Lease>,
    handle: LeaseHandle,
    options: ConfigurationOptions,
  ): Promise<V1Lease> {
    try {
      return await write(last, options);
    } catch (err: unknown) {
      if (!isStatus(err, 409)) throw err;
    }
    const current = await this.api.readNamespacedLease(
      { namespace: this.namespace, name: handle.leaseName },
      options,
    );
    if (
      current.spec?.holderIdentity !== this.opts.identity ||
      (current.spec.leaseTransitions ?? 0) !== handle.fencingToken
    )
      throw new NotOurs();
    return write(current, options);
  }

  /**
   * Runs `call` with request options that abort every API request made with them once
   * `timeoutMs` has passed since this call began (one deadline for all of them), so a
   * hung API server fails the call instead of holding it, and the renewal slot, forever.
   *
   * @throws AppError `unavailable` naming `what` when the deadline aborted the call; what
   *   `call` threw otherwise (an answer that came in time, e.g. a 409, stays as it was).
   */
  private async timed<T>(
    what: string,
    call: (options: ConfigurationOptions) => Promise<T>,
    timeoutMs = this.requestTimeoutMs,
  ): Promise<T> {
    const signal = AbortSignal.timeout(timeoutMs);
    const options: ConfigurationOptions = {
      middleware: [
        {
          pre: (context) => {
            context.setSignal(signal);
            return new Observable(Promise.resolve(context));
          },
          post: (context) => new Observable(Promise.resolve(context)),
        },
      ],
      middlewareMergeStrategy: 'append',
    };
    try {
      return await call(options);
    } catch (err: unknown) {
      if (!signal.aborted || err instanceof ApiException || err instanceof NotOurs) throw err;
      throw new AppError(
        'unavailable',
        `the Kubernetes API server did not answer ${what} within ${String(timeoutMs)} ms; ` +
          'the request was abandoned (a renewal that times out has failed); check the API server and retry',
        { cause: err },
      );
    }
  }

  /** Runs `task` when fewer than `maxConcurrentRenewals` renewals or releases are running. */
  private async limited<T>(task: () => Promise<T>): Promise<T> {
    while (this.inFlight >= this.maxConcurrent) {
      await new Promise<void>((resolve) => this.slotWaiters.push(resolve));
    }
    this.inFlight += 1;
    try {
      return await task();
    } finally {
      this.inFlight -= 1;
      this.slotWaiters.shift()?.();
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

  /** `sentAtMs`: when the write that took the lease was sent; the lease counts from then. */
  private hold(
    ref: ConversationRef,
    lease: V1Lease,
    fencingToken: number,
    event: 'acquired' | 'taken_over',
    sentAtMs: number,
  ): LeaseHandle {
    const abort = new AbortController();
    const handle: LeaseHandle = {
      conversation: ref,
      leaseName: lease.metadata?.name ?? leaseNameFor(ref.uid),
      holder: this.opts.identity,
      fencingToken,
      signal: abort.signal,
    };
    this.held.set(key(ref), { handle, abort, lease, lastRenewedAtMs: sentAtMs, renewing: false });
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
        namespace: this.namespace,
        // No owner reference: the Conversation is in another namespace, and the garbage
        // collector deletes a dependent whose namespaced owner is not in its own namespace.
        // The control plane deletes the Lease itself ({@link ConversationLeases.retire}).
        labels: leaseLabelsFor(ref),
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

/** The Lease now has another holder (found after a conflicting write). */
class NotOurs extends Error {
  constructor() {
    super('the lease has another holder');
  }
}

/** How many forgotten conversation uids {@link ConversationLeases} remembers. */
export const GONE_UIDS_KEPT = 4096;

/** A set of the most recently added uids, the oldest dropped past `limit`. */
class RecentUids {
  private readonly uids = new Set<string>();
  constructor(private readonly limit: number) {}

  add(uid: string): void {
    this.uids.delete(uid);
    this.uids.add(uid);
    if (this.uids.size > this.limit) {
      const oldest = this.uids.values().next();
      if (oldest.done !== true) this.uids.delete(oldest.value);
    }
  }

  has(uid: string): boolean {
    return this.uids.has(uid);
  }
}

function goneError(ref: ConversationRef): AppError {
  return new AppError(
    'not_found',
    `conversation ${ref.namespace}/${ref.name} (uid ${ref.uid}) was deleted; its lease is not taken again. ` +
      'A new Conversation of the same name has a new uid: send to that one',
    { details: { namespace: ref.namespace, name: ref.name, uid: ref.uid } },
  );
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
