import { EventKind, decodePayload } from '../../common/event-kinds';
import { ED25519_SIGNATURE_BYTES } from './ed25519';
import { bytesEqual, toHex } from './hex';
import { DIGEST_BYTES } from './sha256';
import { signedRootMessage, signedRootMessageV2, SignedRootVersion } from './signed-root';
import {
  unparsableFailure,
  VerifyFailureReason,
  type JournalEvent,
  type RootStep,
  type SignatureCheck,
  type VerifyFailure,
} from './verification-types';

/** What replay knows when it reaches a `signed_root`. */
export interface SignedRootContext {
  /** The root replay recomputed over the leaves before the event. */
  readonly expectedRoot: Uint8Array;
  /** The partition the journal is verified as. */
  readonly partition: string | undefined;
  /** Key id to public key, of the keys trusted at this position. */
  readonly trusted: ReadonlyMap<string, Uint8Array>;
  /** Where the signature check goes in the plan's `signatureChecks`. */
  readonly signatureIndex: number;
}

/**
 * Checks one `signed_root` as far as it can without its signature: it parses, names the
 * partition verified (version 2), is signed by a trusted key; then the step comparing its
 * leaf count and root with the recomputed ones, and the signature check to run.
 */
export function checkSignedRoot(
  event: JournalEvent,
  context: SignedRootContext,
):
  | { readonly failure: VerifyFailure }
  | { readonly step: RootStep; readonly check: SignatureCheck } {
  const position = event.position;
  const expected = context.expectedRoot;
  const fields = readSignedRoot(event, expected);
  if ('reason' in fields) return { failure: fields };
  const v2 = fields.version === SignedRootVersion.V2;
  if (v2 && fields.partition !== context.partition) {
    return { failure: wrongPartition(position, fields.partition, context.partition) };
  }
  const key = context.trusted.get(fields.keyId);
  if (key === undefined) {
    return { failure: untrustedKey(position, fields.keyId, context.trusted) };
  }
  const rootMatches = bytesEqual(fields.root, expected);
  const step: RootStep = {
    type: 'root',
    position,
    signatureIndex: context.signatureIndex,
    countMatches: fields.leafCount === position,
    foundLeafCount: fields.leafCount,
    rootMatches,
    // When they match, one array serves both, so a long replay holds one root per step.
    expectedRoot: rootMatches ? fields.root : expected,
    foundRoot: fields.root,
    keyId: fields.keyId,
  };
  const check: SignatureCheck = {
    position,
    publicKey: key,
    // The verifier's partition, not the payload's: equal here, and an edited payload
    // name cannot reach the message.
    message: v2
      ? signedRootMessageV2(context.partition ?? '', fields.leafCount, fields.root)
      : signedRootMessage(fields.leafCount, fields.root),
    signature: fields.signature,
  };
  return { step, check };
}

/** The fields of a `signed_root` payload. */
interface SignedRootFields {
  readonly leafCount: number;
  readonly root: Uint8Array;
  readonly keyId: string;
  readonly signature: Uint8Array;
  readonly version: number;
  readonly partition: string;
}

/** The payload's fields, or `event_changed` when it does not parse or has a wrong length. */
function readSignedRoot(
  event: JournalEvent,
  expected: Uint8Array,
): SignedRootFields | VerifyFailure {
  let fields: SignedRootFields;
  try {
    fields = decodePayload(EventKind.SignedRoot, event.payload);
  } catch {
    return unparsableFailure(event.position, EventKind.SignedRoot, toHex(expected));
  }
  if (
    fields.root.length !== DIGEST_BYTES ||
    fields.signature.length !== ED25519_SIGNATURE_BYTES ||
    (fields.version !== 0 && fields.version !== SignedRootVersion.V2)
  ) {
    return unparsableFailure(event.position, EventKind.SignedRoot, toHex(expected));
  }
  return fields;
}

/** A version-2 root signed for another partition than the one verified (or none named). */
function wrongPartition(
  position: number,
  found: string,
  partition: string | undefined,
): VerifyFailure {
  return {
    position,
    kind: EventKind.SignedRoot,
    reason: VerifyFailureReason.WrongPartition,
    expected: partition ?? '',
    found,
    message:
      `signed_root at ${String(position)} was signed for partition ${JSON.stringify(found)}, ` +
      (partition === undefined
        ? 'but no partition was named to verify it as; pass the partition'
        : `but the journal is verified as partition ${JSON.stringify(partition)}: ` +
          'it was copied from another conversation'),
  };
}

/** A root signed by a key that is not trusted at its position. */
function untrustedKey(
  position: number,
  keyId: string,
  trusted: ReadonlyMap<string, Uint8Array>,
): VerifyFailure {
  return {
    position,
    kind: EventKind.SignedRoot,
    reason: VerifyFailureReason.WrongKey,
    expected: [...trusted.keys()].join(','),
    found: keyId,
    message:
      `signed_root at ${String(position)} is signed by key ${JSON.stringify(keyId)}, which is not ` +
      `trusted there (trusted: ${[...trusted.keys()].join(', ') || 'none'}); pass the right public key ` +
      'or find the key_rotated event that should introduce it',
  };
}
