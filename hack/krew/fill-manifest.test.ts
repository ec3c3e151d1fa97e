import { describe, expect, it } from '@jest/globals';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';

import { checkKrewManifest, fillManifest, PLACEHOLDERS } from './fill-manifest';

describe('the krew manifest', () => {
  const template = (): Promise<string> => readFile(join(__dirname, 'polychrome.yaml'), 'utf8');

  it('is marked as filled at release: the template holds every placeholder and is not valid as is', async () => {
    const text = await template();
    for (const placeholder of PLACEHOLDERS) expect(text).toContain(placeholder);
    expect(checkKrewManifest(text)).toEqual([
      'spec.version must be a semantic version with a leading v',
      'spec.platforms[0].uri must be an https URL',
      'spec.platforms[0].sha256 must be 64 lower-case hex digits',
    ]);
  });

  it('is a valid krew Plugin once filled, with the plugin and nothing left to fill', async () => {
    const filled = fillManifest(await template(), {
      version: 'v0.1.0',
      url: 'https://example.com/kubectl-polychrome-v0.1.0.tar.gz',
      sha256: 'a'.repeat(64),
    });
    expect(checkKrewManifest(filled)).toEqual([]);
    for (const placeholder of PLACEHOLDERS) expect(filled).not.toContain(placeholder);
    expect(filled).toContain('bin: kubectl-polychrome');
  });
});
