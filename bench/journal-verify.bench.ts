/*
 * Full verification of a 100,000-event partition with a signed root every 3 events (two
 * events and their closing signed_root per batch, as turns write them): every root is
 * recomputed and every signature checked. The main thread replays (hash chain, MMR, roots)
 * and streams each chunk of signature checks to worker threads as it goes, so every core
 * works from the start. Aim: under 3 s. Printed beside baselines measured in the same run
 * on the same bytes: raw SHA-256 of the payloads, replay alone, and the same ed25519
 * checks on one thread, whose sum spread over the cores is the floor for this machine.
 *
 * Usage: npx tsx bench/journal-verify.bench.ts [events]   (default 100000)
 */
import { availableParallelism, loadavg } from 'node:os';
import { encodePayload, EventKind } from '../common/event-kinds';
import { CompactMmr } from '../state/journal/compact-mmr';
import { LeafHasher } from '../state/journal/leaf-digest';
import { createNodeEd25519Signer, createNodeEd25519Verifier } from '../state/journal/node-ed25519';
import { nodeSha256 } from '../state/journal/node-sha256';
import { signedRootPayload, signRoot } from '../state/journal/signed-root';
import { planJournalVerification } from '../state/journal/verify-journal';
import { StreamingJournalVerifier } from '../state/journal/streaming-verifier';
import type { JournalEvent } from '../state/journal/verification-types';
import { SignatureVerifyPool } from '../state/verify-pool';

const TOTAL = Number(process.argv[2] ?? '100000');
/** Roots are version 2, as the store writes them: their message names the partition. */
const PARTITION = 'conv-bench';

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
    const fields = signRoot(nodeSha256, signer, events.length, mmr.root(), PARTITION);
    add(EventKind.SignedRoot, encodePayload(EventKind.SignedRoot, signedRootPayload(fields)));
  }
  return { events, publicKey: signer.publicKey };
}

async function main(): Promise<void> {
  const { events, publicKey } = buildJournal();
  const bytes = events.reduce((n, e) => n + e.payload.length + e.kind.length + 24, 0);
  const trustedPublicKeys = [publicKey];

  // Baseline 1: raw SHA-256 over each event's payload.
  const t0 = performance.now();
  for (const e of events) nodeSha256(e.payload);
  const rawHashS = (performance.now() - t0) / 1000;

  const workers = Math.max(2, availableParallelism());
  const pool = new SignatureVerifyPool({ workers });
  try {
    await pool.verify([]); // workers started before the clock runs

    // The verification: replay here, signatures on the pool as replay collects them.
    const cpu = process.cpuUsage();
    const t1 = performance.now();
    const verifier = new StreamingJournalVerifier({
      hash: nodeSha256,
      trustedPublicKeys,
      partition: PARTITION,
      checkSignatures: (checks) => pool.verify(checks),
    });
    for (const e of events) verifier.add(e);
    const replayedS = (performance.now() - t1) / 1000;
    const verdict = await verifier.finish();
    const totalS = (performance.now() - t1) / 1000;
    const { user, system } = process.cpuUsage(cpu);
    if (!verdict.ok) {
      throw new Error(`the benchmark journal did not verify: ${JSON.stringify(verdict)}`);
    }

    // Baseline 2: replay alone, no signature checked.
    const t2 = performance.now();
    const plan = planJournalVerification(events, {
      hash: nodeSha256,
      trustedPublicKeys,
      partition: PARTITION,
    });
    const planS = (performance.now() - t2) / 1000;

    // Baseline 3: the same signature checks, one thread.
    const oneThread = createNodeEd25519Verifier();
    const t3 = performance.now();
    for (const c of plan.signatureChecks) oneThread.verify(c.publicKey, c.message, c.signature);
    const oneThreadSigS = (performance.now() - t3) / 1000;

    const roots = plan.signatureChecks.length;
    console.log(
      `load average ${loadavg()
        .map((l) => l.toFixed(1))
        .join(' ')} (figures are noisy on a busy host)`,
    );
    const cores = availableParallelism();
    const floorS = (planS + oneThreadSigS) / cores;
    console.log(
      `verify ${events.length.toLocaleString('en-US')} events (${roots.toLocaleString('en-US')} signed roots, ${(bytes / 1e6).toFixed(1)} MB): ${totalS.toFixed(2)} s on ${workers} workers (aim < 3 s); ` +
        `replay done at ${replayedS.toFixed(2)} s; CPU ${((user + system) / 1e6).toFixed(2)} s`,
    );
    console.log(
      `  replay alone (hash chain + MMR + roots): ${planS.toFixed(2)} s = ${((rawHashS / planS) * 100).toFixed(0)}% of raw SHA-256 over the same events (${rawHashS.toFixed(2)} s)`,
    );
    console.log(
      `  signatures on one thread: ${oneThreadSigS.toFixed(2)} s (${((oneThreadSigS / roots) * 1e6).toFixed(0)} us each); ` +
        `(replay + signatures) / ${cores} cores = ${floorS.toFixed(2)} s, the floor here; verify took ${((totalS / floorS) * 100).toFixed(0)}% of it`,
    );
  } finally {
    await pool.close();
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
