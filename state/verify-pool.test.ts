import { afterAll, describe, expect, it } from '@jest/globals';

import { AppError } from '../common/errors';
import { encodePayload, EventKind } from '../common/event-kinds';
import { CompactMmr } from './journal/compact-mmr';
import { LeafHasher } from './journal/leaf-digest';
import { createNodeEd25519Signer, createNodeEd25519Verifier } from './journal/node-ed25519';
import { nodeSha256 } from './journal/node-sha256';
import { signedRootMessage, signedRootPayload, signRoot } from './journal/signed-root';
import { StreamingJournalVerifier } from './journal/streaming-verifier';
import { verifyJournal } from './journal/verify-journal';
import type { JournalEvent, SignatureCheck } from './journal/verification-types';
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

  it('packs checks of any length, and keeps order across overlapping calls and many chunks', async () => {
    const small = new SignatureVerifyPool({ workers: 2, minChunk: 1, maxChunk: 7 });
    try {
      const odd: SignatureCheck[] = [
        { ...checks[0]!, message: new Uint8Array() },
        { ...checks[0]!, message: new Uint8Array(5000).fill(9) },
        { ...checks[0]!, signature: new Uint8Array(0) },
        { ...checks[0]!, publicKey: new Uint8Array(33) },
      ];
      const signed = (message: Uint8Array): SignatureCheck => ({
        ...checks[0]!,
        message,
        signature: signer.sign(message),
      });
      const valid = [signed(new Uint8Array()), signed(new Uint8Array(5000).fill(9))];
      const [a, b, c] = await Promise.all([
        small.verify(checks),
        small.verify([...odd, ...valid]),
        small.verify(checks.slice(100, 150)),
      ]);
      expect(a).toEqual(expected);
      expect(b).toEqual([false, false, false, false, true, true]);
      expect(c).toEqual(expected.slice(100, 150));
    } finally {
      await small.close();
    }
  });

  it('fails the calls in flight with an AppError when it closes', async () => {
    const other = new SignatureVerifyPool({ workers: 1 });
    const running = other.verify(checks).catch((error: unknown) => error);
    await other.close();
    const error = await running;
    expect(error).toBeInstanceOf(AppError);
    expect(error).toMatchObject({
      code: 'internal',
      message: 'the signature pool was closed while checks ran',
    });
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

describe('streaming a replay to the pool', () => {
  const journalKey = createNodeEd25519Signer(new Uint8Array(32).fill(4));

  /** Batches of two events and a root; roots of the batches in `badAt` carry a flipped signature. */
  function journal(batches: number, badAt: readonly number[]): JournalEvent[] {
    const events: JournalEvent[] = [];
    const mmr = new CompactMmr(nodeSha256);
    const leaves = new LeafHasher(nodeSha256);
    const add = (kind: string, payload: Uint8Array): void => {
      events.push({ position: events.length, kind, payload });
      mmr.append(leaves.digest(events.length - 1, kind, payload));
    };
    for (let b = 0; b < batches; b++) {
      add(EventKind.ToolCall, Uint8Array.of(b & 0xff, 1));
      add(EventKind.ToolResult, Uint8Array.of(b & 0xff, 2));
      const fields = signRoot(nodeSha256, journalKey, events.length, mmr.root());
      const signature = Buffer.from(fields.signature);
      if (badAt.includes(b)) signature[10]! ^= 0x04;
      add(
        EventKind.SignedRoot,
        encodePayload(EventKind.SignedRoot, {
          ...signedRootPayload(fields),
          signature,
        }),
      );
    }
    return events;
  }

  it('names the first bad signature even when the chunks after it finish first', async () => {
    const events = journal(200, [61, 150]);
    let calls = 0;
    const finished: number[] = [];
    const result = await (async () => {
      const streaming = new StreamingJournalVerifier({
        hash: nodeSha256,
        trustedPublicKeys: [journalKey.publicKey],
        chunkSize: 32,
        // The chunk holding the first bad root is held back until every other one is done.
        checkSignatures: async (chunk) => {
          const call = calls++;
          const results = await pool.verify(chunk);
          if (call === 1) await new Promise((resolve) => setTimeout(resolve, 200));
          finished.push(call);
          return results;
        },
      });
      for (const event of events) streaming.add(event);
      return streaming.finish();
    })();
    expect(calls).toBe(7);
    expect(finished.at(-1)).toBe(1);
    expect(result.failure).toMatchObject({ position: 185, reason: 'bad_signature' });
    expect(result).toEqual(
      verifyJournal(events, {
        hash: nodeSha256,
        verifier: createNodeEd25519Verifier(),
        trustedPublicKeys: [journalKey.publicKey],
      }),
    );
  });
});
