import { describe, expect, it } from '@jest/globals';
import fc from 'fast-check';

import { decodePayload, EventKind, encodePayload } from '../../common/event-kinds';
import { CompactMmr } from './compact-mmr';
import type { Ed25519Signer } from './ed25519';
import { toHex } from './hex';
import { LeafHasher } from './leaf-digest';
import { createNodeEd25519Signer, createNodeEd25519Verifier } from './node-ed25519';
import { nodeSha256 } from './node-sha256';
import { keyIdOf, rotateKey, signedRootPayload, signRoot } from './signed-root';
import { concludeJournalVerification } from './conclude-verification';
import { JournalReplayer } from './journal-replayer';
import { planJournalVerification, verifyJournal } from './verify-journal';
import { StreamingJournalVerifier } from './streaming-verifier';
import type { JournalEvent, JournalVerification, SignatureCheck } from './verification-types';

const keyA = createNodeEd25519Signer(new Uint8Array(32).fill(1));
const keyB = createNodeEd25519Signer(new Uint8Array(32).fill(2));
const stranger = createNodeEd25519Signer(new Uint8Array(32).fill(3));
const idA = keyIdOf(nodeSha256, keyA.publicKey);
const idB = keyIdOf(nodeSha256, keyB.publicKey);
const verifier = createNodeEd25519Verifier();

/** Writes a journal the way the store will: events, then a signed root over them. */
class TestJournal {
  readonly events: JournalEvent[] = [];
  private readonly mmr = new CompactMmr(nodeSha256);
  private readonly leaves = new LeafHasher(nodeSha256);

  add(kind: string, payload: Uint8Array = Uint8Array.of(this.events.length & 0xff)): this {
    const position = this.events.length;
    this.events.push({ position, kind, payload });
    this.mmr.append(this.leaves.digest(position, kind, payload));
    return this;
  }

  rootHex(): string {
    return toHex(this.mmr.root());
  }

  /** Appends a signed_root; `override` replaces fields after honest signing inputs are chosen. */
  seal(
    signer: Ed25519Signer,
    override: {
      leafCount?: number;
      root?: Uint8Array;
      flipSignature?: boolean;
      /** Signs a version-2 root for this partition. */
      partition?: string;
    } = {},
  ): this {
    const leafCount = override.leafCount ?? this.events.length;
    const fields = signRoot(
      nodeSha256,
      signer,
      leafCount,
      override.root ?? this.mmr.root(),
      override.partition,
    );
    const signature = Buffer.from(fields.signature);
    if (override.flipSignature === true) signature[0]! ^= 1;
    return this.add(
      EventKind.SignedRoot,
      encodePayload(EventKind.SignedRoot, {
        ...signedRootPayload(fields),
        signature,
      }),
    );
  }

  rotate(oldSigner: Ed25519Signer, next: Uint8Array, tamper?: 'signature' | 'keyId'): this {
    const r = rotateKey(nodeSha256, oldSigner, next);
    const signature = Buffer.from(r.signatureByOldKey);
    if (tamper === 'signature') signature[5]! ^= 0x10;
    return this.add(
      EventKind.KeyRotated,
      encodePayload(EventKind.KeyRotated, {
        oldKeyId: r.oldKeyId,
        newKeyId: tamper === 'keyId' ? idA : r.newKeyId,
        newPublicKey: Buffer.from(r.newPublicKey),
        signatureByOldKey: signature,
      }),
    );
  }

  /** A turn's two batches: 0 message, 1 dispatch, 2 root, 3 model, 4 complete, 5 root. */
  static twoBatches(signer: Ed25519Signer = keyA): TestJournal {
    return new TestJournal()
      .add(EventKind.MessageReceived)
      .add(EventKind.TurnDispatched)
      .seal(signer)
      .add(EventKind.ModelCall)
      .add(EventKind.TurnComplete)
      .seal(signer);
  }
}

function verify(events: readonly JournalEvent[], keys = [keyA.publicKey]): JournalVerification {
  return verifyJournal(events, { hash: nodeSha256, verifier, trustedPublicKeys: keys });
}

