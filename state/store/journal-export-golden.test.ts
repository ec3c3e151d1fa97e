import { readFile } from 'node:fs/promises';
import { join } from 'node:path';

import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';

import type { JournalStore } from './journal-store';
import {
  buildExportJournal,
  exportBytes,
  GOLDEN_PARTITION,
  REFUSED_PARTITION,
} from './testdata/export-journal';
import { tempDir } from './testdata/fixtures';

/*
 * Export is a file format that independent verifiers read (docs/journal-format.md,
 * "Export file"), so its bytes are pinned: the golden files hold what export wrote for a
 * fixed journal (testdata/export-journal.ts) and were written by
 * testdata/write-export-golden.ts before export was reworked. Any change of a byte fails.
 */

let dir: { path: string; remove: () => Promise<void> };
let store: JournalStore;

beforeAll(async () => {
  dir = await tempDir();
  store = await buildExportJournal(dir.path);
});

afterAll(async () => {
  await store.close();
  await dir.remove();
});

async function golden(partition: string): Promise<Buffer> {
  return readFile(join(__dirname, 'testdata', `export-${partition}.ndjson`));
}

describe('export bytes', () => {
  it('the fixed journal exports byte for byte as the golden file', async () => {
    // The journal holds every kind of export line: a header with a checkpoint, events of
    // three keys with key_rotated between them, an excised entry and an excision event.
    const bytes = await exportBytes(store, GOLDEN_PARTITION);
    const text = bytes.toString('utf8');
    for (const needle of ['"key_rotated"', '"excised":true', '"excision"', '"checkpoint":{']) {
      expect(text).toContain(needle);
    }
    expect(text).toBe((await golden(GOLDEN_PARTITION)).toString('utf8'));
    expect(bytes.equals(await golden(GOLDEN_PARTITION))).toBe(true);
  });

  it('a refused partition exports byte for byte as its golden file (no head, no checkpoint)', async () => {
    expect(store.listPartitions()).toContainEqual(
      expect.objectContaining({ partition: REFUSED_PARTITION, status: 'refused' }),
    );
    const bytes = await exportBytes(store, REFUSED_PARTITION);
    expect(bytes.toString('utf8')).toContain('"head":null,"checkpoint":null');
    expect(bytes.equals(await golden(REFUSED_PARTITION))).toBe(true);
  });
});
