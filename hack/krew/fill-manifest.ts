import { createHash } from 'node:crypto';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { parseArgs } from 'node:util';

import { parse } from 'yaml';

/*
 * Fills the krew manifest (hack/krew/polychrome.yaml) for one release: the version, the
 * archive's URL and its sha256, computed from the archive itself. docs/kubectl.md,
 * "Install". Usage:
 *
 *   npx tsx hack/krew/fill-manifest.ts --version v0.1.0 --url URL --archive FILE [--out F]
 */

/** The template's placeholders, replaced at release. */
export const PLACEHOLDERS = ['RELEASE_VERSION', 'RELEASE_URL', 'RELEASE_SHA256'] as const;

/** krew's `Plugin` fields we rely on, checked as krew validates them. */
export function checkKrewManifest(text: string): string[] {
  const problems: string[] = [];
  const doc = parse(text) as {
    apiVersion?: unknown;
    kind?: unknown;
    metadata?: { name?: unknown };
    spec?: {
      version?: unknown;
      shortDescription?: unknown;
      platforms?: { uri?: unknown; sha256?: unknown; bin?: unknown; selector?: unknown }[];
    };
  };
  if (doc.apiVersion !== 'krew.googlecontainertools.github.com/v1alpha2') {
    problems.push('apiVersion must be krew.googlecontainertools.github.com/v1alpha2');
  }
  if (doc.kind !== 'Plugin') problems.push('kind must be Plugin');
  if (typeof doc.metadata?.name !== 'string' || !/^[a-z0-9-]+$/u.test(doc.metadata.name)) {
    problems.push('metadata.name must be lower-case letters, digits and "-"');
  }
  const spec = doc.spec ?? {};
  if (
    typeof spec.version !== 'string' ||
    !/^v\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$/u.test(spec.version)
  ) {
    problems.push('spec.version must be a semantic version with a leading v');
  }
  if (typeof spec.shortDescription !== 'string' || spec.shortDescription.length > 50) {
    problems.push('spec.shortDescription must be a string of at most 50 characters');
  }
  const platforms = spec.platforms ?? [];
  if (platforms.length === 0) problems.push('spec.platforms must not be empty');
  platforms.forEach((p, i) => {
    if (typeof p.uri !== 'string' || !/^https:\/\//u.test(p.uri)) {
      problems.push(`spec.platforms[${i}].uri must be an https URL`);
    }
    if (typeof p.sha256 !== 'string' || !/^[0-9a-f]{64}$/u.test(p.sha256)) {
      problems.push(`spec.platforms[${i}].sha256 must be 64 lower-case hex digits`);
    }
    if (typeof p.bin !== 'string' || p.bin === '')
      problems.push(`spec.platforms[${i}].bin is required`);
    if (typeof p.selector !== 'object' || p.selector === null) {
      problems.push(`spec.platforms[${i}].selector is required`);
    }
  });
  return problems;
}

/** The template with the release's values in place of the placeholders. */
export function fillManifest(
  template: string,
  release: { version: string; url: string; sha256: string },
): string {
  return template
    .replaceAll('RELEASE_VERSION', release.version)
    .replaceAll('RELEASE_URL', release.url)
    .replaceAll('RELEASE_SHA256', release.sha256);
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      version: { type: 'string' },
      url: { type: 'string' },
      archive: { type: 'string' },
      out: { type: 'string' },
    },
  });
  if (values.version === undefined || values.url === undefined || values.archive === undefined) {
    throw new Error('usage: fill-manifest.ts --version vX.Y.Z --url URL --archive FILE [--out F]');
  }
  const sha256 = createHash('sha256')
    .update(await readFile(values.archive))
    .digest('hex');
  const template = await readFile(join(__dirname, 'polychrome.yaml'), 'utf8');
  const filled = fillManifest(template, { version: values.version, url: values.url, sha256 });
  const problems = checkKrewManifest(filled);
  if (problems.length > 0)
    throw new Error(`the filled manifest is not valid: ${problems.join('; ')}`);
  if (values.out === undefined) process.stdout.write(filled);
  else await writeFile(values.out, filled);
}

if (require.main === module) {
  main().catch((error: unknown) => {
    console.error(error instanceof Error ? error.message : String(error));
    process.exitCode = 1;
  });
}