function replaced(
  events: readonly JournalEvent[],
  position: number,
  payload: Uint8Array,
): JournalEvent[] {
  return events.map((e) => (e.position === position ? { ...e, payload } : e));
}

/** Root over the first `count` events as they are now (after tampering). */
function recomputedRoot(events: readonly JournalEvent[], count: number): string {
  const mmr = new CompactMmr(nodeSha256);
  const leaves = new LeafHasher(nodeSha256);
  for (const e of events.slice(0, count)) mmr.append(leaves.digest(e.position, e.kind, e.payload));
  return toHex(mmr.root());
}

describe('verifyJournal: honest journals', () => {
  it('accepts an honest journal and reports its counts and root', () => {
    const j = TestJournal.twoBatches();
    const result = verify(j.events);
    expect(result).toEqual({
      ok: true,
      leafCount: 6,
      signedRootCount: 2,
      verifiedLeafCount: 5,
      rootHex: j.rootHex(),
      unsealed: { fromPosition: 6, count: 0 },
      failure: undefined,
      excised: [],
      erased: [],
      checkpointChecked: false,
    });
  });

  it('accepts the empty journal and a root over zero leaves', () => {
    expect(verify([])).toMatchObject({
      ok: true,
      leafCount: 0,
      unsealed: { fromPosition: 0, count: 0 },
    });
    expect(verify(new TestJournal().seal(keyA).events)).toMatchObject({
      ok: true,
      signedRootCount: 1,
    });
  });

  it('reports events after the last signed root as unsealed, without failing', () => {
    const j = TestJournal.twoBatches().add(EventKind.MessageReceived).add(EventKind.TurnDispatched);
    expect(verify(j.events)).toMatchObject({ ok: true, unsealed: { fromPosition: 6, count: 2 } });
    const none = new TestJournal().add(EventKind.MessageReceived);
    expect(verify(none.events)).toMatchObject({
      ok: true,
      verifiedLeafCount: 0,
      unsealed: { fromPosition: 0, count: 1 },
    });
  });

  it('follows a key rotation: roots after it are signed by the new key', () => {
    const j = TestJournal.twoBatches()
      .rotate(keyA, keyB.publicKey)
      .seal(keyB)
      .add(EventKind.ModelCall)
      .seal(keyB);
    expect(verify(j.events)).toMatchObject({ ok: true, signedRootCount: 4, verifiedLeafCount: 9 });
  });
});

