import {
  RetirePolicy as ProtoRetirePolicy,
  type JournalClient,
  type RetireResponse,
  type Retirement,
} from '../proto/gen/polychrome/state/v1/state';
import { StateCallError } from './state-call-errors';
import type { StartUnaryCall, StateCallOptions } from './state-calls';

/*
 * The Journal service's retention calls (StateClient's `retire` and `retirement`;
 * docs/state-plane.md, "Retirement"), and the retirement as the control plane and the CLI
 * see it.
 */

/** What happens to a partition when it is retired. */
export const RetirePolicy = { Checkpoint: 'checkpoint', Delete: 'delete' } as const;
export type RetirePolicy = (typeof RetirePolicy)[keyof typeof RetirePolicy];

/** What stays of a retired partition (docs/journal-format.md, "Retirement record"). */
export interface RetirementRecord {
  readonly partition: string;
  readonly policy: RetirePolicy;
  readonly retiredAtMs: number;
  readonly actor: string;
  readonly reason: string;
  /** `checkpoint` only: the signed final head, MMR root over every entry, and key. */
  readonly signed?: {
    readonly head: number;
    readonly root: Uint8Array;
    readonly keyId: string;
    readonly signature: Uint8Array;
  };
}

/** What a Retire call did. */
export interface RetireOutcome {
  readonly retirement: RetirementRecord;
  /** False when the partition was already retired: nothing changed. */
  readonly retiredNow: boolean;
  readonly eventsRemoved: number;
  readonly message: string;
}

/** What a call module (retention, excision) needs of StateClient: its gRPC client and unary runner. */
export interface JournalCalls {
  readonly grpc: JournalClient;
  readonly unary: <R>(
    method: string,
    options: StateCallOptions,
    start: StartUnaryCall<R>,
  ) => Promise<R>;
  readonly address: string;
}

function retirementFromProto(proto: Retirement | undefined, address: string): RetirementRecord {
  if (proto === undefined) {
    throw new StateCallError(
      'internal',
      `state plane at ${address} answered without a retirement`,
      {
        method: 'Retire',
        grpcStatus: 0,
        fromServer: true,
      },
    );
  }
  const base = {
    partition: proto.partition,
    retiredAtMs: proto.retiredAtMs,
    actor: proto.actor,
    reason: proto.reason,
  };
  if (proto.policy !== ProtoRetirePolicy.RETIRE_POLICY_CHECKPOINT) {
    return { ...base, policy: RetirePolicy.Delete };
  }
  return {
    ...base,
    policy: RetirePolicy.Checkpoint,
    signed: {
      head: proto.head,
      root: new Uint8Array(proto.root),
      keyId: proto.keyId,
      signature: new Uint8Array(proto.signature),
    },
  };
}

const POLICY_TO_PROTO = {
  [RetirePolicy.Checkpoint]: ProtoRetirePolicy.RETIRE_POLICY_CHECKPOINT,
  [RetirePolicy.Delete]: ProtoRetirePolicy.RETIRE_POLICY_DELETE,
} as const;

/**
 * Retires `partition` (retire role only): its events go in one atomic batch and the space
 * is reclaimed; with `checkpoint` a signed record of its final head and root stays.
 * Retiring a retired partition changes nothing (`retiredNow` false).
 *
 * @throws JournalFencedError when `fencingToken` is below the partition's mark;
 *   StateCallError `invalid_argument`, `permission_denied`, `data_loss` (a damaged
 *   partition under `checkpoint`), `unavailable`, as the server reports them.
 */
export async function retire(
  calls: JournalCalls,
  partition: string,
  request: {
    readonly policy: RetirePolicy;
    readonly actor: string;
    readonly reason: string;
    readonly fencingToken?: number;
  },
  options: StateCallOptions = {},
): Promise<RetireOutcome> {
  const body = {
    partition,
    policy: POLICY_TO_PROTO[request.policy],
    actor: request.actor,
    reason: request.reason,
    fencingToken: request.fencingToken ?? 0,
  };
  const response = await calls.unary<RetireResponse>('Retire', options, (m, o, done) =>
    calls.grpc.retire(body, m, o, done),
  );
  return {
    retirement: retirementFromProto(response.retirement, calls.address),
    retiredNow: response.retiredNow,
    eventsRemoved: response.eventsRemoved,
    message: response.message,
  };
}

/**
 * The retirement of `partition` (verifier role).
 *
 * @throws StateCallError `not_found` when it is not retired; `permission_denied`.
 */
export async function retirement(
  calls: JournalCalls,
  partition: string,
  options: StateCallOptions = {},
): Promise<RetirementRecord> {
  const response = await calls.unary<Retirement>('GetRetirement', options, (m, o, done) =>
    calls.grpc.getRetirement({ partition }, m, o, done),
  );
  return retirementFromProto(response, calls.address);
}
