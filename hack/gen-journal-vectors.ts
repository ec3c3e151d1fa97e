// Writes docs/journal-vectors.json, the pinned journal integrity vectors
// (docs/journal-format.md). Deterministic: run it twice, get the same bytes; the unit test
// state/journal/journal-vectors.test.ts fails when the committed file differs.
//
//   npx tsx hack/gen-journal-vectors.ts
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';

import { buildJournalVectors, serializeJournalVectors } from '../state/journal/journal-vectors';
import { createNodeEd25519Signer } from '../state/journal/node-ed25519';
import { nodeSha256 } from '../state/journal/node-sha256';

const target = join(__dirname, '..', 'docs', 'journal-vectors.json');
const vectors = buildJournalVectors({ hash: nodeSha256, createSigner: createNodeEd25519Signer });
writeFileSync(target, serializeJournalVectors(vectors));
console.log(
  `wrote docs/journal-vectors.json: ${String(vectors.leaves.length)} leaves, ` +
    `${String(vectors.roots.length)} roots, ${String(vectors.signedRoots.length)} signed roots`,
);