describe('verifyJournal: the first failing root', () => {
  it('event_changed: a payload changed after signing fails the next root', () => {
    const j = TestJournal.twoBatches();
    const tampered = replaced(j.events, 3, Uint8Array.of(0xee));
    const result = verify(tampered);
    expect(result.failure).toMatchObject({
      position: 5,
      kind: 'signed_root',
      reason: 'event_changed',
      expected: recomputedRoot(tampered, 5),
      found: recomputedRoot(j.events, 5),
    });
    expect(result.failure?.message).toContain(
      'an event before this position was changed after signing',
    );
    expect(result).toMatchObject({ ok: false, verifiedLeafCount: 2 });
  });

  it('event_changed: a root signed for another leaf count (events removed or inserted)', () => {
    const j = TestJournal.twoBatches().add(EventKind.ModelCall).seal(keyA, { leafCount: 6 });
    expect(verify(j.events).failure).toMatchObject({ position: 7, reason: 'event_changed' });
    expect(verify(j.events).failure?.message).toContain(
      'was signed for 6 leaves but sits after 7 events',
    );
  });

  it('event_changed: a signed_root payload that does not parse', () => {
    const j = TestJournal.twoBatches();
    const result = verify(replaced(j.events, 2, Uint8Array.of(0xff)));
    expect(result.failure).toMatchObject({ position: 2, reason: 'event_changed', found: '' });
  });

  it('root_forged: a validly signed false root, with the next root vouching for the events', () => {
    const forged = new Uint8Array(32).fill(0xab);
    const j = TestJournal.twoBatches()
      .add(EventKind.ModelCall)
      .seal(keyA, { root: forged })
      .add(EventKind.ModelCall)
      .seal(keyA);
    const result = verify(j.events);
    expect(result.failure).toMatchObject({
      position: 7,
      reason: 'root_forged',
      expected: recomputedRoot(j.events, 7),
      found: toHex(forged),
    });
    expect(result.verifiedLeafCount).toBe(5);
  });

  it('a false root with no later root to vouch is event_changed', () => {
    const j = TestJournal.twoBatches()
      .add(EventKind.ModelCall)
      .seal(keyA, { root: new Uint8Array(32) });
    expect(verify(j.events).failure).toMatchObject({ position: 7, reason: 'event_changed' });
  });

  it('wrong_key: a root signed by a key that is not trusted', () => {
    const j = TestJournal.twoBatches().add(EventKind.ModelCall).seal(stranger);
    expect(verify(j.events).failure).toMatchObject({
      position: 7,
      reason: 'wrong_key',
      expected: idA,
      found: keyIdOf(nodeSha256, stranger.publicKey),
    });
  });

  it('bad_signature: one bit of a signature flipped', () => {
    const j = TestJournal.twoBatches().add(EventKind.ModelCall).seal(keyA, { flipSignature: true });
    const result = verify(j.events);
    expect(result.failure).toMatchObject({
      position: 7,
      reason: 'bad_signature',
      expected: recomputedRoot(j.events, 7),
    });
    expect(result.failure?.found).toBe(result.failure?.expected);
  });

  it.each([
    {
      name: 'a missing position',
      events: (e: JournalEvent[]) => e.filter((x) => x.position !== 3),
      at: 3,
      found: 4,
    },
    { name: 'a start at 1', events: (e: JournalEvent[]) => e.slice(1), at: 0, found: 1 },
    {
      name: 'a repeated position',
      events: (e: JournalEvent[]) => [...e.slice(0, 3), ...e.slice(2)],
      at: 3,
      found: 2,
    },
  ])('gap: $name', ({ events, at, found }) => {
    const result = verify(events(TestJournal.twoBatches().events));
    expect(result.failure).toMatchObject({
      position: at,
      reason: 'gap',
      expected: toHex(Uint8Array.of(0, 0, 0, 0, 0, 0, 0, at)),
      found: toHex(Uint8Array.of(0, 0, 0, 0, 0, 0, 0, found)),
    });
    expect(result.leafCount).toBe(at);
  });

  it('names only the first failure when several exist', () => {
    const j = TestJournal.twoBatches().add(EventKind.ModelCall).seal(stranger);
    const tampered = replaced(j.events, 0, Uint8Array.of(1, 2, 3));
    expect(verify(tampered).failure).toMatchObject({ position: 2, reason: 'event_changed' });
  });

  it('wrong_key: the retired key signs after a rotation', () => {
    const j = TestJournal.twoBatches().rotate(keyA, keyB.publicKey).seal(keyA);
    expect(verify(j.events).failure).toMatchObject({
      position: 7,
      reason: 'wrong_key',
      expected: idB,
      found: idA,
    });
  });

  it('bad_signature: a rotation whose signature does not verify', () => {
    const j = TestJournal.twoBatches().rotate(keyA, keyB.publicKey, 'signature').seal(keyB);
    expect(verify(j.events).failure).toMatchObject({
      position: 6,
      kind: 'key_rotated',
      reason: 'bad_signature',
      expected: idA,
      found: idB,
    });
  });

  it('wrong_key: a rotation from a key that is not trusted', () => {
    const j = TestJournal.twoBatches().rotate(stranger, keyB.publicKey).seal(keyB);
    expect(verify(j.events).failure).toMatchObject({
      position: 6,
      kind: 'key_rotated',
      reason: 'wrong_key',
    });
  });

  it('event_changed: a rotation whose new key id does not match its key', () => {
    const j = TestJournal.twoBatches().rotate(keyA, keyB.publicKey, 'keyId').seal(keyB);
    expect(verify(j.events).failure).toMatchObject({
      position: 6,
      reason: 'event_changed',
      expected: idB,
      found: idA,
    });
  });

  it('fails at the tampered signed_root or the next one, for any flipped payload bit (property)', () => {
    const j = TestJournal.twoBatches()
      .add(EventKind.ToolCall, new Uint8Array(40).fill(4))
      .add(EventKind.ToolResult, new Uint8Array(3000).fill(5))
      .seal(keyA)
      .add(EventKind.MemoryCleared, new Uint8Array())
      .add(EventKind.TurnComplete)
      .seal(keyA)
      .add(EventKind.MessageReceived);
    const roots = j.events.filter((e) => e.kind === EventKind.SignedRoot).map((e) => e.position);
    const withPayload = j.events.filter((e) => e.payload.length > 0);
    fc.assert(
      fc.property(fc.constantFrom(...withPayload), fc.nat(), (event, bit) => {
        const payload = event.payload.slice();
        const index = bit % (payload.length * 8);
        payload[index >> 3]! ^= 1 << (index & 7);
        const result = verify(replaced(j.events, event.position, payload));
        const firstRoot = roots.find((p) => p >= event.position);
        if (firstRoot === undefined) {
          expect(result).toMatchObject({ ok: true, unsealed: { fromPosition: 12, count: 1 } });
        } else {
          expect(result.failure?.position).toBe(firstRoot);
        }
      }),
    );
  });
});

