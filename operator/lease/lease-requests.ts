/**
 * The requests `ConversationLeases` sends for the Leases of one namespace: create, read,
 * replace and delete, each with a deadline, and the version-checked rewrite of a Lease
 * this replica holds. Decides nothing: `lease-rules.ts` decides, `conversation-leases.ts`
 * keeps what is held.
 */
import {
  ApiException,
  Observable,
  V1MicroTime,
  type ConfigurationOptions,
  type CoordinationV1Api,
  type V1Lease,
} from '@kubernetes/client-node';
import { AppError } from '../../common/errors';
import { leaseLabelsFor, type LeaseRecord } from './lease-rules';
import type { ConversationRef, LeaseHandle } from './lease-source';

/** The Lease now has another holder (found after a conflicting write). */
export class NotOurs extends Error {
  constructor() {
    super('the lease has another holder');
  }
}

/** The API server answered with one of `codes`. */
export function isStatus(err: unknown, ...codes: number[]): boolean {
  return err instanceof ApiException && codes.includes(err.code);
}

/** What the rules read of a Lease; its duration is not among it (lease-rules.ts). */
export function toRecord(lease: V1Lease): LeaseRecord {
  return {
    holder: lease.spec?.holderIdentity ?? '',
    transitions: lease.spec?.leaseTransitions ?? 0,
    resourceVersion: lease.metadata?.resourceVersion ?? '',
  };
}

/** What {@link LeaseRequests} needs to know. */
export interface LeaseRequestsOptions {
  readonly api: CoordinationV1Api;
  /** The control plane's own namespace, where every conversation's Lease is. */
  readonly namespace: string;
  /** This replica's identity, written as holderIdentity. */
  readonly identity: string;
  readonly durationMs: number;
  /** The default deadline of one call. */
  readonly requestTimeoutMs: number;
}

export class LeaseRequests {
  private readonly api: CoordinationV1Api;
  private readonly namespace: string;

  constructor(private readonly opts: LeaseRequestsOptions) {
    this.api = opts.api;
    this.namespace = opts.namespace;
  }

  /** Creates the conversation's Lease, held by this replica at `transitions`. */
  create(ref: ConversationRef, name: string, transitions: number, nowMs: number): Promise<V1Lease> {
    return this.timed(`creating Lease ${this.namespace}/${name}`, (o) =>
      this.api.createNamespacedLease(
        { namespace: this.namespace, body: this.body(ref, name, transitions, nowMs) },
        o,
      ),
    );
  }

  /** The Lease as stored; undefined when there is none. */
  async read(name: string): Promise<V1Lease | undefined> {
    try {
      return await this.timed(`reading Lease ${this.namespace}/${name}`, (o) =>
        this.api.readNamespacedLease({ namespace: this.namespace, name }, o),
      );
    } catch (err: unknown) {
      if (!isStatus(err, 404)) throw err;
      return undefined;
    }
  }

  /** Replaces the Lease with `body` (version-checked by the resourceVersion it carries). */
  replace(name: string, body: V1Lease): Promise<V1Lease> {
    return this.timed(`replacing Lease ${this.namespace}/${name}`, (o) =>
      this.api.replaceNamespacedLease({ namespace: this.namespace, name, body }, o),
    );
  }

  /** Deletes the Lease; one already gone is done. */
  async delete(name: string): Promise<void> {
    try {
      await this.timed(`deleting Lease ${this.namespace}/${name}`, (o) =>
        this.api.deleteNamespacedLease({ namespace: this.namespace, name }, o),
      );
    } catch (err: unknown) {
      if (!isStatus(err, 404)) throw err;
    }
  }

  /**
   * Rewrites a Lease this replica holds: `change` applied to `last` (what our last write
   * returned), within one deadline (`timeoutMs`, else the request timeout). On a conflict
   * (someone else wrote it since) it is read once: if we still hold it, the write is
   * retried on what was read; if not, {@link NotOurs}.
   *
   * @throws AppError `unavailable` naming `what` when the deadline passed.
   */
  rewriteOurs(
    what: string,
    last: V1Lease,
    handle: LeaseHandle,
    change: (lease: V1Lease) => V1Lease,
    timeoutMs?: number,
  ): Promise<V1Lease> {
    return this.timed(
      what,
      (o) =>
        this.writeOurs(
          last,
          (lease, options) =>
            this.api.replaceNamespacedLease(
              { namespace: this.namespace, name: handle.leaseName, body: change(lease) },
              options,
            ),
          handle,
          o,
        ),
      timeoutMs,
    );
  }

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
    timeoutMs = this.opts.requestTimeoutMs,
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

  /** A Lease held by this replica at `transitions`, acquired and renewed at `nowMs`. */
  body(ref: ConversationRef, name: string, transitions: number, nowMs: number): V1Lease {
    const at = new V1MicroTime(nowMs);
    return {
      apiVersion: 'coordination.k8s.io/v1',
      kind: 'Lease',
      metadata: {
        name,
        namespace: this.namespace,
        // No owner reference: the Conversation is in another namespace, and the garbage
        // collector deletes a dependent whose namespaced owner is not in its own namespace.
        // The control plane deletes the Lease itself (`ConversationLeases.retire`).
        labels: leaseLabelsFor(ref),
      },
      spec: {
        holderIdentity: this.opts.identity,
        leaseDurationSeconds: Math.ceil(this.opts.durationMs / 1000),
        acquireTime: at,
        renewTime: at,
        leaseTransitions: transitions,
      },
    };
  }
}
