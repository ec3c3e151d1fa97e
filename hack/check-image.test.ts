/**
 * hack/check-image.sh against a real root filesystem: this machine's node and the shared
 * libraries it loads, laid out as the images are (/nodejs/bin/node, /app/dist/...), run
 * under a real `chroot --userspec=65532:65532`. Each case plants what an image must not
 * have, or breaks what it must, and expects the check to fail naming it.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from '@jest/globals';
import { spawnSync } from 'node:child_process';
import {
  chmodSync,
  chownSync,
  mkdirSync,
  mkdtempSync,
  rmSync,
  truncateSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { makeImageRoot } from './lib/image-root';
import { repoRoot } from './lib/paths';

const script = join(repoRoot, 'hack', 'check-image.sh');
const configError = 'control plane configuration has 1 problem: POLYCHROME_STATE_ADDRESS';

/**
 * The entrypoint of the Dockerfile the tests check against. A node flag that both Node 20
 * and Node 22 accept stands for the images' own (--experimental-async-context-frame, which
 * Node 20 refuses), so the case runs on either.
 */
const entrypoint = ['/nodejs/bin/node', '--no-deprecation', '/app/dist/operator/main.js'];

/** The image config crane would report for an image built by hack/build-images.sh. */
function imageConfig(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    os: 'linux',
    architecture: 'amd64',
    config: {
      User: '65532:65532',
      WorkingDir: '/app',
      Entrypoint: entrypoint,
      Env: ['NODE_ENV=production'],
      Labels: Object.fromEntries(
        ['title', 'version', 'revision', 'created', 'source'].map((l) => [
          `org.opencontainers.image.${l}`,
          'x',
        ]),
      ),
      ...overrides,
    },
  };
}

let work: string;
let rootfs: string;
let configFile: string;
let dockerfile: string;

/** Writes `text` at `path` inside the root, root-owned, mode `mode`. */
function put(path: string, text: string, mode = 0o644): string {
  const full = join(rootfs, path);
  mkdirSync(dirname(full), { recursive: true, mode: 0o755 });
  writeFileSync(full, text, { mode });
  chmodSync(full, mode);
  return full;
}

/** A main that fails like the control plane's with no configuration, or exits `code`. */
function putMain(code = 1): void {
  put(
    'app/dist/operator/main.js',
    code === 0
      ? 'process.exit(0);\n'
      : `console.error(${JSON.stringify(configError)});\nprocess.exit(${code});\n`,
  );
}

/** Writes the Dockerfile the check reads, its exec-form ENTRYPOINT `argv`. */
function putDockerfile(argv: readonly string[] = entrypoint): void {
  writeFileSync(dockerfile, `FROM scratch\nUSER 65532:65532\nENTRYPOINT ${JSON.stringify(argv)}\n`);
}

function check(
  config: Record<string, unknown> = imageConfig(),
  canary?: string,
  env: Readonly<Record<string, string>> = {},
): { status: number | null; stdout: string; stderr: string } {
  writeFileSync(configFile, JSON.stringify(config));
  const args = [
    script,
    rootfs,
    configFile,
    dockerfile,
    'operator',
    '1',
    'POLYCHROME_STATE_ADDRESS',
  ];
  const run = spawnSync('bash', canary === undefined ? args : [...args, canary], {
    encoding: 'utf8',
    env: { ...process.env, IMAGE_MAX_MB: '', IMAGE_ARCH: '', IMAGE_EMULATOR: '', ...env },
  });
  return { status: run.status, stdout: run.stdout, stderr: run.stderr };
}

