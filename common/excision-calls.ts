/*
 * The Journal service's excision calls (StateClient's `repair` and `erase`;
 * docs/state-plane.md, "Repair" and "Erasure"): both replace entries with markers that keep
 * their leaf digests, recorded by signed `excision` events.
 */
import type { EraseResponse, RepairResponse } from '../proto/gen/polychrome/state/v1/state';
import { signedRootFromProto } from './journal-from-proto';
import type { JournalCalls } from './retire-calls';
import type { StateCallOptions } from './state-calls';
import type { EraseOutcome, RepairOutcome } from './state-journal';

/**
 * Has the state plane excise every unreadable entry of `partition` (writer role only):
 * each is replaced by a marker keeping its leaf digest and recorded by a signed
 * `excision` event naming `actor` and `reason`, in one atomic batch; with `dryRun`,
 * reports what it would excise and writes nothing (docs/state-plane.md, "Repair").
 *
 * @throws JournalFencedError as for `StateClient.append`; StateCallError
 *   `invalid_argument` (no actor or reason), `not_found`, `data_loss` (the damage is not
 *   confined to entries: restore from a backup), `permission_denied` as the server
 *   reports them.
 */
export async function repair(
  calls: JournalCalls,
  partition: string,
  request: {
    readonly actor: string;
    readonly reason: string;
    readonly dryRun?: boolean;
    readonly fencingToken?: number;
  },
  options: StateCallOptions = {},
): Promise<RepairOutcome> {
  const response = await calls.unary<RepairResponse>(
    'Repair',
    options,
    (metadata, callOptions, done) =>
      calls.grpc.repair(
        {
          partition,
          actor: request.actor,
          reason: request.reason,
          dryRun: request.dryRun ?? false,
          fencingToken: request.fencingToken ?? 0,
        },
        metadata,
        callOptions,
        done,
      ),
  );
  return {
    excised: response.excised.map((e) => ({
      position: e.position,
      leafDigest: new Uint8Array(e.leafDigest),
      problem: e.problem,
    })),
    dryRun: response.dryRun,
    head: response.head,
    signedRoot: signedRootFromProto(response.signedRoot, response.signedRootPosition),
    message: response.message,
  };
}

/**
 * Has the state plane erase the named readable content entries of `partition` (erase
 * role only; docs/state-plane.md, "Erasure"): each is replaced by a marker keeping its
 * leaf digest and recorded by a signed `excision` event marked `erased`, in one atomic
 * batch; with `dryRun`, checks everything and writes nothing.
 *
 * @throws JournalFencedError as for `StateClient.append`; StateCallError
 *   `invalid_argument`, `failed_precondition` (a position that may not be erased, named
 *   with why), `data_loss`, `permission_denied` as the server reports them.
 */
export async function erase(
  calls: JournalCalls,
  partition: string,
  request: {
    readonly positions: readonly number[];
    readonly actor: string;
    readonly reason: string;
    readonly dryRun?: boolean;
    readonly fencingToken?: number;
  },
  options: StateCallOptions = {},
): Promise<EraseOutcome> {
  const { positions, actor, reason } = request;
  const fencingToken = request.fencingToken ?? 0;
  const dryRun = request.dryRun ?? false;
  const message = { partition, positions: [...positions], actor, reason, fencingToken, dryRun };
  const response = await calls.unary<EraseResponse>('Erase', options, (metadata, call, done) =>
    calls.grpc.erase(message, metadata, call, done),
  );
  return {
    erased: response.erased.map((e) => ({
      position: e.position,
      leafDigest: new Uint8Array(e.leafDigest),
      kind: e.kind,
      turnId: e.turnId,
    })),
    dryRun: response.dryRun,
    head: response.head,
    signedRoot: signedRootFromProto(response.signedRoot, response.signedRootPosition),
    message: response.message,
  };
}
