import { encodePayload, EventKind } from '../../common/event-kinds';
import type { Ed25519Signer } from './ed25519';
import { toHex } from './hex';
import { smallV2Journal, type V2Vectors } from './journal-vectors-v2';
import type { Sha256 } from './sha256';

/**
 * A small journal with an erased readable entry (docs/journal-format.md, "Erasure"), of
 * partition `partition`, signed by `keys[0]` with version-2 roots: 0 message_received
 * (erased), 1 turn_complete, 2 signed_root, 3 excision of 0 marked erased, 4 signed_root.
 * `leaves` is the journal as stored after the erasure: entry 0 is `{position, excised:
 * true, leafHex}`. `record` is the erasure record's payload, field by field and as bytes.
 */
export interface ErasureVectors {
  readonly description: string;
  readonly partition: string;
  readonly leaves: V2Vectors['leaves'];
  readonly signedRoots: V2Vectors['signedRoots'];
  readonly excised: readonly number[];
  readonly erased: readonly number[];
  readonly record: {
    readonly position: number;
    readonly fields: {
      readonly position: number;
      readonly leafDigestHex: string;
      readonly actor: string;
      readonly reason: string;
      readonly excisedAtMs: number;
      readonly problem: string;
      readonly erased: boolean;
      readonly erasedKind: string;
      readonly turnId: string;
    };
    readonly payloadHex: string;
  };
}

const ERASURE_PARTITION = 'conv-00000000-0000-4000-8000-000000000003';

/** Builds the erasure vectors, signed by `signer`. */
export function buildErasureVectors(hash: Sha256, signer: Ed25519Signer): ErasureVectors {
  const { push, seal, signedRoots, leaves } = smallV2Journal(hash, signer, ERASURE_PARTITION);
  const erasedLeaf = push(
    EventKind.MessageReceived,
    encodePayload(EventKind.MessageReceived, {
      turnId: 'turn-1',
      idempotencyKey: 'key-1',
      text: 'my phone number is 555-0100',
      attribution: { caller: 'email:ada@example.com', participants: [], persona: '', session: '' },
      receivedAtMs: 1_700_000_000_000,
    }),
  );
  push(
    EventKind.TurnComplete,
    encodePayload(EventKind.TurnComplete, {
      turnId: 'turn-1',
      text: 'Noted.',
      steps: 1,
      completedAtMs: 1_700_000_001_000,
      fallback: false,
    }),
  );
  seal();
  const fields = {
    position: 0,
    leafDigestHex: toHex(erasedLeaf),
    actor: 'email:admin@example.com',
    reason: 'erasure request 17',
    excisedAtMs: 1_700_000_002_000,
    problem: '',
    erased: true,
    erasedKind: EventKind.MessageReceived,
    turnId: 'turn-1',
  };
  const { leafDigestHex: _hex, ...rest } = fields;
  const payload = encodePayload(EventKind.Excision, {
    ...rest,
    leafDigest: Buffer.from(erasedLeaf),
  });
  push(EventKind.Excision, payload);
  seal();
  return {
    description:
      'An erasure: the readable message_received at 0 is erased (excised on request) and keeps ' +
      'its leaf digest, recorded by the excision event at 3 marked erased, with the kind and ' +
      'turn it had; the journal verifies as `partition`, excised [0], erased [0].',
    partition: ERASURE_PARTITION,
    leaves: leaves([0]),
    signedRoots,
    excised: [0],
    erased: [0],
    record: { position: 3, fields, payloadHex: toHex(payload) },
  };
}
