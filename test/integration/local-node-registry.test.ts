/**
 * The local node's registry mode (hack/lib/local-node-image*.ts) against a real registry
 * (`crane registry serve`) and a real image pushed there: a root laid out as the planes'
 * images are (this machine's node and its libraries, hack/lib/image-root.ts) with a small
 * server, its config's Entrypoint, Cmd, Env, WorkingDir and User set with `crane mutate`.
 * The pod runs that image by digest under chroot: as the image's user with the pod's
 * fsGroup, in its working directory, with the image's and the pod's variables, its Secret
 * and emptyDir bound in, the root read-only, its own /etc/hosts, listening on the pod's
 * address and resolving its Service by cluster DNS. An unpinned image and a digest the
 * registry does not have are ErrImagePull, then ImagePullBackOff, with the reason. An image
 * whose /etc/hosts links to a path of this machine gets the bind inside its own root, and a
 * process that may not make mount namespaces is told what the mode needs.
 * Needs root (chroot, mount), as the image checks do.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { CoreV1Api, type KubeConfig, type V1Pod } from '@kubernetes/client-node';
import { execFileSync, spawnSync } from 'node:child_process';
import {
  readdirSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readlinkSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { makeImageRoot } from '../../hack/lib/image-root';
import { LocalNode } from '../../hack/lib/local-node';
import { hostTools } from '../../hack/lib/local-node-image-launch';
import { CraneImageStore } from '../../hack/lib/local-node-image-store';
import { defaultBinDir, repoRoot } from '../../hack/lib/paths';
import { pollUntil } from '../../hack/lib/processes';
import { freshNamespace, kubeConfig } from './support/kube';
import { startRegistry, type LocalRegistry } from './support/registry';

const crane = join(defaultBinDir, 'crane');
const work = mkdtempSync(join(tmpdir(), 'polychrome-registry-node-'));
/** A directory of this machine the image's link points into. */
const escape = join(work, 'escape');

// Reports what the container sees; listens on every address (the pod's, by the runtime).
const serve = `
const fs = require('node:fs');
const dns = require('node:dns');
const tryWrite = (p) => { try { fs.writeFileSync(p, 'x'); return 'ok'; } catch (e) { return e.code; } };
require('node:http').createServer((req, res) => {
  dns.lookup('serve', { family: 4 }, (err, address) => {
    res.end(JSON.stringify({
      uid: process.getuid(), gid: process.getgid(), groups: process.getgroups(), cwd: process.cwd(),
      argv: process.argv.slice(1), greeting: process.env.GREETING, fromPod: process.env.FROM_POD,
      secret: fs.readFileSync('/etc/secret/token', 'utf8'), data: tryWrite('/data/out'),
      rootWrite: tryWrite('/app/out'), hosts: fs.readFileSync('/etc/hosts', 'utf8'),
      service: err ? err.code : address,
    }));
  });
}).listen(8080);
process.on('SIGTERM', () => process.exit(0));
`;

/** The image, pushed and configured: its reference pinned by digest. */
function pushImage(host: string): string {
  const root = join(work, 'rootfs');
  makeImageRoot(root);
  mkdirSync(join(root, 'app'), { mode: 0o755 });
  writeFileSync(join(root, 'app', 'serve.js'), serve, { mode: 0o644 });
  mkdirSync(join(root, 'etc'), { recursive: true, mode: 0o755 });
  writeFileSync(
    join(root, 'etc', 'passwd'),
    'root:x:0:0::/root:/sbin/nologin\nnonroot:x:65532:65532::/home/nonroot:/sbin/nologin\n',
  );
  writeFileSync(join(root, 'etc', 'group'), 'root:x:0:\nnonroot:x:65532:\n');
  // The attacker's image: its /etc/hosts is an absolute link, to a path of this machine
  // as seen from outside the root, where the node's bind of the pod's hosts file must not
  // land. (crane export drops a link whose `..` climbs out of the root.)
  mkdirSync(escape, { recursive: true });
  symlinkSync(join(escape, 'hosts'), join(root, 'etc', 'hosts'));
  const layer = join(work, 'layer.tar');
  execFileSync('tar', ['-cf', layer, '--numeric-owner', '--owner=0', '--group=0', '-C', root, '.']);
  const tag = `${host}/test/serve:1`;
  execFileSync(crane, ['append', '--oci-empty-base', '-f', layer, '-t', tag], { stdio: 'pipe' });
  const ref = execFileSync(
    crane,
    [
      'mutate',
      tag,
      '--set-platform',
      `linux/${process.arch === 'x64' ? 'amd64' : process.arch}`,
      '--entrypoint',
      '/nodejs/bin/node,serve.js',
      '--cmd',
      '--mode,image',
      '-e',
      'GREETING=from-image',
      '-e',
      'FROM_POD=image-default',
      '--workdir',
      '/app',
      '--user',
      'nonroot',
    ],
    { encoding: 'utf8', stdio: 'pipe' },
  ).trim();
  return ref.replace(/:1@/u, '@');
}

