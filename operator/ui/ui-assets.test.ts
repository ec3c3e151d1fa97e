import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';

import { UiAssets } from './ui-assets';

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'ui-assets-'));
  await writeFile(join(dir, 'index.html'), '<!doctype html><script src="app.js"></script>');
  await writeFile(join(dir, 'app.js'), 'console.log(1)');
  await writeFile(join(dir, 'secret.key'), 'not a UI file');
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('UiAssets', () => {
  it('serves its own files with a strict CSP, nosniff and an ETag, and 304 on a match', async () => {
    const ui = await UiAssets.load(dir);
    const page = ui.serve('index.html', undefined);
    expect(page.status).toBe(200);
    expect(page.body.toString()).toContain('<script src="app.js">');
    expect(page.headers['content-type']).toBe('text/html; charset=utf-8');
    expect(page.headers['content-security-policy']).toContain("default-src 'self'");
    expect(page.headers['content-security-policy']).not.toContain('unsafe-inline');
    expect(page.headers['x-content-type-options']).toBe('nosniff');
    expect(page.headers['cache-control']).toBe('private, no-cache');
    const etag = page.headers.etag!;
    expect(ui.serve('index.html', etag).status).toBe(304);
    expect(ui.serve('app.js', etag).status).toBe(200);
    expect(ui.serve('app.js', undefined).headers['content-type']).toMatch(/^text\/javascript/u);
  });

  it('serves nothing else: another file in the folder, a path, a missing file', async () => {
    const ui = await UiAssets.load(dir);
    for (const file of ['secret.key', '../index.html', 'nope.js', '']) {
      const answer = ui.serve(file, undefined);
      expect(answer.status).toBe(404);
      expect(answer.body.toString()).toContain('ui/index.html');
    }
  });

  it('without a bundle says how to build one', async () => {
    const ui = await UiAssets.load(join(dir, 'absent'));
    expect(ui.built).toBe(false);
    expect(ui.serve('index.html', undefined).body.toString()).toContain('npm run build');
  });
});