describe('plan and conclude (signatures checked elsewhere)', () => {
  it('collects one check per root and rotation and concludes from their results', () => {
    const j = TestJournal.twoBatches().rotate(keyA, keyB.publicKey).seal(keyB);
    const plan = planJournalVerification(j.events, {
      hash: nodeSha256,
      trustedPublicKeys: [keyA.publicKey],
    });
    expect(plan.signatureChecks.map((c) => c.position)).toEqual([2, 5, 6, 7]);
    expect(plan.signatureChecks.map((c) => keyIdOf(nodeSha256, c.publicKey))).toEqual([
      idA,
      idA,
      idA,
      idB,
    ]);
    const results = plan.signatureChecks.map((c) =>
      verifier.verify(c.publicKey, c.message, c.signature),
    );
    expect(concludeJournalVerification(plan, results).ok).toBe(true);
    expect(concludeJournalVerification(plan, [true, false, true, true]).failure).toMatchObject({
      position: 5,
      reason: 'bad_signature',
    });
  });

  it('refuses results that do not line up with the checks', () => {
    const plan = planJournalVerification(TestJournal.twoBatches().events, {
      hash: nodeSha256,
      trustedPublicKeys: [keyA.publicKey],
    });
    expect(() => concludeJournalVerification(plan, [true])).toThrow(
      'the plan has 2 signature checks but 1 results were given; run every check in plan.signatureChecks, in order',
    );
  });
});

/** `batches` batches of two events and a root; the roots listed in `badAt` have a flipped signature. */
function longJournal(batches: number, badAt: readonly number[] = []): TestJournal {
  const j = new TestJournal();
  for (let b = 0; b < batches; b++) {
    if (b === batches >> 1) j.rotate(keyA, keyB.publicKey);
    j.add(EventKind.ToolCall).add(EventKind.ToolResult);
    j.seal(b < batches >> 1 ? keyA : keyB, { flipSignature: badAt.includes(b) });
  }
  return j;
}

const onThread = (checks: readonly SignatureCheck[]): Promise<boolean[]> =>
  Promise.resolve(checks.map((c) => verifier.verify(c.publicKey, c.message, c.signature)));

async function streamed(
  events: readonly JournalEvent[],
  checkSignatures = onThread,
  chunkSize?: number,
): Promise<JournalVerification> {
  const streaming = new StreamingJournalVerifier({
    hash: nodeSha256,
    trustedPublicKeys: [keyA.publicKey],
    checkSignatures,
    ...(chunkSize === undefined ? {} : { chunkSize }),
  });
  for (const event of events) streaming.add(event);
  return streaming.finish();
}

