/**
 * esbuild's inject file for the CLI bundle (hack/build-cli.ts): what the sources take from
 * CommonJS and an ES module lacks. Code that reads `__dirname` or `__filename` gets the
 * folder the sources would be in, `cli/` in the bundle's folder, wherever esbuild put the
 * chunk that holds this code (the bundle's folder, or its `chunks/`).
 */
import { basename, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The URL of the file this code is in: the banner of each file defines it (hack/build-cli.ts). */
declare const __polychromeFileUrl: string;

const here = dirname(fileURLToPath(__polychromeFileUrl));
const bundleDir = basename(here) === 'chunks' ? dirname(here) : here;
const cliDir = join(bundleDir, 'cli');
const cliFile = join(cliDir, 'index.js');

export { cliDir as __dirname, cliFile as __filename };
