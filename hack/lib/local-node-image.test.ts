import { describe, expect, it } from '@jest/globals';
import { spawnSync } from 'node:child_process';
import type { V1Container } from '@kubernetes/client-node';
import { waitingAfter } from './local-node-container';
import {
  chrootArgv,
  containedPath,
  imageArgv,
  imageEnv,
  pinnedImage,
  runAsOf,
  shellWord,
  type ChrootLaunch,
  type HostTools,
} from './local-node-image';
import { WaitingReason } from './local-node-pod';

const digest = `sha256:${'ab'.repeat(32)}`;
const container = (extra: Partial<V1Container> = {}): V1Container => ({ name: 'c', ...extra });
const passwd =
  'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532::/home/nonroot:/sbin/nologin\n';
const group = 'root:x:0:\nnonroot:x:65532:\nstaff:x:50:\n';

describe('pinnedImage', () => {
  it.each([
    `127.0.0.1:5000/polychrome/state@${digest}`,
    `ghcr.io/acme/polychrome/harness@${digest}`,
  ])('takes %s, with its digest', (ref) => {
    expect(pinnedImage(ref)).toEqual({ ok: true, image: { ref, digest } });
  });
  it.each([
    ['a tag', '127.0.0.1:5000/polychrome/state:0.1.0'],
    ['a tag and a digest', `127.0.0.1:5000/polychrome/state:0.1.0@${digest}`],
    ['no registry or repository', `state@${digest}`],
    ['a short digest', '127.0.0.1:5000/polychrome/state@sha256:abcd'],
    ['another algorithm', `127.0.0.1:5000/polychrome/state@sha512:${'ab'.repeat(64)}`],
  ])('refuses %s, saying what a pinned reference is', (_what, ref) => {
    const r = pinnedImage(ref);
    expect(r.ok).toBe(false);
    if (!r.ok)
      expect(r.message).toContain('pinned by digest (host[:port]/repository@sha256:<64 hex>)');
  });
});

describe('runAsOf', () => {
  const files = { passwd, group };
  it("runs as the image's numeric User and group", () => {
    expect(runAsOf(container(), undefined, { User: '65532:65532' }, files)).toEqual({
      ok: true,
      runAs: { uid: 65532, gid: 65532 },
    });
  });
  it("looks names up in the image's /etc/passwd and /etc/group, the user's primary group by default", () => {
    expect(runAsOf(container(), undefined, { User: 'nonroot' }, files)).toEqual({
      ok: true,
      runAs: { uid: 65532, gid: 65532 },
    });
    expect(runAsOf(container(), undefined, { User: 'nonroot:staff' }, files)).toEqual({
      ok: true,
      runAs: { uid: 65532, gid: 50 },
    });
  });
  it("lets the container's securityContext win over the pod's, and the pod's over the image", () => {
    const pod = { runAsUser: 1000, runAsGroup: 1001 };
    expect(runAsOf(container(), pod, { User: '65532:65532' }, files)).toEqual({
      ok: true,
      runAs: { uid: 1000, gid: 1001 },
    });
    const own = container({ securityContext: { runAsUser: 2000 } });
    expect(runAsOf(own, pod, { User: '65532:65532' }, files)).toEqual({
      ok: true,
      runAs: { uid: 2000, gid: 1001 },
    });
  });
  it('runs as root without a User, and refuses that under runAsNonRoot', () => {
    expect(runAsOf(container(), undefined, {}, files)).toEqual({
      ok: true,
      runAs: { uid: 0, gid: 0 },
    });
    expect(runAsOf(container(), { runAsNonRoot: true }, {}, files)).toEqual({
      ok: false,
      message: 'container has runAsNonRoot and image will run as root',
    });
    expect(runAsOf(container(), { runAsNonRoot: true }, { User: 'nonroot' }, files).ok).toBe(true);
  });
  it('names a user or group the image does not have', () => {
    expect(runAsOf(container(), undefined, { User: 'ghost' }, files)).toEqual({
      ok: false,
      message: `image user "ghost" is not in the image's /etc/passwd`,
    });
    expect(runAsOf(container(), undefined, { User: '1:ghosts' }, files)).toEqual({
      ok: false,
      message: `image group "ghosts" is not in the image's /etc/group`,
    });
  });
});

describe('imageArgv and imageEnv', () => {
  const config = { Entrypoint: ['/nodejs/bin/node', 'main.js'], Cmd: ['--serve'] };
  it.each([
    ['neither: Entrypoint and Cmd', {}, ['/nodejs/bin/node', 'main.js', '--serve']],
    ['args replace Cmd', { args: ['--once'] }, ['/nodejs/bin/node', 'main.js', '--once']],
    ['command drops Cmd', { command: ['/bin/x'] }, ['/bin/x']],
    ['command and args', { command: ['/bin/x'], args: ['y'] }, ['/bin/x', 'y']],
  ])('%s', (_what, extra, argv) => {
    expect(imageArgv(container(extra), config)).toEqual(argv);
  });
  it("puts the pod's variables over the image's Env", () => {
    expect(
      imageEnv({ Env: ['NODE_ENV=production', 'A=b=c', 'PATH=/nodejs/bin'] }, { A: 'pod' }),
    ).toEqual({
      NODE_ENV: 'production',
      A: 'pod',
      PATH: '/nodejs/bin',
    });
  });
});

