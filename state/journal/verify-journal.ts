import type { Ed25519Verifier } from './ed25519';
import { concludeJournalVerification } from './conclude-verification';
import { JournalReplayer } from './journal-replayer';
import type {
  JournalEvent,
  JournalVerification,
  ReplayOptions,
  VerificationPlan,
} from './verification-types';

/*
 * Verifying a whole journal on one thread: replay (journal-replayer.ts), every signature
 * checked here, then the verdict (conclude-verification.ts). streaming-verifier.ts does the
 * same with the signatures checked elsewhere while replay goes on.
 */

/**
 * Replays `events` (positions 0, 1, 2, ...) without checking signatures.
 *
 * @throws AppError `invalid_argument` for a trusted key that is not 32 bytes.
 */
export function planJournalVerification(
  events: Iterable<JournalEvent>,
  options: ReplayOptions,
): VerificationPlan {
  const replayer = new JournalReplayer(options);
  for (const event of events) replayer.add(event);
  return replayer.plan();
}

/** Options for {@link verifyJournal}. */
export interface VerifyJournalOptions extends ReplayOptions {
  readonly verifier: Ed25519Verifier;
}

/**
 * Verifies a whole journal on this thread: replays, checks every signature, and names the
 * first failure. For large journals, use a {@link StreamingJournalVerifier} whose
 * `checkSignatures` runs on worker threads, so signatures are checked during the replay.
 *
 * @example
 * import { nodeSha256 } from './node-sha256';
 * import { createNodeEd25519Verifier } from './node-ed25519';
 * const result: JournalVerification = verifyJournal([], {
 *   hash: nodeSha256,
 *   verifier: createNodeEd25519Verifier(),
 *   trustedPublicKeys: [],
 * });
 *
 * @throws AppError `invalid_argument` for a trusted key that is not 32 bytes.
 */
export function verifyJournal(
  events: Iterable<JournalEvent>,
  options: VerifyJournalOptions,
): JournalVerification {
  const plan = planJournalVerification(events, options);
  const results = plan.signatureChecks.map((c) =>
    options.verifier.verify(c.publicKey, c.message, c.signature),
  );
  return concludeJournalVerification(plan, results);
}