describe('streaming verification (signatures checked while replay goes on)', () => {
  const honest = longJournal(40);
  const cases: [string, JournalEvent[]][] = [
    ['an honest journal', honest.events],
    ['two bad signatures', longJournal(40, [9, 30]).events],
    ['a changed event', replaced(honest.events, 50, Uint8Array.of(7))],
    ['a gap', honest.events.filter((e) => e.position !== 70)],
    [
      'a bad rotation',
      new TestJournal().rotate(keyA, keyB.publicKey, 'signature').seal(keyB).events,
    ],
    [
      'unsealed events',
      [...honest.events, { position: 121, kind: 'tool_call', payload: Uint8Array.of(1) }],
    ],
  ];

  it.each(cases)(
    'gives the verdict of verifyJournal for %s, whatever the chunk size',
    async (_, events) => {
      const expected = verify(events);
      for (const chunkSize of [1, 3, 16, 1000]) {
        expect(await streamed(events, onThread, chunkSize)).toEqual(expected);
      }
    },
  );

  it('names the first failing root when a later chunk finishes first', async () => {
    const j = longJournal(40, [9, 30]);
    const finished: number[] = [];
    let calls = 0;
    // Each chunk finishes only after the one sent after it (not after a delay, which a
    // loaded machine can outrun), so they finish in reverse: chunks go out as replay reads.
    const expectedCalls = 11;
    const release: (() => void)[] = [];
    const done = Array.from(
      { length: expectedCalls },
      (_, i) => new Promise<void>((resolve) => (release[i] = resolve)),
    );
    const slowFirst = async (checks: readonly SignatureCheck[]): Promise<boolean[]> => {
      const call = calls++;
      if (call < expectedCalls - 1) await done[call + 1];
      finished.push(call);
      release[call]?.();
      return onThread(checks);
    };
    const result = await streamed(j.events, slowFirst, 4);
    expect(calls).toBe(11);
    expect(finished.slice(0, 3)).toEqual([10, 9, 8]);
    expect(result.failure).toMatchObject({ position: 29, reason: 'bad_signature' });
    expect(result.verifiedLeafCount).toBe(26);
    expect(result).toEqual(verify(j.events));
  });

  it('fails when the checker fails or returns a result count that does not match', async () => {
    const events = longJournal(6).events;
    await expect(
      streamed(events, () => Promise.reject(new Error('worker died')), 2),
    ).rejects.toThrow('worker died');
    await expect(streamed(events, (checks) => onThread(checks.slice(1)), 2)).rejects.toThrow(
      'checkSignatures returned 1 results for 2 checks; return one result per check, in order',
    );
  });

  it('hands out each check once, in position order, while the plan keeps them all', () => {
    const replayer = new JournalReplayer({ hash: nodeSha256, trustedPublicKeys: [keyA.publicKey] });
    const events = longJournal(4).events;
    const taken: SignatureCheck[][] = [];
    for (const event of events) {
      replayer.add(event);
      if (replayer.pendingSignatureChecks === 2) taken.push(replayer.takeSignatureChecks());
    }
    taken.push(replayer.takeSignatureChecks());
    expect(replayer.pendingSignatureChecks).toBe(0);
    expect(taken.map((chunk) => chunk.map((c) => c.position))).toEqual([[2, 5], [6, 9], [12]]);
    expect(replayer.plan().signatureChecks.map((c) => c.position)).toEqual([2, 5, 6, 9, 12]);
  });
});