describe('waitingAfter', () => {
  const pull = { reason: WaitingReason.ErrImagePull, message: 'crane: not found' };
  it('is ErrImagePull on the first failed pull, ImagePullBackOff on the next, with the image', () => {
    const creating = { kind: 'waiting', reason: WaitingReason.ContainerCreating } as const;
    const first = waitingAfter(creating, pull, 'r/i@sha256:1');
    expect(first).toEqual({ kind: 'waiting', ...pull });
    const second = waitingAfter(first, pull, 'r/i@sha256:1');
    expect(second).toEqual({
      kind: 'waiting',
      reason: WaitingReason.ImagePullBackOff,
      message: 'Back-off pulling image "r/i@sha256:1": crane: not found',
    });
    expect(waitingAfter(second, pull, 'r/i@sha256:1')).toEqual(second);
  });
  it('keeps any other reason as it is', () => {
    const config = { reason: WaitingReason.CreateContainerConfigError, message: 'bad' };
    const after = waitingAfter({ kind: 'waiting', ...pull }, config, 'i');
    expect(after).toEqual({ kind: 'waiting', ...config });
  });
});

describe('chrootArgv', () => {
  const tools: HostTools = { sh: '/bin/sh', unshare: '/u', mount: '/m', mkdir: '/mk', touch: '/t' };
  const launch: ChrootLaunch = {
    lower: '/cache/img/rootfs',
    upper: '/pod/c/upper',
    work: '/pod/c/work',
    root: '/pod/c/root',
    mounts: [
      { mountPath: '/etc/tls', hostPath: "/pod/volumes/it's tls", readOnly: true },
      { mountPath: '/var/lib/data', hostPath: '/pv/data', readOnly: false },
      { mountPath: '/etc/app.yaml', hostPath: '/pod/volumes/cfg/app.yaml', readOnly: true },
    ],
    files: [{ path: '/etc/hosts', hostPath: '/pod/hosts', directory: false }],
    fileMounts: new Set(['/etc/app.yaml']),
    readOnlyRoot: true,
    workingDir: '/app',
    runAs: { uid: 65532, gid: 65533 },
    argv: ['/nodejs/bin/node', 'main.js', "it's"],
  };
  const [unshare, ...rest] = chrootArgv(launch, tools);
  const script = rest[rest.length - 1] ?? '';
  const lines = script.split('\n');

  it('runs a shell in a private mount namespace of its own', () => {
    expect([unshare, ...rest.slice(0, -1)]).toEqual([
      '/u',
      '--mount',
      '--propagation',
      'private',
      '--',
      '/bin/sh',
      '-c',
    ]);
    expect(lines[0]).toBe('set -eu');
  });
  it('mounts the overlay first, then binds, remounting read-only exactly the read-only ones and the root last', () => {
    expect(lines[1]).toBe(
      "'/m' -t overlay overlay -o 'lowerdir=/cache/img/rootfs,upperdir=/pod/c/upper,workdir=/pod/c/work' '/pod/c/root'",
    );
    const readOnly = lines
      .filter((l) => l.includes('remount,bind,ro'))
      .map((l) => l.split(' ').pop());
    expect(readOnly).toEqual([
      "'/pod/c/root/etc/hosts'",
      "'/pod/c/root/etc/tls'",
      "'/pod/c/root/etc/app.yaml'",
      "'/pod/c/root'",
    ]);
    expect(lines).toContain(`'/m' --bind '/pv/data' '/pod/c/root/var/lib/data'`);
    expect(lines).toContain(`'/mk' -p '/pod/c/root/etc' && '/t' '/pod/c/root/etc/app.yaml'`);
    expect(lines).toContain(`'/mk' -p '/pod/c/root/etc/tls'`);
  });
  it('execs into the root as the user, in the working directory, the argv quoted as it is', () => {
    expect(lines[lines.length - 1]).toBe(
      `exec '/u' --root='/pod/c/root' --wd='/app' --setgid=65533 --setuid=65532 -- '/nodejs/bin/node' 'main.js' 'it'\\''s'`,
    );
  });
});

describe('shellWord', () => {
  it.each(['plain', "it's", '$(touch /x) `y` "z" \\ \n *'])(
    '%j reaches a real sh as it is',
    (word) => {
      const r = spawnSync('/bin/sh', ['-c', `printf %s ${shellWord(word)}`], { encoding: 'utf8' });
      expect(r.stdout).toBe(word);
    },
  );
});

describe('containedPath', () => {
  const links = (table: Record<string, string>) => (path: string) => table[path];
  it('follows a relative link from its directory, never above the root', () => {
    const escape = links({ '/etc/hosts': '../../../../../tmp/evil' });
    expect(containedPath('/etc/hosts', escape)).toBe('/tmp/evil');
  });
  it('follows an absolute link from the root', () => {
    expect(containedPath('/etc/tls/ca.crt', links({ '/etc': '/host/etc' }))).toBe(
      '/host/etc/tls/ca.crt',
    );
  });
  it('keeps `..` in the path itself at the root', () => {
    expect(containedPath('/data/../../../x', links({}))).toBe('/x');
    expect(containedPath('relative/./y', links({}))).toBe('/relative/y');
  });
  it('follows chains, and refuses a loop as ELOOP does', () => {
    expect(containedPath('/a/f', links({ '/a': 'b', '/b': '/c/d' }))).toBe('/c/d/f');
    expect(() => containedPath('/a/f', links({ '/a': '/b', '/b': '/a' }))).toThrow(
      'too many levels of symbolic links resolving /a/f',
    );
  });
});
