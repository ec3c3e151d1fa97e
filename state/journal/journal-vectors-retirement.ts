import { CompactMmr } from './compact-mmr';
import type { Ed25519Signer } from './ed25519';
import { fromHex, toHex } from './hex';
import type { V2Vectors } from './journal-vectors-v2';
import { retirementMessage, signRetirement } from './retirement-record';
import type { Sha256 } from './sha256';

/**
 * A retirement record (docs/journal-format.md, "Retirement record") of the version-2
 * journal of the vectors, as the state plane keeps it when that partition is retired with
 * policy checkpoint: its final head, the MMR root over all its entries, signed by `keys[0]`.
 */
export interface RetirementVector {
  readonly description: string;
  readonly partition: string;
  readonly head: number;
  readonly rootHex: string;
  readonly retiredAtMs: number;
  readonly keyId: string;
  readonly messageHex: string;
  readonly signatureHex: string;
}

/** Builds the retirement vector of `v2`'s journal, signed by `signer`. */
export function buildRetirementVector(
  hash: Sha256,
  signer: Ed25519Signer,
  v2: V2Vectors,
): RetirementVector {
  const mmr = new CompactMmr(hash);
  for (const leaf of v2.leaves) mmr.append(fromHex(leaf.leafHex));
  const fields = {
    partition: v2.partition,
    head: v2.leaves.length,
    root: mmr.root(),
    retiredAtMs: 1_700_000_000_000,
  };
  const signed = signRetirement(hash, signer, fields);
  return {
    description:
      'The retirement record of the version-2 journal: its head, the MMR root over all its ' +
      'entries (section 5), and when, signed by keys[0] over the retirement message.',
    partition: fields.partition,
    head: fields.head,
    rootHex: toHex(fields.root),
    retiredAtMs: fields.retiredAtMs,
    keyId: signed.keyId,
    messageHex: toHex(retirementMessage(fields)),
    signatureHex: toHex(signed.signature),
  };
}