describe('verifyJournal: version-2 roots bind the partition', () => {
  const P = 'conv-a';
  const v2 = (): TestJournal =>
    new TestJournal()
      .add(EventKind.MessageReceived)
      .seal(keyA)
      .add(EventKind.TurnDispatched)
      .seal(keyA, { partition: P })
      .add(EventKind.TurnComplete)
      .seal(keyA, { partition: P });
  const verifyAs = (events: readonly JournalEvent[], partition?: string): JournalVerification =>
    verifyJournal(events, {
      hash: nodeSha256,
      verifier,
      trustedPublicKeys: [keyA.publicKey],
      ...(partition === undefined ? {} : { partition }),
    });

  it('accepts v1 and v2 roots in one journal verified as its own partition', () => {
    expect(verifyAs(v2().events, P)).toMatchObject({ ok: true, signedRootCount: 3 });
  });

  it('fails a transplanted journal at its first v2 root, naming both partitions', () => {
    const result = verifyAs(v2().events, 'conv-b');
    expect(result.failure).toMatchObject({
      position: 3,
      reason: 'wrong_partition',
      expected: 'conv-b',
      found: P,
    });
    expect(result.failure?.message).toContain('"conv-a"');
    expect(result.failure?.message).toContain('"conv-b"');
    expect(result.verifiedLeafCount).toBe(1);
  });

  it('fails a v2 root when no partition is named', () => {
    expect(verifyAs(v2().events).failure).toMatchObject({ position: 3, reason: 'wrong_partition' });
  });

  it('fails a v2 root whose payload was edited to name the other partition (bad_signature)', () => {
    const j = v2();
    const forged = j.events.map((e) => {
      if (e.position !== 3) return e;
      const fields = decodePayload(EventKind.SignedRoot, e.payload);
      return {
        ...e,
        payload: encodePayload(EventKind.SignedRoot, { ...fields, partition: 'conv-b' }),
      };
    });
    expect(verifyAs(forged, 'conv-b').failure).toMatchObject({
      position: 3,
      reason: 'bad_signature',
    });
  });

  it('fails a v2 root downgraded to v1 (the signature is over the v2 message)', () => {
    const j = v2();
    const downgraded = j.events.map((e) => {
      if (e.position !== 3) return e;
      const fields = decodePayload(EventKind.SignedRoot, e.payload);
      return {
        ...e,
        payload: encodePayload(EventKind.SignedRoot, { ...fields, version: 0, partition: '' }),
      };
    });
    expect(verifyAs(downgraded, 'conv-b').failure).toMatchObject({
      position: 3,
      reason: 'bad_signature',
    });
  });
});

describe('verifyJournal: a trusted checkpoint catches truncation and rollback', () => {
  const j = (): TestJournal => TestJournal.twoBatches(); // roots at 2 and 5, head 6
  const rootOver = (events: readonly JournalEvent[], count: number): Uint8Array =>
    Uint8Array.from(Buffer.from(recomputedRoot(events, count), 'hex'));
  const check = (
    events: readonly JournalEvent[],
    checkpoint: { head: number; root: Uint8Array; keyId?: string },
  ): JournalVerification =>
    verifyJournal(events, {
      hash: nodeSha256,
      verifier,
      trustedPublicKeys: [keyA.publicKey],
      checkpoint,
    });

  it('passes a journal at or past its checkpoint, and says a checkpoint was checked', () => {
    const { events } = j();
    expect(check(events, { head: 6, root: rootOver(events, 5), keyId: idA })).toMatchObject({
      ok: true,
      checkpointChecked: true,
    });
    expect(check(events, { head: 3, root: rootOver(events, 2) }).ok).toBe(true);
  });

  it('fails a journal cut after the checkpoint: rolled_back naming N and the length', () => {
    const { events } = j();
    const cut = events.slice(0, 3);
    const result = check(cut, { head: 6, root: rootOver(events, 5) });
    expect(verify(cut).ok).toBe(true);
    expect(result.ok).toBe(false);
    expect(result.failure).toMatchObject({ position: 3, reason: 'rolled_back' });
    expect(result.failure?.message).toMatch(/truncated or rolled back.*had 6 entries.*it has 3/su);
  });

  it('fails a journal whose history differs at the checkpoint', () => {
    const { events } = j();
    const forked = new TestJournal()
      .add(EventKind.MessageReceived, Uint8Array.of(9))
      .add(EventKind.TurnDispatched)
      .seal(keyA)
      .add(EventKind.ModelCall)
      .add(EventKind.TurnComplete)
      .seal(keyA);
    const result = check(forked.events, { head: 6, root: rootOver(events, 5) });
    expect(verify(forked.events).ok).toBe(true);
    expect(result.failure).toMatchObject({
      position: 5,
      reason: 'rolled_back',
      expected: toHex(rootOver(events, 5)),
      found: recomputedRoot(forked.events, 5),
    });
  });

  it('fails a checkpoint whose head is not right after a signed_root, or names another key', () => {
    const { events } = j();
    expect(check(events, { head: 5, root: rootOver(events, 4) }).failure).toMatchObject({
      position: 4,
      reason: 'rolled_back',
    });
    expect(check(events, { head: 6, root: rootOver(events, 5), keyId: idB }).failure).toMatchObject(
      {
        position: 5,
        reason: 'rolled_back',
      },
    );
  });
});

