// The exec-form ENTRYPOINT of a Dockerfile (one line, a JSON array of strings), read by
// hack/build-images.sh (which sets it on the image) and hack/check-image.sh (which checks
// the image carries it): one parser, so the two cannot disagree on what a Dockerfile says.
// Plain CommonJS, as both run it with the machine's node and no loader.
//   node hack/dockerfile-entrypoint.js DOCKERFILE   prints the array as JSON
'use strict';
const { readFileSync } = require('node:fs');

/** The argv of `dockerfile`'s exec-form ENTRYPOINT; throws naming the file when it has none. */
function dockerfileEntrypoint(dockerfile) {
  const declared = /^ENTRYPOINT (\[.*\])$/mu.exec(readFileSync(dockerfile, 'utf8'));
  let argv;
  try {
    argv = JSON.parse(declared?.[1] ?? '');
  } catch {
    argv = undefined;
  }
  if (!Array.isArray(argv) || argv.length === 0 || argv.some((a) => typeof a !== 'string')) {
    throw new Error(`${dockerfile} has no exec-form ENTRYPOINT (one line, a JSON array)`);
  }
  return argv;
}

module.exports = { dockerfileEntrypoint };

if (require.main === module) {
  try {
    console.log(JSON.stringify(dockerfileEntrypoint(process.argv[2])));
  } catch (error) {
    console.error(`images: ${error.message}`);
    process.exit(1);
  }
}
