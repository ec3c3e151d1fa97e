import { encodePayload, EventKind } from '../../common/event-kinds';
import { CompactMmr } from './compact-mmr';
import type { Ed25519Signer } from './ed25519';
import { toHex } from './hex';
import { keyRotationMessage } from '../../common/journal-keys';
import { LeafHasher } from './leaf-digest';
import { rotateKey, signedRootMessage, signedRootPayload, signRoot } from './signed-root';
import { fillerBytes, type VectorCrypto } from './vector-bytes';
import type { JournalEvent } from './verification-types';

/*
 * The events of the vector journal: batches of a plausible conversation, each closed by a
 * `signed_root`, with one key rotation in the middle, payloads computed as a writer would.
 */

/** Number of events in the vector journal. */
export const VECTOR_EVENT_COUNT = 200;

/** A signed root of the vector journal, with the bytes it signs. */
export interface SignedRootVector {
  readonly position: number;
  readonly leafCount: number;
  readonly rootHex: string;
  readonly publicKeyHex: string;
  readonly keyId: string;
  readonly messageHex: string;
  readonly signatureHex: string;
}

/** The key rotation of the vector journal, with the bytes the old key signs. */
export interface KeyRotationVector {
  readonly position: number;
  readonly oldKeyId: string;
  readonly oldPublicKeyHex: string;
  readonly newKeyId: string;
  readonly newPublicKeyHex: string;
  readonly messageHex: string;
  readonly signatureHex: string;
}

// Batches of a plausible conversation; each is followed by a signed_root. Payload sizes
// hit SHA-256 padding edges (55/56/64 bytes of preimage and payload) and the empty and
// multi-KB cases.
const K = EventKind;
const BATCHES: readonly (readonly (readonly [EventKind, number])[])[] = [
  [
    [K.MessageReceived, 0],
    [K.TurnDispatched, 31],
  ],
  [
    [K.ModelCall, 55],
    [K.ToolCall, 56],
    [K.ToolResult, 4096],
    [K.ModelCall, 64],
    [K.TurnComplete, 120],
  ],
  [
    [K.MessageReceived, 1],
    [K.IngressDirective, 17],
    [K.TurnDispatched, 90],
  ],
  [
    [K.ModelCall, 300],
    [K.ToolCall, 63],
    [K.ApprovalRequest, 200],
  ],
  [[K.ApprovalResponse, 150]],
  [
    [K.ToolCall, 80],
    [K.ToolResult, 9000],
    [K.PaymentCharge, 44],
    [K.OutboundPaymentReceipt, 33],
  ],
  [
    [K.ModelCall, 1024],
    [K.QuestionRequest, 70],
  ],
  [
    [K.QuestionResponse, 32],
    [K.MemorySet, 48],
    [K.MemoryCleared, 0],
    [K.TurnComplete, 513],
  ],
  [
    [K.MessageReceived, 65],
    [K.TurnDispatched, 88],
    [K.ModelCall, 2048],
    [K.Handoff, 40],
  ],
  [
    [K.TurnAmbiguous, 27],
    [K.ConversationClosed, 0],
  ],
  [
    [K.ConversationReopened, 12],
    [K.MessageReceived, 5000],
    [K.TurnDispatched, 91],
  ],
];

/** An event of the vector journal, with what it adds to the vectors. */
export interface VectorEvent extends JournalEvent {
  readonly signedRoot?: SignedRootVector;
  readonly rotation?: KeyRotationVector;
}

/** The vector journal's events, signed_root and key_rotated payloads computed as a writer would. */
export function vectorEvents(
  crypto: VectorCrypto,
  first: Ed25519Signer,
  second: Ed25519Signer,
): VectorEvent[] {
  const { hash } = crypto;
  const events: VectorEvent[] = [];
  const leafHasher = new LeafHasher(hash);
  const mmr = new CompactMmr(hash);
  const push = (event: VectorEvent): void => {
    events.push(event);
    mmr.append(leafHasher.digest(event.position, event.kind, event.payload));
  };
  let signer = first;
  let rotated = false;
  for (let b = 0; events.length < VECTOR_EVENT_COUNT; b++) {
    const room = VECTOR_EVENT_COUNT - events.length - 1;
    if (!rotated && events.length >= 100 && room >= 1) {
      // Rotation is a batch of its own; the root closing it is the first by the new key.
      const rotation = rotateKey(hash, signer, second.publicKey);
      push({
        position: events.length,
        kind: EventKind.KeyRotated,
        payload: encodePayload(EventKind.KeyRotated, {
          oldKeyId: rotation.oldKeyId,
          newKeyId: rotation.newKeyId,
          newPublicKey: Buffer.from(rotation.newPublicKey),
          signatureByOldKey: Buffer.from(rotation.signatureByOldKey),
        }),
        rotation: {
          position: events.length,
          oldKeyId: rotation.oldKeyId,
          oldPublicKeyHex: toHex(signer.publicKey),
          newKeyId: rotation.newKeyId,
          newPublicKeyHex: toHex(rotation.newPublicKey),
          messageHex: toHex(keyRotationMessage(rotation.newPublicKey)),
          signatureHex: toHex(rotation.signatureByOldKey),
        },
      });
      signer = second;
      rotated = true;
    } else {
      const batch = BATCHES[b % BATCHES.length] ?? [];
      for (const [kind, size] of batch.slice(0, room)) {
        const position = events.length;
        push({
          position,
          kind,
          payload: fillerBytes(hash, `payload/${String(position)}/${kind}`, size),
        });
      }
    }
    const position = events.length;
    const fields = signRoot(hash, signer, position, mmr.root());
    push({
      position,
      kind: EventKind.SignedRoot,
      payload: encodePayload(EventKind.SignedRoot, signedRootPayload(fields)),
      signedRoot: {
        position,
        leafCount: fields.leafCount,
        rootHex: toHex(fields.root),
        publicKeyHex: toHex(signer.publicKey),
        keyId: fields.keyId,
        messageHex: toHex(signedRootMessage(fields.leafCount, fields.root)),
        signatureHex: toHex(fields.signature),
      },
    });
  }
  return events;
}
