import { mkdirSync, readFileSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { isAlive } from './processes';

/**
 * Machine-wide claims of loopback blocks. A local node's block claim (a Lease) is only
 * unique within its cluster; two local clusters on one machine (the dev stack and a test
 * run) would otherwise both hand out 127.0.1.1 and reach each other's pods. A claim is a
 * file `<block>.pid` holding the claiming process's pid, created exclusively; a claim whose
 * process is gone is stale and taken over.
 */

/** Where the claims live. */
export const DEFAULT_LOOPBACK_LOCK_DIR = join(tmpdir(), 'polychrome-loopback-blocks');

/** Blocks this process claimed (several nodes of one process stay apart too). */
const claimedHere = new Set<string>();

/**
 * Claims `block` for this process.
 *
 * @returns a release function, or undefined when another live process (or another node
 *   of this process) holds it.
 */
export function claimLoopbackBlock(
  block: number,
  dir: string = DEFAULT_LOOPBACK_LOCK_DIR,
): (() => void) | undefined {
  mkdirSync(dir, { recursive: true });
  const path = join(dir, `${block}.pid`);
  if (claimedHere.has(path)) return undefined;
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      writeFileSync(path, String(process.pid), { flag: 'wx' });
      claimedHere.add(path);
      return () => {
        claimedHere.delete(path);
        try {
          if (readFileSync(path, 'utf8') === String(process.pid)) unlinkSync(path);
        } catch {
          // Already gone: nothing to release.
        }
      };
    } catch (err: unknown) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      let holder = Number.NaN;
      try {
        holder = Number(readFileSync(path, 'utf8'));
      } catch {
        // Released between our create and read: try again.
      }
      if (Number.isInteger(holder) && holder > 0 && holder !== process.pid && isAlive(holder)) {
        return undefined;
      }
      // A dead holder's (or our own leftover) claim: take it over.
      try {
        unlinkSync(path);
      } catch {
        // Someone else took it over first; the next attempt decides.
      }
    }
  }
  return undefined;
}
