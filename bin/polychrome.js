#!/usr/bin/env node
'use strict';
// Launcher for `polychrome` and `kubectl-polychrome`: runs the compiled CLI when the
// project was built (`npm run build` writes dist/), otherwise the TypeScript source
// through tsx (a devDependency, so this fallback works in a development checkout only).
const { existsSync } = require('node:fs');
const { join } = require('node:path');

const built = join(__dirname, '..', 'dist', 'cli', 'polychrome.js');
if (existsSync(built)) {
  require(built);
} else {
  try {
    require('tsx/cjs');
  } catch {
    console.error(
      'polychrome: not built and tsx is not installed; run `npm run build` (or `npm ci` for a development checkout)',
    );
    process.exit(3);
  }
  require(join(__dirname, '..', 'cli', 'polychrome.ts'));
}
