import { CoordinationV1Api, V1MicroTime, type V1Lease } from '@kubernetes/client-node';
import { AppError } from '../../common/errors';
import { makeKeepAliveApiClient } from '../controller/keep-alive-client';
import { ConcurrencyLimit } from './concurrency-limit';
import { leaseTimings, type ConversationLeasesOptions } from './lease-options';
import { LeaseRequests, NotOurs, isStatus, toRecord } from './lease-requests';
import {
  decideAcquire,
  isHeldLeaseStale,
  leaseNameFor,
  observe,
  type Observation,
} from './lease-rules';
import {
  isLeaseHandle,
  type ConversationRef,
  type LeaseBusy,
  type LeaseHandle,
  type LeaseSource,
} from './lease-source';
import { ForgottenConversations, GONE_UIDS_KEPT, goneError } from './forgotten-conversations';

interface Held {
  handle: LeaseHandle;
  abort: AbortController;
  /** The Lease as our last write left it: the next renewal replaces it without a read. */
  lease: V1Lease;
  lastRenewedAtMs: number;
  renewing: boolean;
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
  private readonly requests: LeaseRequests;
  /** Renewals and releases in flight at once, at most `maxConcurrentRenewals`. */
  private readonly slots: ConcurrencyLimit;
  private readonly namespace: string;
  private readonly durationMs: number;
  private readonly renewIntervalMs: number;
  private readonly requestTimeoutMs: number;
  private readonly now: () => number;
  private readonly observations = new Map<string, Observation>();
  private readonly held = new Map<string, Held>();
  /** Uids of conversations the API no longer has ({@link ConversationLeases.forget}). */
  private readonly gone = new ForgottenConversations(GONE_UIDS_KEPT);
  private timer: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(private readonly opts: ConversationLeasesOptions) {
    this.namespace = opts.namespace;
    const timings = leaseTimings(opts);
    this.durationMs = timings.durationMs;
    this.renewIntervalMs = timings.renewIntervalMs;
    this.requestTimeoutMs = timings.requestTimeoutMs;
    this.now = opts.nowMs ?? Date.now;
    this.requests = new LeaseRequests({
      api: makeKeepAliveApiClient(opts.kubeConfig, CoordinationV1Api),
      namespace: this.namespace,
      identity: opts.identity,
      durationMs: this.durationMs,
      requestTimeoutMs: this.requestTimeoutMs,
    });
    this.slots = new ConcurrencyLimit(timings.maxConcurrentRenewals);
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
        const created = await this.requests.create(ref, name, 0, now);
        return this.hold(ref, created, 0, 'acquired', now);
      } catch (err: unknown) {
        if (!isStatus(err, 409)) throw err;
      }
    }
    const lease = await this.requests.read(name);
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
          const created = await this.requests.create(ref, name, 0, now);
          return this.hold(ref, created, 0, 'acquired', now);
        }
        case 'renew':
        case 'take_over': {
          const body = this.requests.body(ref, name, decision.fencingToken, now);
          body.metadata = { ...body.metadata, resourceVersion: record?.resourceVersion };
          if (decision.action === 'renew' && lease?.spec?.acquireTime !== undefined) {
            body.spec = { ...body.spec, acquireTime: lease.spec.acquireTime };
          }
          const replaced = await this.requests.replace(name, body);
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
    await this.slots.run(async () => {
      try {
        await this.requests.rewriteOurs(
          `releasing Lease ${handle.leaseName}`,
          held.lease,
          handle,
          (lease) => ({ ...lease, spec: { ...lease.spec, holderIdentity: '' } }),
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
      const raised = await this.requests.rewriteOurs(
        `raising Lease ${this.namespace}/${handle.leaseName}`,
        held.lease,
        handle,
        (lease) => ({
          ...lease,
          spec: {
            ...lease.spec,
            leaseTransitions: fencingToken,
            acquireTime: new V1MicroTime(sentAtMs),
            renewTime: new V1MicroTime(sentAtMs),
          },
        }),
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
    await this.requests.delete(name);
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
      await this.slots.run(() => this.renew(held));
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
      const renewed = await this.requests.rewriteOurs(
        `renewing Lease ${held.handle.leaseName}`,
        held.lease,
        held.handle,
        (lease) => ({ ...lease, spec: { ...lease.spec, renewTime: new V1MicroTime(sentAtMs) } }),
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
}

function key(ref: ConversationRef): string {
  return `${ref.namespace}/${ref.uid}`;
}
