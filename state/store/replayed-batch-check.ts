/**
 * The verify-before-write check that repair and erasure run on the batch they built
 * (docs/state-plane.md, "Repair" and "Erasure"): the replay of the partition, with the
 * entries they excise already in place, continued with the batch's own events, must verify
 * with nothing unsealed. A dry run stops there, by throwing {@link DryRunDone}.
 */
import { bytesEqual } from '../journal/hex';
import type { StreamingJournalVerifier } from '../journal/streaming-verifier';
import type { JournalVerification } from '../journal/verification-types';
import type { AppendBatch } from './append-batch';
import { decodeEventValue, eventKey } from './store-keys';

/** Thrown by a dry run's check, once it passed, so that nothing is written. */
export class DryRunDone extends Error {}

/**
 * The check for `writeBatch`'s `extra.check`: feeds the batch's events to `replayer`
 * after the stored ones (`head` on) and finishes it; `refusal` builds the error thrown when
 * the outcome fails or leaves events unsealed.
 */
export function replayedBatchCheck(
  partition: string,
  head: number,
  replayer: StreamingJournalVerifier,
  refusal: (outcome: JournalVerification) => Error,
  dryRun: boolean,
): (batch: AppendBatch) => Promise<void> {
  return async (batch) => {
    // The batch's own events, as a verifier will read them after the stored ones.
    let position = head;
    for (const op of batch.ops) {
      if (op.type !== 'put' || !bytesEqual(op.key, eventKey(partition, position))) continue;
      replayer.add({ position, ...decodeEventValue(op.value, partition, position) });
      position += 1;
    }
    const outcome = await replayer.finish();
    if (outcome.failure !== undefined || outcome.unsealed.count > 0) throw refusal(outcome);
    if (dryRun) throw new DryRunDone();
  };
}