// chroot needs root; CI runs as root. Elsewhere the suite says why it did not run.
const asRoot = process.getuid?.() === 0;
(asRoot ? describe : describe.skip)('hack/check-image.sh (needs root for chroot)', () => {
  beforeAll(() => {
    work = mkdtempSync(join(tmpdir(), 'polychrome-check-image-'));
    chmodSync(work, 0o755);
    configFile = join(work, 'config.json');
    dockerfile = join(work, 'Dockerfile');
    rootfs = join(work, 'rootfs');
    makeImageRoot(rootfs);
  }, 60_000);

  afterAll(() => {
    rmSync(work, { recursive: true, force: true });
  });

  beforeEach(() => {
    rmSync(join(rootfs, 'app'), { recursive: true, force: true });
    putMain();
    putDockerfile();
  });

  it('passes an image where uid 65532 can write nothing and the entrypoint fails on config', () => {
    const run = check();
    expect(run.stderr).toBe('');
    expect(run.stdout).toMatch(/\d+ paths, none writable by uid 65532/u);
    expect(run.stdout).toMatch(/images: {3}\d+\.\d MB unpacked \(limit 150 MB\)/u);
    expect(run.stdout).toContain(`entrypoint exits 1: ${configError}`);
    expect(run.status).toBe(0);
  });

  it('fails an image over 150 MB unpacked, naming its size, the limit and the largest paths', () => {
    // Sparse: 160 MB as du -sb counts it (apparent size), no disk used.
    const blob = put('app/dist/operator/blob.bin', '');
    truncateSync(blob, 160_000_000);
    const run = check();
    expect(run.status).toBe(1);
    expect(run.stderr).toMatch(/the image is \d+\.\d MB unpacked, over the 150 MB limit/u);
    expect(run.stderr).toContain('160.0 MB /app/dist/operator/blob.bin');
  });

  it('takes the limit from IMAGE_MAX_MB, and refuses one that is not a whole number', () => {
    const under = check(imageConfig(), undefined, { IMAGE_MAX_MB: '1' });
    expect(under.status).toBe(1);
    expect(under.stderr).toContain('over the 1 MB limit (IMAGE_MAX_MB)');
    const bad = check(imageConfig(), undefined, { IMAGE_MAX_MB: '1e3' });
    expect(bad.status).toBe(1);
    expect(bad.stderr).toContain("IMAGE_MAX_MB must be a whole number of megabytes, got '1e3'");
  });

  it('fails on a world-writable file', () => {
    put('app/dist/operator/extra.js', '', 0o666);
    const run = check();
    expect(run.status).toBe(1);
    expect(run.stderr).toContain('writable by uid 65532: /app/dist/operator/extra.js');
  });

  it('fails on a file the runtime user owns, even at mode 0644', () => {
    chownSync(put('app/dist/operator/owned.js', ''), 65532, 65532);
    const run = check();
    expect(run.status).toBe(1);
    expect(run.stderr).toContain('writable by uid 65532: /app/dist/operator/owned.js');
  });

  it('fails on a directory writable by the runtime group', () => {
    const dir = join(rootfs, 'app', 'cache');
    mkdirSync(dir, { mode: 0o775 });
    chmodSync(dir, 0o775);
    chownSync(dir, 0, 65532);
    const run = check();
    expect(run.status).toBe(1);
    expect(run.stderr).toContain('writable by uid 65532: /app/cache');
  });

  it.each(['app/.local/dev/token', 'app/tls.key', 'app/signing-key', 'app/.env'])(
    'fails on key material or local state by name: %s',
    (path) => {
      put(path, 'x');
      const run = check();
      expect(run.status).toBe(1);
      expect(run.stderr).toContain('look like keys or local state');
      expect(run.stderr).toContain(`/${path.startsWith('app/.local') ? 'app/.local' : path}`);
    },
  );

  it('fails on a PEM private key hidden in a file of any name', () => {
    put(
      'app/dist/operator/settings.js',
      `module.exports = \`-----BEGIN PRIVATE KEY-----\n${'A'.repeat(64)}\n-----END PRIVATE KEY-----\`;\n`,
    );
    const run = check();
    expect(run.status).toBe(1);
    expect(run.stderr).toContain('holds private keys: /app/dist/operator/settings.js');
  });

  it('passes code that only names the PEM header (a parser), not a key', () => {
    put('app/dist/operator/pem.js', "const header = '-----BEGIN PRIVATE KEY-----';\n");
    expect(check().status).toBe(0);
  });

  it('fails when the canary placed in .local/ is anywhere in the image', () => {
    put('app/dist/operator/data.js', 'const x = "c4n4ry0123456789";\n');
    expect(check(imageConfig(), 'c4n4ry0123456789').stderr).toContain('canary');
    expect(check(imageConfig(), 'another-canary').status).toBe(0);
  });

  it('fails when the entrypoint exits 0 with no configuration', () => {
    putMain(0);
    const run = check();
    expect(run.status).toBe(1);
    expect(run.stderr).toContain('exited 0 (expected 1 with a config error');
  });

  it('runs the entrypoint the config declares, as 65532 with only its environment', () => {
    put(
      'app/dist/operator/main.js',
      'console.error(`POLYCHROME_STATE_ADDRESS uid=${process.getuid()} gid=${process.getgid()} ' +
        'env=${Object.keys(process.env).sort().join(",")}`); process.exit(1);\n',
    );
    const run = check();
    expect(run.status).toBe(0);
    expect(run.stdout).toContain('uid=65532 gid=65532 env=NODE_ENV');
  });

  it.each([
    ['User', { User: '0:0' }, 'User is "0:0"'],
    ['User', { User: 'nonroot' }, 'User is "nonroot"'],
    ['Cmd', { Cmd: ['--inspect'] }, 'Cmd is ["--inspect"]'],
    ['Entrypoint', { Entrypoint: ['node', 'dist/operator/main.js'] }, 'Entrypoint is'],
    // The Dockerfile's flag dropped: the image would not run as the Dockerfile says.
    [
      'Entrypoint',
      { Entrypoint: ['/nodejs/bin/node', '/app/dist/operator/main.js'] },
      'Entrypoint is ["/nodejs/bin/node","/app/dist/operator/main.js"], expected ' +
        '["/nodejs/bin/node","--no-deprecation","/app/dist/operator/main.js"]',
    ],
    ['WorkingDir', { WorkingDir: '/' }, 'WorkingDir is "/"'],
    ['Labels', { Labels: {} }, 'org.opencontainers.image labels is false'],
  ])('fails on an image config with the wrong %s: %j', (_field, overrides, message) => {
    const run = check(imageConfig(overrides));
    expect(run.status).toBe(1);
    expect(run.stderr).toContain(message);
  });

  it.each([
    ['another main', ['/nodejs/bin/node', '/app/dist/state/main.js']],
    ['a shell', ['/bin/sh', '-c', 'node /app/dist/operator/main.js']],
  ])('fails when the Dockerfile ENTRYPOINT runs %s, even if the image matches it', (_l, argv) => {
    putDockerfile(argv);
    const run = check(imageConfig({ Entrypoint: argv }));
    expect(run.status).toBe(1);
    expect(run.stderr).toContain('Dockerfile ENTRYPOINT runs node on the main is false');
  });

  it('fails when the Dockerfile has no exec-form ENTRYPOINT', () => {
    writeFileSync(dockerfile, 'FROM scratch\nENTRYPOINT node /app/dist/operator/main.js\n');
    const run = check();
    expect(run.status).toBe(1);
    expect(run.stderr).toContain(`${dockerfile} has no exec-form ENTRYPOINT`);
  });

  it('expects the architecture IMAGE_ARCH names (arm64 for the arm64 images)', () => {
    const run = check(imageConfig(), undefined, { IMAGE_ARCH: 'arm64' });
    expect(run.status).toBe(1);
    expect(run.stderr).toContain('architecture is "amd64", expected "arm64"');
  });

  it('fails on an image for another platform', () => {
    const run = check({ ...imageConfig(), architecture: 'arm64' });
    expect(run.status).toBe(1);
    expect(run.stderr).toContain('architecture is "arm64", expected "amd64"');
  });
});
