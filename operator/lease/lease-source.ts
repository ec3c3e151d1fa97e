/**
 * What the turn code uses of a conversation's lease, whoever keeps it: the handle of a
 * lease held, or who holds it instead. `ConversationLeases` keeps them as Kubernetes
 * Leases; the turn coordinator sees only {@link LeaseSource}.
 */

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

/** Why {@link LeaseSource.tryAcquire} did not get the lease. */
export interface LeaseBusy {
  /**
   * The holder's identity as the Lease says (anyone who may write the Lease can change it:
   * use it as a name to look up, never as an address).
   */
  readonly holder: string;
  /** When this replica may try again (local clock). */
  readonly retryAtMs: number;
}

/** What the turn coordinator uses of the leases (`ConversationLeases` in production). */
export interface LeaseSource {
  /** The conversation's lease: held already, taken now, or busy (another replica holds it). */
  tryAcquire(ref: ConversationRef): Promise<LeaseHandle | LeaseBusy>;
  /**
   * Raises a held lease's fencing token past `highestToken`, the highest the journal has
   * accepted, when the Lease started over below it (see `ConversationLeases.advancePast`).
   * Undefined: this source's leases never start over.
   */
  advancePast?(handle: LeaseHandle, highestToken: number): Promise<LeaseHandle | undefined>;
}

/** True when {@link LeaseSource.tryAcquire} returned a held lease. */
export function isLeaseHandle(value: LeaseHandle | LeaseBusy): value is LeaseHandle {
  return 'fencingToken' in value;
}
