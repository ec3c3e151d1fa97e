'use strict';
// What the launchers in bin/ share: run the compiled entry when the project was built
// (`npm run build` writes dist/), otherwise the TypeScript source through tsx (a
// devDependency, so this fallback works in a development checkout only).
const { existsSync } = require('node:fs');
const { join } = require('node:path');

/** Runs cli/<entry>.ts (or dist/cli/<entry>.js); `name` is the command, for the message. */
module.exports = function launch(entry, name) {
  const built = join(__dirname, '..', 'dist', 'cli', `${entry}.js`);
  if (existsSync(built)) {
    require(built);
    return;
  }
  try {
    require('tsx/cjs');
  } catch {
    console.error(
      `${name}: not built and tsx is not installed; run \`npm run build\` (or \`npm ci\` for a development checkout)`,
    );
    process.exit(3);
  }
  require(join(__dirname, '..', 'cli', `${entry}.ts`));
};
