'use strict';
// What the launchers in bin/ share: run the bundle when the project was built (`make build`
// writes dist/bundle/, hack/build-cli.ts), otherwise the TypeScript source through tsx (a
// devDependency, so this fallback works in a development checkout only).
const { existsSync } = require('node:fs');
const { join } = require('node:path');
const { pathToFileURL } = require('node:url');

/** Runs dist/bundle/<entry>.mjs (or cli/<entry>.ts); `name` is the command, for the message. */
module.exports = function launch(entry, name) {
  const bundled = join(__dirname, '..', 'dist', 'bundle', `${entry}.mjs`);
  const failed = (what) => (error) => {
    console.error(`${name}: ${what}:`, error);
    process.exit(3);
  };
  if (existsSync(bundled)) {
    import(pathToFileURL(bundled).href).catch(failed(`cannot load ${bundled}`));
    return;
  }
  // tsx's loader hooks both require() and import(): the verbs' modules are imported when
  // they run (cli/kube-cli.ts).
  import('tsx')
    .then(
      () => require(join(__dirname, '..', 'cli', `${entry}.ts`)),
      () => {
        console.error(
          `${name}: not built and tsx is not installed; run \`make build\` (or \`npm ci\` for a development checkout)`,
        );
        process.exit(3);
      },
    )
    .catch(failed(`cannot load cli/${entry}.ts`));
};
