import { beforeAll, describe, expect, it } from '@jest/globals';
import fc from 'fast-check';

import { fromHex, toHex } from './hex';
import { loadNobleCrypto, type NobleJournalCrypto } from './noble-crypto';
import { createNodeEd25519Signer, createNodeEd25519Verifier } from './node-ed25519';
import { nodeSha256 } from './node-sha256';
import {
  keyIdOf,
  rotateKey,
  signedRootMessage,
  signRoot,
  JOURNAL_ROOT_DOMAIN,
} from './signed-root';
import { keyRotationMessage } from '../../common/journal-keys';

// RFC 8032 section 7.1, TEST 1: secret key, public key, and the signature of the empty message.
const RFC_SEED = fromHex('9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60');
const RFC_PUBLIC = 'd75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a';
const RFC_SIGNATURE =
  'e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b';

let noble: NobleJournalCrypto;
beforeAll(async () => {
  noble = await loadNobleCrypto();
});

describe('signed-root bytes', () => {
  it('builds domain ‖ u64 leafCount ‖ root', () => {
    // "polychrome/journal-root/v1" in hex, then 00..03, then bytes 00..1f.
    const root = Uint8Array.from({ length: 32 }, (_, i) => i);
    expect(toHex(signedRootMessage(3, root))).toBe(
      '706f6c796368726f6d652f6a6f75726e616c2d726f6f742f7631' +
        '0000000000000003' +
        '000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f',
    );
    expect(JOURNAL_ROOT_DOMAIN).toBe('polychrome/journal-root/v1');
  });

  it('builds domain ‖ new public key for a rotation', () => {
    // "polychrome/key-rotation/v1" in hex, then the 32-byte key.
    expect(toHex(keyRotationMessage(fromHex(RFC_PUBLIC)))).toBe(
      '706f6c796368726f6d652f6b65792d726f746174696f6e2f7631' + RFC_PUBLIC,
    );
  });

  it('derives the key id as the first 16 bytes of SHA-256(public key)', () => {
    // python3 -c "import hashlib;print(hashlib.sha256(bytes.fromhex('d75a98...511a')).hexdigest()[:32])"
    expect(keyIdOf(nodeSha256, fromHex(RFC_PUBLIC))).toBe('21fe31dfa154a261626bf854046fd227');
    expect(keyIdOf(noble.sha256, fromHex(RFC_PUBLIC))).toBe('21fe31dfa154a261626bf854046fd227');
  });

  it('rejects roots and keys of the wrong length', () => {
    expect(() => signedRootMessage(1, new Uint8Array(31))).toThrow('root must be 32 bytes, got 31');
    expect(() => keyRotationMessage(new Uint8Array(33))).toThrow(
      'new public key must be 32 bytes, got 33',
    );
    expect(() => signedRootMessage(-1, new Uint8Array(32))).toThrow(
      'leaf count must be a non-negative integer below 2^53, got -1',
    );
  });
});

describe('ed25519 adapters', () => {
  it('node:crypto and noble both reproduce RFC 8032 TEST 1', () => {
    for (const signer of [createNodeEd25519Signer(RFC_SEED), noble.createSigner(RFC_SEED)]) {
      expect(toHex(signer.publicKey)).toBe(RFC_PUBLIC);
      expect(toHex(signer.sign(new Uint8Array()))).toBe(RFC_SIGNATURE);
    }
    for (const verifier of [createNodeEd25519Verifier(), noble.verifier]) {
      expect(verifier.verify(fromHex(RFC_PUBLIC), new Uint8Array(), fromHex(RFC_SIGNATURE))).toBe(
        true,
      );
      expect(verifier.verify(fromHex(RFC_PUBLIC), Uint8Array.of(0), fromHex(RFC_SIGNATURE))).toBe(
        false,
      );
    }
  });

  it('verifiers return false, not throw, for malformed keys and signatures', () => {
    for (const verifier of [createNodeEd25519Verifier(), noble.verifier]) {
      expect(verifier.verify(new Uint8Array(31), new Uint8Array(), fromHex(RFC_SIGNATURE))).toBe(
        false,
      );
      expect(verifier.verify(fromHex(RFC_PUBLIC), new Uint8Array(), new Uint8Array(63))).toBe(
        false,
      );
    }
  });

  it('signs roots and rotations that the other implementation verifies (property)', () => {
    const nodeVerifier = createNodeEd25519Verifier();
    fc.assert(
      fc.property(
        fc.uint8Array({ minLength: 32, maxLength: 32 }),
        fc.uint8Array({ minLength: 32, maxLength: 32 }),
        fc.nat(),
        (seed, root, leafCount) => {
          const bySigner = signRoot(nodeSha256, createNodeEd25519Signer(seed), leafCount, root);
          const byNoble = signRoot(noble.sha256, noble.createSigner(seed), leafCount, root);
          expect(toHex(byNoble.signature)).toBe(toHex(bySigner.signature));
          expect(byNoble.keyId).toBe(bySigner.keyId);
          const publicKey = noble.createSigner(seed).publicKey;
          const message = signedRootMessage(leafCount, root);
          expect(noble.verifier.verify(publicKey, message, bySigner.signature)).toBe(true);
          expect(nodeVerifier.verify(publicKey, message, byNoble.signature)).toBe(true);
          const flipped = bySigner.signature.slice();
          flipped[leafCount % 64]! ^= 1;
          expect(noble.verifier.verify(publicKey, message, flipped)).toBe(false);
          expect(nodeVerifier.verify(publicKey, message, flipped)).toBe(false);
        },
      ),
      { numRuns: 25 },
    );
  });

  it('has the old key sign the new public key on rotation', () => {
    const oldSigner = createNodeEd25519Signer(RFC_SEED);
    const next = createNodeEd25519Signer(new Uint8Array(32).fill(9)).publicKey;
    const rotation = rotateKey(nodeSha256, oldSigner, next);
    expect(rotation.oldKeyId).toBe('21fe31dfa154a261626bf854046fd227');
    expect(rotation.newKeyId).toBe(keyIdOf(nodeSha256, next));
    expect(
      noble.verifier.verify(
        oldSigner.publicKey,
        keyRotationMessage(next),
        rotation.signatureByOldKey,
      ),
    ).toBe(true);
  });

  it('agree on SHA-256 (property)', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 300 }), (data) => {
        expect(toHex(noble.sha256(data))).toBe(toHex(nodeSha256(data)));
      }),
    );
  });

  it('reject seeds that are not 32 bytes', () => {
    expect(() => createNodeEd25519Signer(new Uint8Array(64))).toThrow(
      'ed25519 seed must be 32 raw bytes, got 64; pass the raw key, not PEM or DER',
    );
    expect(() => noble.createSigner(new Uint8Array(31))).toThrow(
      'ed25519 seed must be 32 raw bytes, got 31',
    );
  });
});
