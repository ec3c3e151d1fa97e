/*
 * Full verification of a 100,000-event partition with a signed root every 3 events (two
 * events and their closing signed_root per batch, as turns write them): every root is
 * recomputed and every signature checked, the checks split over worker threads so both
 * cores are used. Aim: under 3 s. Printed beside baselines measured in the same run on the
 * same bytes: raw SHA-256 of the leaf preimages, and the same ed25519 checks on one thread.
 *
 * Usage: npx tsx bench/journal-verify.bench.ts [events]   (default 100000)
 */
import { availableParallelism } from 'node:os';
import { encodePayload, EventKind } from '../common/event-kinds';
import { CompactMmr } from '../state/journal/compact-mmr';
import { LeafHasher } from '../state/journal/leaf-digest';
import { createNodeEd25519Signer, createNodeEd25519Verifier } from '../state/journal/node-ed25519';
import { nodeSha256 } from '../state/journal/node-sha256';
import { signRoot } from '../state/journal/signed-root';
import {
  concludeJournalVerification,
  planJournalVerification,
  type JournalEvent,
} from '../state/journal/verify-journal';
import { SignatureVerifyPool } from '../state/verify-pool';

const TOTAL = Number(process.argv[2] ?? '100000');

function buildJournal(): { events: JournalEvent[]; publicKey: Uint8Array } {
  const signer = createNodeEd25519Signer(new Uint8Array(32).fill(7));
  const leaves = new LeafHasher(nodeSha256);
  const mmr = new CompactMmr(nodeSha256);
  const events: JournalEvent[] = [];
  const add = (kind: string, payload: Uint8Array): void => {
    const position = events.length;
    events.push({ position, kind, payload });
    mmr.append(leaves.digest(position, kind, payload));
  };
  for (let turn = 0; events.length + 3 <= TOTAL; turn++) {
    add(
      EventKind.MessageReceived,
      encodePayload(EventKind.MessageReceived, {
        turnId: `t-${turn}`,
        idempotencyKey: `k-${turn}`,
        text: `message ${turn} `.repeat(8),
        receivedAtMs: 1_700_000_000_000 + turn,
      }),
    );
    add(
      EventKind.TurnComplete,
      encodePayload(EventKind.TurnComplete, {
        turnId: `t-${turn}`,
        text: `reply ${turn} `.repeat(12),
        steps: 1,
        completedAtMs: 1_700_000_000_000 + turn,
        fallback: false,
      }),
    );
    const fields = signRoot(nodeSha256, signer, events.length, mmr.root());
    add(
      EventKind.SignedRoot,
      encodePayload(EventKind.SignedRoot, {
        ...fields,
        root: Buffer.from(fields.root),
        signature: Buffer.from(fields.signature),
      }),
    );
  }
  return { events, publicKey: signer.publicKey };
}

async function main(): Promise<void> {
  const { events, publicKey } = buildJournal();
  const bytes = events.reduce((n, e) => n + e.payload.length + e.kind.length + 24, 0);

  // Baseline 1: raw SHA-256 over each event's leaf preimage-sized input.
  const t0 = performance.now();
  for (const e of events) nodeSha256(e.payload);
  const rawHashS = (performance.now() - t0) / 1000;

  // The verification: plan (hash chain, MMR, roots) then the signatures on the pool.
  const workers = Math.max(2, availableParallelism());
  const pool = new SignatureVerifyPool({ workers });
  try {
    await pool.verify([]); // workers started before the clock runs
    const t1 = performance.now();
    const plan = planJournalVerification(events, {
      hash: nodeSha256,
      trustedPublicKeys: [publicKey],
    });
    const planS = (performance.now() - t1) / 1000;
    const results = await pool.verify(plan.signatureChecks);
    const verdict = concludeJournalVerification(plan, results);
    const totalS = (performance.now() - t1) / 1000;
    if (!verdict.ok)
      throw new Error(`the benchmark journal did not verify: ${JSON.stringify(verdict)}`);

    // Baseline 2: the same signature checks, one thread.
    const verifier = createNodeEd25519Verifier();
    const t2 = performance.now();
    for (const c of plan.signatureChecks) verifier.verify(c.publicKey, c.message, c.signature);
    const oneThreadSigS = (performance.now() - t2) / 1000;

    const roots = plan.signatureChecks.length;
    console.log(
      `verify ${events.length.toLocaleString('en-US')} events (${roots.toLocaleString('en-US')} signed roots, ${(bytes / 1e6).toFixed(1)} MB): ${totalS.toFixed(2)} s on ${workers} workers (aim < 3 s)`,
    );
    console.log(
      `  hash chain + MMR + roots: ${planS.toFixed(2)} s = ${((rawHashS / planS) * 100).toFixed(0)}% of raw SHA-256 over the same events (${rawHashS.toFixed(2)} s)`,
    );
    console.log(
      `  signatures: ${(totalS - planS).toFixed(2)} s on the pool vs ${oneThreadSigS.toFixed(2)} s on one thread (${(oneThreadSigS / (totalS - planS)).toFixed(2)}x)`,
    );
  } finally {
    await pool.close();
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