describe('verifyJournal: excised entries', () => {
  const leaves = new LeafHasher(nodeSha256);
  /** Batch 0-2 (message, dispatch, root); then a repair batch: excision of 1, root. */
  const repaired = (record?: {
    position?: number;
    leaf?: Uint8Array;
    erased?: boolean;
  }): JournalEvent[] => {
    const j = new TestJournal()
      .add(EventKind.MessageReceived)
      .add(EventKind.TurnDispatched)
      .seal(keyA);
    const original = j.events[1]!;
    const leaf = leaves.digest(1, original.kind, original.payload);
    j.add(
      EventKind.Excision,
      encodePayload(EventKind.Excision, {
        position: record?.position ?? 1,
        leafDigest: Buffer.from(record?.leaf ?? leaf),
        actor: 'admin@example.com',
        reason: 'corrupt payload',
        excisedAtMs: 1,
        problem: record?.erased === true ? '' : 'payload does not decode',
        erased: record?.erased ?? false,
        erasedKind: record?.erased === true ? EventKind.TurnDispatched : '',
        turnId: record?.erased === true ? 'turn-1' : '',
      }),
    ).seal(keyA);
    return j.events.map((e) =>
      e.position === 1
        ? { position: 1, kind: '', payload: new Uint8Array(0), excisedLeaf: leaf }
        : e,
    );
  };

  it('verifies an excised entry by its kept leaf digest and lists it', () => {
    expect(verify(repaired())).toMatchObject({
      ok: true,
      excised: [1],
      erased: [],
      signedRootCount: 2,
    });
  });

  it('lists an erased entry apart: its sealed record says an admin erased it', () => {
    expect(verify(repaired({ erased: true }))).toMatchObject({
      ok: true,
      excised: [1],
      erased: [1],
    });
  });

  it('fails an erasure whose record names another leaf digest, as any excision', () => {
    const result = verify(repaired({ erased: true, leaf: new Uint8Array(32).fill(7) }));
    expect(result.failure).toMatchObject({ position: 1, reason: 'unrecorded_excision' });
  });

  it('fails an excision no excision event records (an edit that hides an entry)', () => {
    const j = TestJournal.twoBatches();
    const hidden = j.events.map((e) =>
      e.position === 3
        ? {
            position: 3,
            kind: '',
            payload: new Uint8Array(0),
            excisedLeaf: leaves.digest(3, e.kind, e.payload),
          }
        : e,
    );
    expect(verify(hidden).failure).toMatchObject({ position: 3, reason: 'unrecorded_excision' });
  });

  it('fails an excision whose record names another leaf digest', () => {
    const result = verify(repaired({ leaf: new Uint8Array(32).fill(7) }));
    expect(result.failure).toMatchObject({ position: 1, reason: 'unrecorded_excision' });
  });

  it('fails a kept digest that is not the signed leaf (event_changed at the next root)', () => {
    // Marker and record agree, but on a digest no root was signed over.
    const forged = new Uint8Array(32).fill(7);
    const events = repaired({ leaf: forged }).map((e) =>
      e.position === 1 ? { ...e, excisedLeaf: forged } : e,
    );
    expect(verify(events).failure).toMatchObject({ position: 2, reason: 'event_changed' });
  });
});
