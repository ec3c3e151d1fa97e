/**
 * A journal re-appended batch by batch to a real JournalStore signing with a test key (its
 * signed roots dropped and made again), then exported: what someone holding the journal's
 * signing key could make of a changed journal. Its export verifies under that key, so only
 * replay's checks can catch the change.
 */
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { JournalEntry } from '../../common/state-journal';
import type { Ed25519Signer } from '../../state/journal/ed25519';
import { JournalStore } from '../../state/store/journal-store';

let exports = 0;

/** Writes the export of `journal` re-signed by `signer` under `dir`, and returns its path. */
export async function reSignedExport(
  journal: readonly JournalEntry[],
  options: { readonly dir: string; readonly signer: Ed25519Signer; readonly partition: string },
): Promise<string> {
  exports += 1;
  const { dir, signer, partition } = options;
  const store = new JournalStore({ location: join(dir, `db-${String(exports)}`), signer });
  await store.open();
  try {
    let head = 0;
    let batch: { kind: string; payload: Uint8Array }[] = [];
    for (const entry of journal) {
      if (entry.kind !== 'signed_root') {
        batch.push({ kind: entry.kind, payload: entry.payload });
        continue;
      }
      head = (await store.append(partition, head, batch)).head;
      batch = [];
    }
    let text = '';
    for await (const chunk of store.export(partition)) text += Buffer.from(chunk).toString('utf8');
    const file = join(dir, `export-${String(exports)}.jsonl`);
    await writeFile(file, text);
    return file;
  } finally {
    await store.close();
  }
}
