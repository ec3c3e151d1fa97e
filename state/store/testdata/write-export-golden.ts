/*
 * Writes the export golden files that journal-export-golden.test.ts pins. The goldens
 * record what export wrote before the export was reworked; rewrite them only for an
 * intended change of the export format (docs/journal-format.md, "Export file"), never to
 * make the test pass. Usage: npx tsx state/store/testdata/write-export-golden.ts
 */
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';

import {
  buildExportJournal,
  exportBytes,
  GOLDEN_PARTITION,
  REFUSED_PARTITION,
} from './export-journal';
import { tempDir } from './fixtures';

async function main(): Promise<void> {
  const dir = await tempDir();
  try {
    const store = await buildExportJournal(dir.path);
    try {
      for (const partition of [GOLDEN_PARTITION, REFUSED_PARTITION]) {
        const file = join(__dirname, `export-${partition}.ndjson`);
        await writeFile(file, await exportBytes(store, partition));
        console.log(`wrote ${file}`);
      }
    } finally {
      await store.close();
    }
  } finally {
    await dir.remove();
  }
}

void main();
