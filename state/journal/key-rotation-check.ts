import { EventKind, decodePayload } from '../../common/event-kinds';
import { ED25519_KEY_BYTES, ED25519_SIGNATURE_BYTES } from './ed25519';
import type { Sha256 } from './sha256';
import { keyIdOf } from './signed-root';
import { keyRotationMessage } from '../../common/journal-keys';
import {
  unparsableFailure,
  VerifyFailureReason,
  type JournalEvent,
  type RotationStep,
  type SignatureCheck,
  type VerifyFailure,
} from './verification-types';

/** What replay knows when it reaches a `key_rotated`. */
export interface KeyRotationContext {
  readonly hash: Sha256;
  /** Key id to public key, of the keys trusted at this position. */
  readonly trusted: ReadonlyMap<string, Uint8Array>;
  /** Where the signature check goes in the plan's `signatureChecks`. */
  readonly signatureIndex: number;
}

/**
 * Checks one `key_rotated` as far as it can without its signature: it parses, hands over
 * from a trusted key, and names the id of the key it carries; then the step, the check of
 * the old key's signature over the new key, and the new key. The caller retires the old
 * key and trusts the new one: roots after a rotation must be signed by the new key, so a
 * leaked old key cannot extend the journal.
 */
export function checkKeyRotation(
  event: JournalEvent,
  context: KeyRotationContext,
):
  | { readonly failure: VerifyFailure }
  | {
      readonly step: RotationStep;
      readonly check: SignatureCheck;
      readonly newPublicKey: Uint8Array;
    } {
  const position = event.position;
  const fields = readKeyRotation(event);
  if ('reason' in fields) return { failure: fields };
  const oldKey = context.trusted.get(fields.oldKeyId);
  if (oldKey === undefined) {
    return {
      failure: {
        position,
        kind: EventKind.KeyRotated,
        reason: VerifyFailureReason.WrongKey,
        expected: [...context.trusted.keys()].join(','),
        found: fields.oldKeyId,
        message:
          `key_rotated at ${String(position)} hands over from key ${JSON.stringify(fields.oldKeyId)}, which is ` +
          'not trusted there; pass the public key that signed the journal before this position',
      },
    };
  }
  const newKeyId = keyIdOf(context.hash, fields.newPublicKey);
  if (newKeyId !== fields.newKeyId) {
    return {
      failure: {
        position,
        kind: EventKind.KeyRotated,
        reason: VerifyFailureReason.EventChanged,
        expected: newKeyId,
        found: fields.newKeyId,
        message:
          `key_rotated at ${String(position)} names new key id ${JSON.stringify(fields.newKeyId)} but carries a ` +
          `public key whose id is ${newKeyId}; the event was altered`,
      },
    };
  }
  const step: RotationStep = {
    type: 'rotation',
    position,
    signatureIndex: context.signatureIndex,
    oldKeyId: fields.oldKeyId,
    newKeyId,
  };
  const check: SignatureCheck = {
    position,
    publicKey: oldKey,
    message: keyRotationMessage(fields.newPublicKey),
    signature: fields.signatureByOldKey,
  };
  return { step, check, newPublicKey: fields.newPublicKey.slice() };
}

/** The fields of a `key_rotated` payload. */
interface KeyRotationFields {
  readonly oldKeyId: string;
  readonly newKeyId: string;
  readonly newPublicKey: Uint8Array;
  readonly signatureByOldKey: Uint8Array;
}

/** The payload's fields, or `event_changed` when it does not parse or has a wrong length. */
function readKeyRotation(event: JournalEvent): KeyRotationFields | VerifyFailure {
  let fields: KeyRotationFields;
  try {
    fields = decodePayload(EventKind.KeyRotated, event.payload);
  } catch {
    return unparsableFailure(event.position, EventKind.KeyRotated, '');
  }
  if (
    fields.newPublicKey.length !== ED25519_KEY_BYTES ||
    fields.signatureByOldKey.length !== ED25519_SIGNATURE_BYTES
  ) {
    return unparsableFailure(event.position, EventKind.KeyRotated, '');
  }
  return fields;
}
