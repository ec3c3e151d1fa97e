import type { KubeConfig } from '@kubernetes/client-node';
import { AppError } from '../../common/errors';
import type { LeaseHandle } from './lease-source';

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

/** The timings {@link leaseTimings} settles on. */
export interface LeaseTimings {
  readonly durationMs: number;
  readonly renewIntervalMs: number;
  readonly requestTimeoutMs: number;
  readonly maxConcurrentRenewals: number;
}

/**
 * The options' timings with their defaults, checked against each other.
 *
 * @throws AppError `invalid_argument` for an empty namespace, a renew interval not shorter
 *   than the duration, or a request timeout that is not a positive integer shorter than it.
 */
export function leaseTimings(opts: ConversationLeasesOptions): LeaseTimings {
  if (opts.namespace === '') {
    throw new AppError(
      'invalid_argument',
      "conversation leases need the control plane's own namespace (POLYCHROME_NAMESPACE or POD_NAMESPACE); got an empty one",
    );
  }
  const durationMs = opts.leaseDurationMs ?? 15_000;
  const renewIntervalMs = opts.renewIntervalMs ?? 5_000;
  const requestTimeoutMs = opts.requestTimeoutMs ?? Math.min(5_000, Math.floor(durationMs / 3));
  const maxConcurrentRenewals = Math.max(1, opts.maxConcurrentRenewals ?? 8);
  if (renewIntervalMs >= durationMs) {
    throw new AppError(
      'invalid_argument',
      `lease renew interval ${renewIntervalMs} ms must be shorter than the lease duration ${durationMs} ms`,
    );
  }
  if (
    !Number.isSafeInteger(requestTimeoutMs) ||
    requestTimeoutMs <= 0 ||
    requestTimeoutMs >= durationMs
  ) {
    throw new AppError(
      'invalid_argument',
      `lease request timeout ${requestTimeoutMs} ms must be a positive integer shorter than the lease duration ${durationMs} ms`,
    );
  }
  return { durationMs, renewIntervalMs, requestTimeoutMs, maxConcurrentRenewals };
}
