import { AppError } from '../../common/errors';
import type { NodeVisitor } from './compact-mmr';
import { concludeJournalVerification } from './conclude-verification';
import { JournalReplayer } from './journal-replayer';
import type {
  JournalEvent,
  JournalVerification,
  ReplayOptions,
  SignatureCheck,
} from './verification-types';

/**
 * Checks signatures, e.g. on worker threads (state/verify-pool.ts); `result[i]` is the
 * outcome of `checks[i]`.
 */
export type SignatureChecker = (checks: readonly SignatureCheck[]) => Promise<readonly boolean[]>;

/** Options for {@link StreamingJournalVerifier}. */
export interface StreamingVerifyOptions extends ReplayOptions {
  readonly checkSignatures: SignatureChecker;
  /**
   * Checks sent per call of `checkSignatures`: small enough that the first go out early in
   * the replay and the last ones, sent when it ends, are little left to wait for.
   * @default 64
   */
  readonly chunkSize?: number;
}

/**
 * Replays a journal and has its signatures checked while it does: each time replay has
 * collected `chunkSize` checks they go to `checkSignatures` at once, so worker threads
 * verify signatures alongside the hashing instead of after it. Results are put back in
 * check order before {@link concludeJournalVerification}, so the verdict, first failure
 * included, is the one the whole-plan path gives, whichever chunk finishes first.
 */
export class StreamingJournalVerifier {
  private readonly replayer: JournalReplayer;
  private readonly checkSignatures: SignatureChecker;
  private readonly chunkSize: number;
  private readonly parts: { size: number; results: Promise<readonly boolean[]> }[] = [];

  /**
   * @throws AppError `invalid_argument` when a trusted key is not 32 bytes.
   */
  constructor(options: StreamingVerifyOptions) {
    this.replayer = new JournalReplayer(options);
    this.checkSignatures = options.checkSignatures;
    this.chunkSize = options.chunkSize ?? 64;
  }

  /** Replays the next event (see {@link JournalReplayer.add}); may send a chunk of checks. */
  add(event: JournalEvent, visit?: NodeVisitor): void {
    this.replayer.add(event, visit);
    if (this.replayer.pendingSignatureChecks >= this.chunkSize) this.send();
  }

  /**
   * Sends the last checks, waits for every result and names the first failure.
   *
   * @throws whatever `checkSignatures` rejects with (a pool's worker crash, for one);
   *   AppError `invalid_argument` when it returns the wrong number of results.
   */
  async finish(): Promise<JournalVerification> {
    this.send();
    const plan = this.replayer.plan();
    const results: boolean[] = [];
    for (const part of this.parts) {
      const chunk = await part.results;
      if (chunk.length !== part.size) {
        throw new AppError(
          'invalid_argument',
          `checkSignatures returned ${String(chunk.length)} results for ${String(part.size)} checks; ` +
            'return one result per check, in order',
          { details: { checks: part.size, results: chunk.length } },
        );
      }
      results.push(...chunk);
    }
    return concludeJournalVerification(plan, results);
  }

  private send(): void {
    const checks = this.replayer.takeSignatureChecks();
    if (checks.length === 0) return;
    const results = this.checkSignatures(checks);
    // Awaited in finish(); until then a rejection must not count as unhandled.
    results.catch(() => undefined);
    this.parts.push({ size: checks.length, results });
  }
}
