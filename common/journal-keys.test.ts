import { generateKeyPairSync, sign, verify, type KeyObject } from 'node:crypto';
import { describe, expect, it } from '@jest/globals';

import {
  boundJournalKeys,
  chainJournalKeys,
  journalKeyFromJson,
  journalKeyId,
  journalKeyToJson,
  keyRotationMessage,
  MAX_RECORDED_JOURNAL_KEYS,
  RotationRefusal,
  type Ed25519Check,
  type JournalPublicKey,
  type KeyRotationRecord,
} from './journal-keys';

/** A real ed25519 key pair through node:crypto. */
interface TestKey extends JournalPublicKey {
  readonly privateKey: KeyObject;
}

function newKey(): TestKey {
  const { publicKey, privateKey } = generateKeyPairSync('ed25519');
  const raw = new Uint8Array(publicKey.export({ format: 'der', type: 'spki' }).subarray(-32));
  return { keyId: journalKeyId(raw), publicKey: raw, privateKey };
}

const check: Ed25519Check = (publicKey, message, signature) =>
  verify(
    null,
    message,
    {
      key: { kty: 'OKP', crv: 'Ed25519', x: Buffer.from(publicKey).toString('base64url') },
      format: 'jwk',
    },
    signature,
  );

function rotation(position: number, from: TestKey, to: TestKey): KeyRotationRecord {
  return {
    position,
    oldKeyId: from.keyId,
    newKeyId: to.keyId,
    newPublicKey: to.publicKey,
    signatureByOldKey: new Uint8Array(
      sign(null, keyRotationMessage(to.publicKey), from.privateKey),
    ),
  };
}

const ids = (keys: readonly JournalPublicKey[]): string[] => keys.map((k) => k.keyId);

describe('chainJournalKeys', () => {
  const [k1, k2, k3] = [newKey(), newKey(), newKey()];

  it('adds the key a recorded key hands over to, signed by it', () => {
    const chained = chainJournalKeys([k1], [rotation(7, k1, k2), rotation(12, k2, k3)], check);
    expect(ids(chained.keys)).toEqual([k1.keyId, k2.keyId, k3.keyId]);
    expect(chained.refused).toEqual([]);
  });

  it.each([
    [
      'an old key the status never recorded',
      (): KeyRotationRecord => rotation(7, k2, k3),
      RotationRefusal.UnrecordedOldKey,
    ],
    [
      'a signature by another key than the old one',
      (): KeyRotationRecord => ({ ...rotation(7, k2, k3), oldKeyId: k1.keyId }),
      RotationRefusal.BadSignature,
    ],
    [
      'a new key id that is not the id of the new key',
      (): KeyRotationRecord => ({ ...rotation(7, k1, k3), newKeyId: k2.keyId }),
      RotationRefusal.KeyMismatch,
    ],
    [
      'a new key that is not 32 bytes',
      (): KeyRotationRecord => ({ ...rotation(7, k1, k3), newPublicKey: new Uint8Array(31) }),
      RotationRefusal.KeyMismatch,
    ],
  ])('refuses %s and records nothing new', (_, make, reason) => {
    const chained = chainJournalKeys([k1], [make()], check);
    expect(ids(chained.keys)).toEqual([k1.keyId]);
    expect(chained.refused).toEqual([{ position: 7, reason }]);
  });

  it('follows no rotation when nothing is recorded (the first key comes from the first root)', () => {
    const chained = chainJournalKeys([], [rotation(3, k1, k2)], check);
    expect(chained.keys).toEqual([]);
    expect(chained.refused).toEqual([{ position: 3, reason: RotationRefusal.UnrecordedOldKey }]);
  });

  it('keeps the first key and the newest when the chain grows past the bound', () => {
    const keys = [k1, ...Array.from({ length: MAX_RECORDED_JOURNAL_KEYS + 1 }, newKey)];
    const rotations = keys.slice(1).map((to, i) => rotation(i + 1, keys[i]!, to));
    const chained = chainJournalKeys([k1], rotations, check);
    expect(chained.keys).toHaveLength(MAX_RECORDED_JOURNAL_KEYS);
    expect(ids(chained.keys)).toEqual([
      k1.keyId,
      ...ids(keys.slice(-(MAX_RECORDED_JOURNAL_KEYS - 1))),
    ]);
    expect(boundJournalKeys(chained.keys)).toBe(chained.keys);
  });
});

describe('the status form of a key', () => {
  const key = newKey();

  it('round-trips', () => {
    expect(journalKeyFromJson(journalKeyToJson(key))).toEqual({
      keyId: key.keyId,
      publicKey: key.publicKey,
    });
  });

  it.each([
    [{ keyId: key.keyId }, 'needs a keyId and a publicKey'],
    [{ keyId: key.keyId, publicKey: 'AAAA' }, 'is not the base64 of 32 bytes'],
    [
      { keyId: newKey().keyId, publicKey: journalKeyToJson(key).publicKey },
      `is not the id of its public key (${key.keyId})`,
    ],
  ])('refuses a damaged record %#', (json, message) => {
    expect(journalKeyFromJson(json)).toContain(message);
  });
});
