/**
 * Verifies a journal export file (docs/journal-format.md, "Export file") line by line, with
 * the pure verifier of this folder. The CLI feeds it the lines of a file
 * (cli/journal-verify.ts, node:crypto); the forensics UI feeds it the lines of the export it
 * fetched (ui/, @noble). Same code, same verdict. Pure: the caller brings SHA-256 and the
 * ed25519 verifier.
 */
import { AppError } from '../../common/errors';
import type {
  ExportCheckpoint,
  ExportEvent,
  ExportHeader,
} from '../../common/journal-export-format';
import { parseExportEvent, parseExportHeader } from '../../common/journal-export-parse';
import type { NodeVisitor } from './compact-mmr';
import type { Ed25519Verifier } from './ed25519';
import { toHex } from './hex';
import type { Sha256 } from './sha256';
import { keyIdOf } from './signed-root';
import { concludeJournalVerification } from './conclude-verification';
import { JournalReplayer } from './journal-replayer';
import {
  retiredJournalFailure,
  retirementRecordFailure,
  type SignedRetirement,
} from './retirement-record';

/** Where the trusted keys came from: pinned by the user, or the file's header. */
export const KeyTrust = { Pinned: 'pinned', ExportHeader: 'export-header' } as const;
export type KeyTrust = (typeof KeyTrust)[keyof typeof KeyTrust];

/** The first failing check. */
export interface ExportFailure {
  readonly position: number;
  /** A reason from verify-journal.ts, or `malformed` for an unreadable line. */
  readonly reason: string;
  readonly expected: string;
  readonly found: string;
  readonly message: string;
}

/** The outcome of verifying an export. */
export interface ExportVerification {
  readonly partition: string;
  readonly ok: boolean;
  readonly events: number;
  readonly signedRoots: number;
  readonly unsealed: number;
  /** Leaf count of the last root that passed before the first failure (0 if none did). */
  readonly verifiedLeafCount: number;
  readonly trust: KeyTrust;
  readonly trustedKeyIds: readonly string[];
  readonly failure: ExportFailure | undefined;
  /** Positions repair excised (checked by their kept leaf digests). */
  readonly excised: readonly number[];
  /** The excised positions an admin erased (docs/journal-format.md, "Erasure"). */
  readonly erased: readonly number[];
  /** The checkpoint checked, or null: then truncation goes unnoticed. */
  readonly checkpoint: { readonly head: number; readonly rootHex: string } | null;
  /** What the file's header claims (the state plane's own word), or null. */
  readonly claimedCheckpoint: { readonly head: number; readonly rootHex: string } | null;
  /** The retirement record checked (docs/journal-format.md, "Retirement record"), or null. */
  readonly retirement: { readonly head: number; readonly rootHex: string } | null;
}

export interface ExportVerifierOptions {
  readonly hash: Sha256;
  /**
   * Raw 32-byte ed25519 public keys trusted at position 0; when empty, the keys in the
   * file's header are trusted (integrity against those keys only: pin for authenticity).
   */
  readonly pinnedKeys: readonly Uint8Array[];
  /** A checkpoint kept outside the journal (a Conversation's `status.journal`). */
  readonly checkpoint?: ExportCheckpoint;
  /**
   * The signed retirement record of the partition: the export must be exactly the journal
   * it describes (every entry, the same root), and the record must verify under a trusted key.
   */
  readonly retirement?: SignedRetirement;
  /** Names the export in error messages (a file path, "the export of hello"). */
  readonly source: string;
  /** Receives each event as read, and each MMR node replay computes (inclusion proofs). */
  readonly onEvent?: (event: ExportEvent) => void;
  readonly visit?: NodeVisitor;
}

/**
 * Reads an export one line at a time: the header, then the events. Memory is O(log n)
 * plus one record per signed root. A line that cannot be read is a failure (`malformed`)
 * at the position that line should hold, since replay cannot go past it; lines after it
 * are ignored.
 */
export class ExportVerifier {
  private replayer: JournalReplayer | undefined;
  private parsedHeader: ExportHeader | undefined;
  private trust: KeyTrust = KeyTrust.Pinned;
  private trusted: readonly Uint8Array[];
  private expectedPosition = 0;
  private lineNumber = 0;
  private malformed: ExportFailure | undefined;

  constructor(private readonly options: ExportVerifierOptions) {
    this.trusted = options.pinnedKeys;
  }

  /** The header, once its line was read. */
  get header(): ExportHeader | undefined {
    return this.parsedHeader;
  }

  /** True once a line could not be read: later lines change nothing. */
  get stopped(): boolean {
    return this.malformed !== undefined;
  }

