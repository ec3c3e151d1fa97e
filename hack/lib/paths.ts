import { join, resolve } from 'node:path';

/** The repository root (hack/lib/../..). */
export const repoRoot = resolve(__dirname, '..', '..');

/** Where `make binaries` links the pinned binaries. */
export const defaultBinDir = process.env.POLYCHROME_BIN_DIR ?? join(repoRoot, 'hack', 'bin');

/** Polychrome's CRDs (generated) and the agent-sandbox CRDs (copied from its pinned module). */
export const defaultCrdDirs: readonly string[] = [
  join(repoRoot, 'config', 'crd', 'bases'),
  join(repoRoot, 'config', 'crd', 'agent-sandbox'),
];
