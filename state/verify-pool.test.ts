import { afterAll, describe, expect, it } from '@jest/globals';

import { createNodeEd25519Signer } from './journal/node-ed25519';
import { nodeSha256 } from './journal/node-sha256';
import { signedRootMessage } from './journal/signed-root';
import type { SignatureCheck } from './journal/verify-journal';
import { SignatureVerifyPool } from './verify-pool';

const signer = createNodeEd25519Signer(new Uint8Array(32).fill(7));
const checks: SignatureCheck[] = Array.from({ length: 300 }, (_, i) => {
  const message = signedRootMessage(i, nodeSha256(Uint8Array.of(i & 0xff)));
  const signature = signer.sign(message);
  if (i % 7 === 3) signature[i % 64]! ^= 1;
  return { position: i, publicKey: signer.publicKey, message, signature };
});
const expected = checks.map((_, i) => i % 7 !== 3);

const pool = new SignatureVerifyPool({ workers: 2, minChunk: 16 });
afterAll(() => pool.close());

describe('SignatureVerifyPool', () => {
  it('returns each check result in check order, across workers', async () => {
    expect(await pool.verify(checks)).toEqual(expected);
  });

  it('returns nothing for no checks and false for malformed keys', async () => {
    expect(await pool.verify([])).toEqual([]);
    const bad = { ...checks[0]!, publicKey: new Uint8Array(5) };
    expect(await pool.verify([bad, checks[0]!])).toEqual([false, true]);
  });

  it('refuses work after close', async () => {
    const other = new SignatureVerifyPool({ workers: 1 });
    await other.close();
    await other.close();
    await expect(other.verify(checks)).rejects.toThrow(
      'the signature pool is closed; create a new one',
    );
  });
});
