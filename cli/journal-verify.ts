import { createReadStream } from 'node:fs';
import { createInterface } from 'node:readline';

import { AppError } from '../common/errors';
import { createNodeEd25519Verifier } from '../state/journal/node-ed25519';
import { nodeSha256 } from '../state/journal/node-sha256';
import { keyIdOf } from '../state/journal/signed-root';
import { concludeJournalVerification, JournalReplayer } from '../state/journal/verify-journal';
import { parseExportEvent, parseExportHeader, type ExportCheckpoint } from './export-file';

/** Where the trusted keys came from: pinned on the command line, or the file's header. */
export const KeyTrust = { Pinned: 'pinned', ExportHeader: 'export-header' } as const;
export type KeyTrust = (typeof KeyTrust)[keyof typeof KeyTrust];

/** The first failing check, as the CLI prints it. */
export interface OfflineFailure {
  readonly position: number;
  /** A reason from state/journal/verify-journal.ts, or `malformed` for an unreadable line. */
  readonly reason: string;
  readonly expected: string;
  readonly found: string;
  readonly message: string;
}

/** The outcome of verifying an export file offline. */
export interface OfflineVerification {
  readonly source: string;
  readonly partition: string;
  readonly ok: boolean;
  readonly events: number;
  readonly signedRoots: number;
  readonly unsealed: number;
  readonly trust: KeyTrust;
  readonly trustedKeyIds: readonly string[];
  readonly failure: OfflineFailure | undefined;
  /** Positions repair excised (checked by their kept leaf digests). */
  readonly excised: readonly number[];
  /** The checkpoint checked (`--checkpoint`), or null: then truncation goes unnoticed. */
  readonly checkpoint: { readonly head: number; readonly rootHex: string } | null;
  /** What the file's header claims (the state plane's own word), or null. */
  readonly claimedCheckpoint: { readonly head: number; readonly rootHex: string } | null;
}

/**
 * Verifies an export file with the pure verifier in state/journal, streaming: memory is
 * O(log n) plus one record per signed root. A line that cannot be read is a failure
 * (`malformed`) at the position that line should hold, since replay cannot go past it.
 *
 * @param pinnedKeys raw 32-byte ed25519 public keys trusted at position 0; when empty, the
 *   keys in the file's header are trusted (which proves integrity against those keys
 *   only: pin the key for authenticity).
 * @throws AppError `not_found` when the file cannot be read; `invalid_argument` when its
 *   first line is not an export header, or no key is pinned and the header names none.
 */
export async function verifyExportFile(
  path: string,
  pinnedKeys: readonly Uint8Array[],
  checkpoint?: ExportCheckpoint,
): Promise<OfflineVerification> {
  const input = createReadStream(path);
  const opened = new Promise<void>((resolve, reject) => {
    input.once('open', () => resolve());
    input.once('error', reject);
  });
  try {
    await opened;
  } catch (cause) {
    throw new AppError('not_found', `cannot read the export file ${path}; check the path`, {
      details: { file: path },
      cause,
    });
  }
  const lines = createInterface({ input, crlfDelay: Infinity });
  let replayer: JournalReplayer | undefined;
  let partition = '';
  let claimed: ExportCheckpoint | undefined;
  let trust: KeyTrust = KeyTrust.Pinned;
  let trusted: readonly Uint8Array[] = pinnedKeys;
  let expectedPosition = 0;
  let lineNumber = 0;
  let malformed: OfflineFailure | undefined;
  try {
    for await (const line of lines) {
      lineNumber += 1;
      if (replayer === undefined) {
        const header = parseExportHeader(line);
        if (typeof header === 'string') {
          throw new AppError(
            'invalid_argument',
            `${path} is not a journal export: ${header}; export one with \`polychrome state export\``,
            { details: { file: path } },
          );
        }
        partition = header.partition;
        claimed = header.checkpoint;
        if (trusted.length === 0) {
          trust = KeyTrust.ExportHeader;
          trusted = header.publicKeys.map((k) => k.publicKey);
        }
        if (trusted.length === 0) {
          throw new AppError(
            'invalid_argument',
            `${path} names no public key and none was given; pass the state plane's key with --public-key`,
            { details: { file: path } },
          );
        }
        // Version-2 roots must name the header's partition: a file copied from another
        // conversation fails at its first one.
        replayer = new JournalReplayer({
          hash: nodeSha256,
          trustedPublicKeys: trusted,
          partition,
          ...(checkpoint === undefined ? {} : { checkpoint }),
        });
        continue;
      }
      if (line.trim() === '') continue;
      const event = parseExportEvent(line);
      if (typeof event === 'string') {
        malformed = {
          position: expectedPosition,
          reason: 'malformed',
          expected: '',
          found: '',
          message:
            `line ${String(lineNumber)} (where event ${String(expectedPosition)} belongs) cannot be read: ` +
            `${event}; the file was changed or truncated`,
        };
        break;
      }
      replayer.add(event);
      expectedPosition = event.position + 1;
    }
  } finally {
    lines.close();
    input.destroy();
  }
  if (replayer === undefined) {
    throw new AppError('invalid_argument', `${path} is empty; it is not a journal export`, {
      details: { file: path },
    });
  }
  const plan = replayer.plan();
  const verifier = createNodeEd25519Verifier();
  const outcome = concludeJournalVerification(
    plan,
    plan.signatureChecks.map((c) => verifier.verify(c.publicKey, c.message, c.signature)),
  );
  // A failure the replay found comes first when it sits before the unreadable line.
  const failure =
    outcome.failure !== undefined &&
    (malformed === undefined || outcome.failure.position <= malformed.position)
      ? outcome.failure
      : malformed;
  return {
    source: path,
    partition,
    ok: failure === undefined,
    events: outcome.leafCount,
    signedRoots: outcome.signedRootCount,
    unsealed: outcome.unsealed.count,
    trust,
    trustedKeyIds: trusted.map((k) => keyIdOf(nodeSha256, k)),
    excised: outcome.excised,
    checkpoint: checkpointJson(checkpoint),
    claimedCheckpoint: checkpointJson(claimed),
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

function checkpointJson(
  checkpoint: ExportCheckpoint | undefined,
): { head: number; rootHex: string } | null {
  return checkpoint === undefined
    ? null
    : { head: checkpoint.head, rootHex: Buffer.from(checkpoint.root).toString('hex') };
}