describe('local node, registry mode', () => {
  let registry: LocalRegistry;
  let kc: KubeConfig;
  let core: CoreV1Api;
  let ns: { name: string; dispose: () => Promise<void> };
  let node: LocalNode;
  let image: string;

  beforeAll(async () => {
    if (process.getuid?.() !== 0)
      throw new Error('the registry mode runs chroot and mount: run as root');
    registry = await startRegistry(work);
    image = pushImage(registry.host);
    kc = await kubeConfig();
    core = kc.makeApiClient(CoreV1Api);
    ns = await freshNamespace(kc, 'registry-node');
    node = new LocalNode({
      kubeConfig: kc,
      name: `registry-${ns.name}`,
      stateDir: join(work, 'node'),
      namespaces: [ns.name],
      clusterDns: true,
      backoff: { initialMs: 1000, maxMs: 2000 },
      registry: {
        puller: new CraneImageStore({ crane, cacheDir: join(work, 'node', 'images') }),
        tools: hostTools(),
      },
    });
    await node.start();
  }, 120_000);

  afterAll(async () => {
    await node?.close();
    await ns?.dispose();
    await registry?.stop();
    rmSync(work, { recursive: true, force: true });
  });

  const podOf = (name: string, ref: string, extra: Partial<V1Pod['spec']> = {}): V1Pod => ({
    metadata: { name, labels: { app: name } },
    spec: {
      securityContext: { fsGroup: 65532, runAsNonRoot: true },
      containers: [
        {
          name: 'c',
          image: ref,
          env: [{ name: 'FROM_POD', value: 'pod' }],
          ports: [{ containerPort: 8080 }],
          readinessProbe: { httpGet: { path: '/', port: 8080 }, periodSeconds: 1 },
          securityContext: { readOnlyRootFilesystem: true },
          volumeMounts: [
            { name: 'secret', mountPath: '/etc/secret' },
            { name: 'data', mountPath: '/data' },
          ],
        },
      ],
      volumes: [
        { name: 'secret', secret: { secretName: 'token', defaultMode: 0o440 } },
        { name: 'data', emptyDir: {} },
      ],
      ...extra,
    },
  });

  it('runs the pinned image as its config and the pod say, under chroot', async () => {
    await core.createNamespacedSecret({
      namespace: ns.name,
      body: { metadata: { name: 'token' }, stringData: { token: 'mounted secret' } },
    });
    await core.createNamespacedService({
      namespace: ns.name,
      body: {
        metadata: { name: 'serve' },
        spec: { selector: { app: 'serve' }, ports: [{ port: 8080 }] },
      },
    });
    await core.createNamespacedPod({ namespace: ns.name, body: podOf('serve', image) });
    const pod = await pollUntil(
      'the pod from the registry to be ready',
      async () => {
        const p = await core.readNamespacedPod({ namespace: ns.name, name: 'serve' });
        return p.status?.containerStatuses?.[0]?.ready === true ? p : undefined;
      },
      { timeoutMs: 60_000 },
    );
    const status = pod.status?.containerStatuses?.[0];
    expect(status?.imageID).toBe(image);
    const podIP = pod.status?.podIP ?? '';
    const seen = await pollUntil(
      'cluster DNS to name the pod',
      async () => {
        const body = (await (await fetch(`http://${podIP}:8080/`)).json()) as Record<
          string,
          unknown
        >;
        return body.service === podIP ? body : undefined;
      },
      { timeoutMs: 20_000 },
    );
    expect(seen).toEqual({
      uid: 65532,
      gid: 65532,
      groups: [65532],
      cwd: '/app',
      // The Entrypoint's relative script, found from the WorkingDir; the Cmd after it.
      argv: ['/app/serve.js', '--mode', 'image'],
      greeting: 'from-image',
      fromPod: 'pod',
      secret: 'mounted secret',
      data: 'ok',
      rootWrite: 'EROFS',
      hosts: expect.stringContaining(`${podIP}\tserve\n`),
      service: podIP,
    });
    // The image's link was followed inside its root: nothing was made on this machine.
    expect(readdirSync(escape)).toEqual([]);
    // The process the node started is the container's, rooted in the image.
    const pid = node.pidOf(pod.metadata?.uid ?? '', 'c') ?? 0;
    expect(readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0')).toContain('serve.js');
    expect(readlinkSync(`/proc/${pid}/root`)).toMatch(/containers\/c\/root$/u);
  }, 90_000);

  it('refuses to start without the right to make mount namespaces, saying what it needs', () => {
    // The same check as another user, who may not: the node's own start would throw this.
    const r = spawnSync(
      'setpriv',
      [
        '--reuid=65534',
        '--regid=65534',
        '--clear-groups',
        process.execPath,
        ...['--require', 'tsx/cjs', '-e'],
        `require(${JSON.stringify(join(repoRoot, 'hack', 'lib', 'local-node-image-launch.ts'))}).hostTools()`,
      ],
      { cwd: repoRoot, encoding: 'utf8' },
    );
    expect(r.status).not.toBe(0);
    expect(r.stderr).toContain(
      'cannot make one (it needs root with CAP_SYS_ADMIN): unshare: unshare failed: Operation not permitted',
    );
  }, 30_000);

  it.each([
    ['not pinned', (ref: string) => ref.replace(/@sha256:.*$/u, ':1'), 'pinned by digest'],
    [
      'a digest the registry lacks',
      (ref: string) => ref.replace(/@sha256:.*$/u, `@sha256:${'0'.repeat(64)}`),
      'failed to pull image',
    ],
  ])(
    'holds an image %s in ErrImagePull, then ImagePullBackOff, saying why',
    async (what, ref, why) => {
      const name = `bad-${what.length}`;
      await core.createNamespacedPod({ namespace: ns.name, body: podOf(name, ref(image)) });
      const seen = new Set<string>();
      await pollUntil(
        `${what} to back off`,
        async () => {
          const p = await core.readNamespacedPod({ namespace: ns.name, name });
          const waiting = p.status?.containerStatuses?.[0]?.state?.waiting;
          if (waiting?.reason !== undefined) {
            expect(waiting.message).toContain(why);
            seen.add(waiting.reason);
          }
          return seen.has('ImagePullBackOff') ? true : undefined;
        },
        { timeoutMs: 30_000, intervalMs: 50 },
      );
      expect([...seen].filter((r) => r !== 'ContainerCreating').sort()).toEqual(
        expect.arrayContaining(['ImagePullBackOff']),
      );
    },
    60_000,
  );
});
