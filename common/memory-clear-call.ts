/*
 * The Journal service's `ClearMemory` (StateClient's `clearMemory`; docs/state-plane.md,
 * "Memory clears"): a person's `memory_cleared` and the erasure of the `memory_set`
 * entries it names, in one atomic batch.
 */
import type { ClearMemoryResponse } from '../proto/gen/polychrome/state/v1/state';
import { signedRootFromProto } from './journal-from-proto';
import type { JournalCalls } from './retire-calls';
import { StateCallError } from './state-call-errors';
import type { AppendCallOptions, ClearMemoryOutcome, NewJournalEvent } from './state-journal';

/**
 * Appends `cleared` (a `memory_cleared`) at `expectedHead` and has the state plane erase
 * the `memory_set` entries its `set_positions` name, in one atomic batch (writer role).
 *
 * @throws JournalConflictError, JournalFencedError as for `StateClient.append`;
 *   StateCallError `permission_denied` when a named position is not a `memory_set` of the
 *   cleared key, `invalid_argument`, `failed_precondition`, `data_loss` as the server
 *   reports them.
 */
export async function clearMemory(
  calls: JournalCalls,
  partition: string,
  expectedHead: number,
  cleared: NewJournalEvent,
  options: AppendCallOptions = {},
): Promise<ClearMemoryOutcome> {
  const message = {
    partition,
    expectedHead,
    fencingToken: options.fencingToken ?? 0,
    expectedRoot: Buffer.from(options.expectedRoot ?? new Uint8Array(0)),
    memoryCleared: Buffer.from(cleared.payload),
  };
  const response = await calls.unary<ClearMemoryResponse>(
    'ClearMemory',
    options,
    (metadata, call, done) => calls.grpc.clearMemory(message, metadata, call, done),
  );
  const signedRoot = signedRootFromProto(response.signedRoot, response.signedRootPosition);
  if (signedRoot === undefined) {
    throw new StateCallError(
      'internal',
      `state plane: ClearMemory of ${partition} answered without a signed root`,
      { method: 'ClearMemory', grpcStatus: 0, fromServer: true },
    );
  }
  return {
    firstPosition: response.firstPosition,
    head: response.head,
    signedRoot,
    erased: response.erased.map((e) => ({
      position: e.position,
      leafDigest: new Uint8Array(e.leafDigest),
      kind: e.kind,
      turnId: e.turnId,
    })),
  };
}