  /**
   * Reads the next line.
   *
   * @throws AppError `invalid_argument` when the first line is not an export header, or no
   *   key is pinned and the header names none.
   */
  addLine(line: string): void {
    this.lineNumber += 1;
    if (this.malformed !== undefined) return;
    if (this.replayer === undefined) {
      this.replayer = this.start(line);
      return;
    }
    if (line.trim() === '') return;
    const event = parseExportEvent(line);
    if (typeof event === 'string') {
      this.malformed = {
        position: this.expectedPosition,
        reason: 'malformed',
        expected: '',
        found: '',
        message:
          `line ${String(this.lineNumber)} (where event ${String(this.expectedPosition)} belongs) cannot be read: ` +
          `${event}; the file was changed or truncated`,
      };
      return;
    }
    this.options.onEvent?.(event);
    this.replayer.add(event, this.options.visit);
    this.expectedPosition = event.position + 1;
  }

  private start(line: string): JournalReplayer {
    const { source } = this.options;
    const header = parseExportHeader(line);
    if (typeof header === 'string') {
      throw new AppError(
        'invalid_argument',
        `${source} is not a journal export: ${header}; export one with \`polychrome state export\``,
        { details: { source } },
      );
    }
    this.parsedHeader = header;
    if (this.trusted.length === 0) {
      this.trust = KeyTrust.ExportHeader;
      this.trusted = header.publicKeys.map((k) => k.publicKey);
    }
    if (this.trusted.length === 0) {
      throw new AppError(
        'invalid_argument',
        `${source} names no public key and none was given; pass the state plane's key with --public-key (or pin one in the UI)`,
        { details: { source } },
      );
    }
    // Version-2 roots must name the header's partition: a file copied from another
    // conversation fails at its first one.
    const { checkpoint } = this.options;
    return new JournalReplayer({
      hash: this.options.hash,
      trustedPublicKeys: this.trusted,
      partition: header.partition,
      ...(checkpoint === undefined ? {} : { checkpoint }),
    });
  }

  /**
   * Checks the signatures and names the first failure.
   *
   * @throws AppError `invalid_argument` when no line was read (an empty export).
   */
  finish(verifier: Ed25519Verifier): ExportVerification {
    const { replayer, parsedHeader: header } = this;
    if (replayer === undefined || header === undefined) {
      throw new AppError(
        'invalid_argument',
        `${this.options.source} is empty; it is not a journal export`,
        { details: { source: this.options.source } },
      );
    }
    const plan = replayer.plan();
    const outcome = concludeJournalVerification(
      plan,
      plan.signatureChecks.map((c) => verifier.verify(c.publicKey, c.message, c.signature)),
    );
    const { malformed } = this;
    // A failure the replay found comes first when it sits before the unreadable line.
    const failure =
      (outcome.failure !== undefined &&
      (malformed === undefined || outcome.failure.position <= malformed.position)
        ? outcome.failure
        : malformed) ??
      this.retirementFailure(header.partition, plan.leafCount, plan.root, verifier);
    return {
      partition: header.partition,
      ok: failure === undefined,
      events: outcome.leafCount,
      signedRoots: outcome.signedRootCount,
      unsealed: outcome.unsealed.count,
      verifiedLeafCount: outcome.verifiedLeafCount,
      trust: this.trust,
      trustedKeyIds: this.trusted.map((k) => keyIdOf(this.options.hash, k)),
      excised: outcome.excised,
      erased: outcome.erased,
      checkpoint: checkpointJson(this.options.checkpoint),
      claimedCheckpoint: checkpointJson(header.checkpoint),
      retirement: checkpointJson(this.options.retirement),
      failure:
        failure === undefined
          ? undefined
          : {
              position: failure.position,
              reason: failure.reason,
              expected: failure.expected,
              found: failure.found,
              message: failure.message,
            },
    };
  }

  /** The export against the retirement record, once everything else passed. */
  private retirementFailure(
    partition: string,
    leafCount: number,
    root: Uint8Array,
    verifier: Ed25519Verifier,
  ): ExportFailure | undefined {
    const record = this.options.retirement;
    if (record === undefined) return undefined;
    const crypto = { hash: this.options.hash, verifier };
    const failure =
      retirementRecordFailure(record, partition, this.trusted, crypto) ??
      retiredJournalFailure(record, { partition, leafCount, root });
    return failure === undefined ? undefined : { position: leafCount, ...failure };
  }
}

/**
 * The failure of an export that had events but no checkpoint to check them against
 * (`conversation verify`, the UI): a journal cut short would pass, so it does not.
 */
export function missingCheckpoint(
  verification: Pick<ExportVerification, 'events' | 'checkpoint'>,
): ExportFailure | undefined {
  return verification.checkpoint === null && verification.events > 0
    ? {
        position: 0,
        reason: 'no_checkpoint',
        expected: 'the Conversation status.journal (head and last signed root)',
        found: 'none',
        message:
          'the Conversation status names no journal checkpoint, so a journal cut short would pass; retry once the status shows status.journal',
      }
    : undefined;
}

function checkpointJson(
  checkpoint: { readonly head: number; readonly root: Uint8Array } | undefined,
): { head: number; rootHex: string } | null {
  return checkpoint === undefined
    ? null
    : { head: checkpoint.head, rootHex: toHex(checkpoint.root) };
}
