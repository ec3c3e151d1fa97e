import { createReadStream } from 'node:fs';
import { createInterface } from 'node:readline';

import { AppError } from '../common/errors';
import {
  ExportVerifier,
  type ExportFailure,
  type ExportVerification,
} from '../state/journal/export-verify';
import { createNodeEd25519Verifier } from '../state/journal/node-ed25519';
import { nodeSha256 } from '../state/journal/node-sha256';
import type { ExportCheckpoint } from '../common/journal-export-format';
import type { SignedRetirement } from '../state/journal/retirement-record';

/** The first failing check, as the CLI prints it. */
export type OfflineFailure = ExportFailure;

/** The outcome of verifying an export file offline. */
export interface OfflineVerification extends Omit<ExportVerification, 'verifiedLeafCount'> {
  readonly source: string;
}

/**
 * Verifies an export file with the pure verifier in state/journal (export-verify.ts, the
 * one the forensics UI runs in the browser), streaming: memory is O(log n) plus one record
 * per signed root. A line that cannot be read is a failure (`malformed`) at the position
 * that line should hold, since replay cannot go past it.
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
  retirement?: SignedRetirement,
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
  const verifier = new ExportVerifier({
    hash: nodeSha256,
    pinnedKeys,
    source: path,
    ...(checkpoint === undefined ? {} : { checkpoint }),
    ...(retirement === undefined ? {} : { retirement }),
  });
  try {
    for await (const line of lines) {
      verifier.addLine(line);
      if (verifier.stopped) break;
    }
  } finally {
    lines.close();
    input.destroy();
  }
  const { verifiedLeafCount: _, ...outcome } = verifier.finish(createNodeEd25519Verifier());
  return { source: path, ...outcome };
}
