/**
 * hack/check-image-serving.sh against a real root filesystem laid out as the images are
 * (hack/lib/image-root.ts), with the planes' real bundles (hack/build-bundles.ts), under a
 * real `chroot --userspec=65532:65532`: the bundled state plane and harness get ready and
 * stop cleanly, and each thing the check must catch (a missing LevelDB binding, a plane that
 * never gets ready, fails its shutdown or writes no database) fails it, naming it.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from '@jest/globals';
import { spawnSync } from 'node:child_process';
import { chmodSync, cpSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { buildPlane, PLANES, type Arch, type Plane } from './build-bundles';
import { makeImageRoot } from './lib/image-root';
import { repoRoot } from './lib/paths';

const script = join(repoRoot, 'hack', 'check-image-serving.sh');
const arch: Arch = process.arch === 'arm64' ? 'arm64' : 'x64';
const plane = (name: Plane['name']): Plane => PLANES.find((p) => p.name === name) as Plane;

let work: string;
let rootfs: string;

/** Runs the check on the root with the image config crane would report for `dir`'s main. */
function check(name: 'state' | 'harness'): { status: number | null; out: string } {
  const config = join(work, 'config.json');
  writeFileSync(
    config,
    JSON.stringify({
      config: {
        // This machine's node stands for Node 22, so no Node 22-only flag.
        Entrypoint: ['/nodejs/bin/node', `/app/dist/${name}/main.js`],
        Env: ['NODE_ENV=production'],
      },
    }),
  );
  const run = spawnSync('bash', [script, rootfs, config, name], {
    encoding: 'utf8',
    env: { ...process.env, IMAGE_EMULATOR: '' },
  });
  return { status: run.status, out: run.stdout + run.stderr };
}

/** Replaces the state plane's main with `source` (plain JavaScript). */
function stateMain(source: string): void {
  writeFileSync(join(rootfs, 'app', 'dist', 'state', 'main.js'), source, { mode: 0o644 });
}

/** A main that serves /readyz on STATE_HEALTH_PORT and exits `code` on SIGTERM. */
const readyThenExit = (code: number): string => `
const server = require('node:http')
  .createServer((req, res) => res.end('ready'))
  .listen(Number(process.env.STATE_HEALTH_PORT), '127.0.0.1');
process.on('SIGTERM', () => server.close(() => process.exit(${code})));
`;

const asRoot = process.getuid?.() === 0;
(asRoot ? describe : describe.skip)('hack/check-image-serving.sh (needs root for chroot)', () => {
  beforeAll(async () => {
    work = mkdtempSync(join(tmpdir(), 'polychrome-serving-'));
    chmodSync(work, 0o755);
    const dist = join(work, 'dist');
    await buildPlane(plane('state'), dist, arch);
    await buildPlane(plane('harness'), dist, arch);
    rootfs = join(work, 'rootfs');
    const binding = join(dist, 'state', 'prebuilds', `linux-${arch}`);
    const glibc = arch === 'x64' ? 'classic-level.node' : 'classic-level.armv8.node';
    makeImageRoot(rootfs, process.execPath, [join(binding, glibc)]);
    chmodSync(rootfs, 0o755);
  }, 120_000);

  afterAll(() => {
    rmSync(work, { recursive: true, force: true });
  });

  beforeEach(() => {
    for (const dir of ['app', 'smoke', 'smoke-data']) {
      rmSync(join(rootfs, dir), { recursive: true, force: true });
    }
    mkdirSync(join(rootfs, 'app', 'dist'), { recursive: true, mode: 0o755 });
    cpSync(join(work, 'dist', 'state'), join(rootfs, 'app', 'dist', 'state'), { recursive: true });
    cpSync(join(work, 'dist', 'harness'), join(rootfs, 'app', 'dist', 'harness'), {
      recursive: true,
    });
    mkdirSync(join(rootfs, 'app', 'harness', 'model'), { recursive: true, mode: 0o755 });
    cpSync(
      join(repoRoot, 'harness', 'model', 'demo-script.yaml'),
      join(rootfs, 'app', 'harness', 'model', 'demo-script.yaml'),
    );
  });

  it('passes the bundled state plane: ready, both LevelDB databases written, exit 0 on SIGTERM', () => {
    const run = check('state');
    expect(run.out).toContain('served: ready on /readyz, exit 0 on SIGTERM, both LevelDB');
    expect(run.status).toBe(0);
  }, 60_000);

  it('passes the bundled harness, with tracing exporters loaded from the bundle', () => {
    const run = check('harness');
    expect(run.out).toContain('served: ready on /readyz, exit 0 on SIGTERM');
    expect(run.status).toBe(0);
  }, 60_000);

  it('fails a state plane whose LevelDB binding is missing, showing why it did not start', () => {
    rmSync(join(rootfs, 'app', 'dist', 'state', 'prebuilds'), { recursive: true });
    const run = check('state');
    expect(run.out).toContain('the plane exited before it was ready');
    expect(run.out).toContain('No native build was found');
    expect(run.out).toContain('state: the entrypoint with a full configuration did not get ready');
    expect(run.status).toBe(1);
  }, 60_000);

  it('fails a plane that exits non-zero on SIGTERM', () => {
    stateMain(readyThenExit(3));
    const run = check('state');
    expect(run.out).toContain('state: the plane exited 3 on SIGTERM (expected 0)');
    expect(run.status).toBe(1);
  }, 60_000);

  it('fails a state plane that gets ready and stops without writing its databases', () => {
    stateMain(readyThenExit(0));
    const run = check('state');
    expect(run.out).toContain(
      'the journal LevelDB database was not created in /smoke-data/journal',
    );
    expect(run.status).toBe(1);
  }, 60_000);
});
