import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import type { V1Container, V1Volume } from '@kubernetes/client-node';
import {
  lstatSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  readlinkSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { PodFields } from './local-node-env';
import type { PodView } from './local-node-pod';
import {
  containerMounts,
  formatMap,
  invalidPath,
  planVolumes,
  podVolumes,
  PodVolumes,
  tokenKey,
  tokenRenewAtMs,
  volumeReferences,
  writeVolumeFiles,
  type ClaimState,
  type ObjectData,
  type PlanResult,
  type TokenRequestSpec,
  type VolumeApi,
  type VolumeFile,
  type VolumeHost,
  type VolumeSources,
} from './local-node-volumes';

const fields: PodFields = {
  name: 'web-0',
  namespace: 'team',
  uid: 'u-1',
  nodeName: 'polychrome-local',
  podIP: '127.0.1.7',
  hostIP: '127.0.0.1',
  labels: { app: 'web', tier: 'front' },
  annotations: { note: 'say "hi"' },
};

const bytes = (text: string): Buffer => Buffer.from(text, 'utf8');
const data = (entries: Record<string, string>): ObjectData =>
  Object.fromEntries(Object.entries(entries).map(([k, v]) => [k, bytes(v)]));

const sources = (over: Partial<VolumeSources> = {}): VolumeSources => ({
  secrets: new Map([['tls', data({ 'tls.crt': 'CERT', 'tls.key': 'KEY' })]]),
  configMaps: new Map([
    ['settings', { ...data({ level: 'debug' }), blob: Buffer.from([0, 1, 255]) }],
    ['kube-root-ca.crt', data({ 'ca.crt': 'ROOT CA' })],
  ]),
  claims: new Map(),
  tokens: new Map(),
  ...over,
});

/** The files of the only volume, as path → [text, mode]. */
function filesOf(result: PlanResult): Record<string, [string, number]> {
  if (!result.ok) throw new Error(`expected a plan, got: ${result.message}`);
  const plan = result.plans[0];
  if (plan?.kind !== 'files') throw new Error(`expected a files volume, got ${plan?.kind}`);
  return Object.fromEntries(
    plan.files.map((f) => [f.path, [Buffer.from(f.data).toString('utf8'), f.mode]]),
  );
}

const failure = (result: PlanResult): { reason: string; message: string } => {
  if (result.ok) throw new Error('expected the pod to wait');
  return { reason: result.reason, message: result.message };
};

describe('planVolumes', () => {
  it('writes every key of a Secret with defaultMode, or only its items with their modes', () => {
    expect(
      filesOf(planVolumes([{ name: 'tls', secret: { secretName: 'tls' } }], fields, sources())),
    ).toEqual({ 'tls.crt': ['CERT', 0o644], 'tls.key': ['KEY', 0o644] });
    expect(
      filesOf(
        planVolumes(
          [
            {
              name: 'tls',
              secret: {
                secretName: 'tls',
                defaultMode: 0o440,
                items: [
                  { key: 'tls.crt', path: 'certs/server.crt' },
                  { key: 'tls.key', path: 'server.key', mode: 0o400 },
                ],
              },
            },
          ],
          fields,
          sources(),
        ),
      ),
    ).toEqual({ 'certs/server.crt': ['CERT', 0o440], 'server.key': ['KEY', 0o400] });
  });

  it('holds the pod in ContainerCreating with the kubelet message when a Secret is missing', () => {
    const result = planVolumes(
      [{ name: 'creds', secret: { secretName: 'later' } }],
      fields,
      sources(),
    );
    expect(failure(result)).toEqual({
      reason: 'ContainerCreating',
      message: 'MountVolume.SetUp failed for volume "creds" : secret "later" not found',
    });
  });

  it('leaves an optional missing Secret empty and skips missing keys of optional items', () => {
    expect(
      filesOf(
        planVolumes(
          [{ name: 'creds', secret: { secretName: 'later', optional: true } }],
          fields,
          sources(),
        ),
      ),
    ).toEqual({});
    expect(
      filesOf(
        planVolumes(
          [
            {
              name: 'tls',
              secret: {
                secretName: 'tls',
                optional: true,
                items: [
                  { key: 'ca.crt', path: 'ca.crt' },
                  { key: 'tls.crt', path: 'tls.crt' },
                ],
              },
            },
          ],
          fields,
          sources(),
        ),
      ),
    ).toEqual({ 'tls.crt': ['CERT', 0o644] });
  });

  it('fails a missing item key of a Secret or ConfigMap that is not optional', () => {
    expect(
      failure(
        planVolumes(
          [{ name: 'tls', secret: { secretName: 'tls', items: [{ key: 'ca.crt', path: 'ca' }] } }],
          fields,
          sources(),
        ),
      ).message,
    ).toBe(
      'MountVolume.SetUp failed for volume "tls" : references non-existent secret key: ca.crt',
    );
    expect(
      failure(
        planVolumes(
          [{ name: 'cfg', configMap: { name: 'settings', items: [{ key: 'nope', path: 'x' }] } }],
          fields,
          sources(),
        ),
      ).message,
    ).toBe(
      'MountVolume.SetUp failed for volume "cfg" : configmap references non-existent config key: nope',
    );
  });

  it('writes a ConfigMap with data and binaryData, and names a missing one as the kubelet does', () => {
    const result = planVolumes(
      [{ name: 'cfg', configMap: { name: 'settings' } }],
      fields,
      sources(),
    );
    if (!result.ok || result.plans[0]?.kind !== 'files') throw new Error('expected files');
    const blob = result.plans[0].files.find((f) => f.path === 'blob');
    expect([...(blob?.data ?? [])]).toEqual([0, 1, 255]);
    expect(filesOf(result).level).toEqual(['debug', 0o644]);
    expect(
      failure(planVolumes([{ name: 'cfg', configMap: { name: 'absent' } }], fields, sources()))
        .message,
    ).toBe('MountVolume.SetUp failed for volume "cfg" : configmap "absent" not found');
  });

  it('writes downward API fields, labels and annotations in the kubelet format', () => {
    expect(
      filesOf(
        planVolumes(
          [
            {
              name: 'info',
              downwardAPI: {
                defaultMode: 0o600,
                items: [
                  { path: 'name', fieldRef: { fieldPath: 'metadata.name' } },
                  { path: 'ns', fieldRef: { fieldPath: 'metadata.namespace' } },
                  { path: 'uid', fieldRef: { fieldPath: 'metadata.uid' } },
                  { path: 'labels', fieldRef: { fieldPath: 'metadata.labels' }, mode: 0o444 },
                  { path: 'meta/annotations', fieldRef: { fieldPath: 'metadata.annotations' } },
                  { path: 'app', fieldRef: { fieldPath: "metadata.labels['app']" } },
                ],
              },
            },
          ],
          fields,
          sources(),
        ),
      ),
    ).toEqual({
      name: ['web-0', 0o600],
      ns: ['team', 0o600],
      uid: ['u-1', 0o600],
      labels: ['app="web"\ntier="front"', 0o444],
      'meta/annotations': ['note="say \\"hi\\""', 0o600],
      app: ['web', 0o600],
    });
    expect(formatMap({})).toBe('');
  });

  it('refuses downward API items it cannot fill', () => {
    expect(
      failure(
        planVolumes(
          [
            {
              name: 'info',
              downwardAPI: {
                items: [{ path: 'cpu', resourceFieldRef: { resource: 'limits.cpu' } }],
              },
            },
          ],
          fields,
          sources(),
        ),
      ).message,
    ).toContain('supports fieldRef only');
    expect(
      failure(
        planVolumes(
          [
            {
              name: 'info',
              downwardAPI: { items: [{ path: 'x', fieldRef: { fieldPath: 'spec.priority' } }] },
            },
          ],
          fields,
          sources(),
        ),
      ).message,
    ).toContain('does not support fieldPath "spec.priority"');
  });

  it('projects a token, ca.crt and the namespace as the ServiceAccount admission plugin asks', () => {
    const volume: V1Volume = {
      name: 'kube-api-access-x1',
      projected: {
        defaultMode: 0o644,
        sources: [
          { serviceAccountToken: { path: 'token', expirationSeconds: 3607 } },
          { configMap: { name: 'kube-root-ca.crt', items: [{ key: 'ca.crt', path: 'ca.crt' }] } },
          {
            downwardAPI: {
              items: [{ path: 'namespace', fieldRef: { fieldPath: 'metadata.namespace' } }],
            },
          },
        ],
      },
    };
    const refs = volumeReferences([volume], 'robot');
    expect(refs.tokens).toEqual([
      {
        key: tokenKey('kube-api-access-x1', 0),
        serviceAccountName: 'robot',
        audience: undefined,
        expirationSeconds: 3607,
      },
    ]);
    expect([...refs.configMaps]).toEqual(['kube-root-ca.crt']);
    const tokens = new Map([[tokenKey('kube-api-access-x1', 0), 'eyJ.token']]);
    expect(filesOf(planVolumes([volume], fields, sources({ tokens })))).toEqual({
      token: ['eyJ.token', 0o644],
      'ca.crt': ['ROOT CA', 0o644],
      namespace: ['team', 0o644],
    });
    expect(failure(planVolumes([volume], fields, sources())).message).toContain(
      'no token was requested',
    );
  });

  it('defaults a token source to 3600 s and keeps its audience', () => {
    const refs = volumeReferences(
      [
        {
          name: 'tok',
          projected: { sources: [{}, { serviceAccountToken: { path: 't', audience: 'vault' } }] },
        },
      ],
      'default',
    );
    expect(refs.tokens).toEqual([
      { key: 'tok/1', serviceAccountName: 'default', audience: 'vault', expirationSeconds: 3600 },
    ]);
  });

  it('refuses projected sources and volume types the node does not support', () => {
    expect(
      failure(
        planVolumes(
          [
            {
              name: 'bundle',
              projected: { sources: [{ clusterTrustBundle: { path: 'b', signerName: 'x' } }] },
            },
          ],
          fields,
          sources(),
        ),
      ).message,
    ).toContain('does not support projected source clusterTrustBundle (volume bundle)');
    expect(
      failure(
        planVolumes([{ name: 'share', nfs: { server: 'nas', path: '/x' } }], fields, sources()),
      ),
    ).toEqual({
      reason: 'ContainerCreating',
      message: 'the local node does not support volume type nfs (volume share)',
    });
    expect(
      failure(planVolumes([{ name: 'host', hostPath: { path: '/etc' } }], fields, sources()))
        .message,
    ).toBe('the local node does not support volume type hostPath (volume host)');
  });

  it('makes an emptyDir a directory of its own', () => {
    const result = planVolumes(
      [
        { name: 'tmp', emptyDir: {} },
        { name: 'mem', emptyDir: { medium: 'Memory' } },
      ],
      fields,
      sources(),
    );
    expect(result).toEqual({
      ok: true,
      plans: [
        { name: 'tmp', kind: 'emptyDir' },
        { name: 'mem', kind: 'emptyDir' },
      ],
    });
  });

  it('uses a bound claim’s PersistentVolume path and waits, naming the claim, otherwise', () => {
    const volume: V1Volume = {
      name: 'journal',
      persistentVolumeClaim: { claimName: 'journal-0', readOnly: true },
    };
    const withClaim = (state: ClaimState): PlanResult =>
      planVolumes([volume], fields, sources({ claims: new Map([['journal-0', state]]) }));
    expect(withClaim({ kind: 'bound', volumeName: 'pv-1', path: '/data/pv-1' })).toEqual({
      ok: true,
      plans: [
        {
          name: 'journal',
          kind: 'claim',
          claimName: 'journal-0',
          path: '/data/pv-1',
          readOnly: true,
        },
      ],
    });
    expect(failure(withClaim({ kind: 'unbound', phase: 'Pending' }))).toEqual({
      reason: 'ContainerCreating',
      message:
        'persistentvolumeclaim "journal-0" is not bound yet (phase Pending) (volume journal)',
    });
    expect(failure(planVolumes([volume], fields, sources())).message).toBe(
      'persistentvolumeclaim "journal-0" not found (volume journal)',
    );
    expect(failure(withClaim({ kind: 'volume-absent', volumeName: 'pv-1' })).message).toContain(
      'persistentvolume "pv-1", which does not exist',
    );
    expect(
      failure(withClaim({ kind: 'bound', volumeName: 'pv-1', path: undefined })).message,
    ).toContain('neither hostPath nor local');
    expect([...volumeReferences([volume], 'default').claims]).toEqual(['journal-0']);
  });

  it('refuses item paths that would leave the volume directory', () => {
    for (const path of [
      '../escape',
      '/etc/passwd',
      'a/../../b',
      '..data/x',
      './..data',
      '.',
      './',
    ]) {
      expect(
        failure(
          planVolumes(
            [{ name: 'tls', secret: { secretName: 'tls', items: [{ key: 'tls.crt', path }] } }],
            fields,
            sources(),
          ),
        ).message,
      ).toContain(`invalid path "${path}"`);
    }
    expect(invalidPath('a/b.txt')).toBeUndefined();
  });

  it('writes a `./`-prefixed item path as the kubelet cleans it, inside the volume', () => {
    const planned = planVolumes(
      [
        {
          name: 'tls',
          secret: { secretName: 'tls', items: [{ key: 'tls.crt', path: './certs//a.crt' }] },
        },
      ],
      fields,
      sources(),
    );
    expect(planned.ok && planned.plans[0]).toMatchObject({
      kind: 'files',
      files: [{ path: 'certs/a.crt' }],
    });
  });

  it('stops at the first volume that cannot be set up', () => {
    const result = planVolumes(
      [
        { name: 'tmp', emptyDir: {} },
        { name: 'creds', secret: { secretName: 'later' } },
        { name: 'share', nfs: { server: 'nas', path: '/x' } },
      ],
      fields,
      sources(),
    );
    expect(failure(result).message).toContain('volume "creds"');
  });
});

describe('podVolumes', () => {
  it('reads spec.volumes from the pod as the API server sent it', () => {
    const pod = {
      metadata: { name: 'p', namespace: 'n', uid: 'u' },
      spec: {
        containers: [{ name: 'main' }],
        volumes: [{ name: 'tmp', emptyDir: {} }, { emptyDir: {} }, 'junk'],
      },
    };
    expect(podVolumes(pod)).toEqual([{ name: 'tmp', emptyDir: {} }]);
    expect(podVolumes({ ...pod, spec: { containers: [] } })).toEqual([]);
  });
});

describe('containerMounts', () => {
  const hosts = new Map<string, VolumeHost>([
    ['tls', { path: '/pod/volumes/tls', kind: 'files', readOnly: true }],
    ['tmp', { path: '/pod/volumes/tmp', kind: 'emptyDir', readOnly: false }],
    ['journal', { path: '/data/pv-1', kind: 'claim', readOnly: false }],
  ]);
  const container = (volumeMounts: V1Container['volumeMounts']): V1Container => ({
    name: 'main',
    volumeMounts,
  });

  it('maps every mount to its host path, subPath included; secrets are always read-only', () => {
    expect(
      containerMounts(
        container([
          { name: 'tls', mountPath: '/etc/tls' },
          { name: 'tls', mountPath: '/etc/server.crt', subPath: 'tls.crt' },
          { name: 'tmp', mountPath: '/tmp' },
          { name: 'journal', mountPath: '/var/lib/app', subPath: 'app/data', readOnly: true },
        ]),
        hosts,
      ),
    ).toEqual({
      ok: true,
      mounts: [
        { mountPath: '/etc/tls', hostPath: '/pod/volumes/tls', readOnly: true },
        { mountPath: '/etc/server.crt', hostPath: '/pod/volumes/tls/tls.crt', readOnly: true },
        { mountPath: '/tmp', hostPath: '/pod/volumes/tmp', readOnly: false },
        { mountPath: '/var/lib/app', hostPath: '/data/pv-1/app/data', readOnly: true },
      ],
      // A subPath of a directory volume is made if missing; one of a Secret is its file.
      createDirs: ['/data/pv-1/app/data'],
    });
    expect(containerMounts(container(undefined), hosts)).toEqual({
      ok: true,
      mounts: [],
      createDirs: [],
    });
  });

  it('names a mount of an unknown volume as the kubelet does', () => {
    expect(containerMounts(container([{ name: 'nope', mountPath: '/x' }]), hosts)).toEqual({
      ok: false,
      message: 'cannot find volume "nope" to mount into container "main"',
    });
  });

  it('refuses a subPath leaving the volume, and subPathExpr', () => {
    const bad = containerMounts(
      container([{ name: 'tmp', mountPath: '/x', subPath: '../../etc' }]),
      hosts,
    );
    expect(bad.ok ? '' : bad.message).toContain(`subPath "../../etc" must not contain '..'`);
    const expr = containerMounts(
      container([{ name: 'tmp', mountPath: '/x', subPathExpr: '$(POD_NAME)' }]),
      hosts,
    );
    expect(expr.ok ? '' : expr.message).toContain('does not support subPathExpr');
  });
});

describe('tokenRenewAtMs', () => {
  it('renews after 80% of the lifetime asked for, at most a day after issue', () => {
    const issued = 1_000_000;
    expect(tokenRenewAtMs(issued, issued + 3600_000, 3600)).toBe(issued + 2880_000);
    // The API server extends 3607 s tokens to a year: renew as if it had not.
    expect(tokenRenewAtMs(issued, issued + 365 * 86400_000, 3607)).toBe(issued + 2885_600);
    // A shorter token than asked (the server's maximum): 80% of what it gave.
    expect(tokenRenewAtMs(issued, issued + 600_000, 3600)).toBe(issued + 480_000);
    expect(tokenRenewAtMs(issued, issued + 7 * 86400_000, 7 * 86400)).toBe(
      issued + 0.8 * 86400_000,
    );
  });
});

describe('writeVolumeFiles', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'local-node-volumes-'));
  });
  afterEach(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  const file = (path: string, text: string, mode = 0o644): VolumeFile => ({
    path,
    data: bytes(text),
    mode,
  });

  it('writes the files with their modes behind ..data, and swaps the whole set', () => {
    const vol = join(dir, 'tls');
    expect(writeVolumeFiles(vol, [file('tls.crt', 'A', 0o440), file('sub/key', 'K', 0o400)])).toBe(
      true,
    );
    expect(readFileSync(join(vol, 'tls.crt'), 'utf8')).toBe('A');
    expect(readFileSync(join(vol, 'sub', 'key'), 'utf8')).toBe('K');
    expect(statSync(join(vol, 'tls.crt')).mode & 0o777).toBe(0o440);
    expect(statSync(join(vol, 'sub', 'key')).mode & 0o777).toBe(0o400);
    expect(lstatSync(join(vol, 'tls.crt')).isSymbolicLink()).toBe(true);
    const first = readlinkSync(join(vol, '..data'));

    // Unchanged content: nothing written.
    expect(writeVolumeFiles(vol, [file('sub/key', 'K', 0o400), file('tls.crt', 'A', 0o440)])).toBe(
      false,
    );
    expect(readlinkSync(join(vol, '..data'))).toBe(first);

    // A top-level link lost since is put back, still with nothing else written.
    rmSync(join(vol, 'tls.crt'));
    expect(writeVolumeFiles(vol, [file('sub/key', 'K', 0o400), file('tls.crt', 'A', 0o440)])).toBe(
      false,
    );
    expect(readlinkSync(join(vol, 'tls.crt'))).toBe('..data/tls.crt');
    expect(readFileSync(join(vol, 'tls.crt'), 'utf8')).toBe('A');

    // New content: a new data directory; a key that is gone disappears, the old set too.
    expect(writeVolumeFiles(vol, [file('tls.crt', 'B', 0o440)])).toBe(true);
    expect(readFileSync(join(vol, 'tls.crt'), 'utf8')).toBe('B');
    expect(readlinkSync(join(vol, '..data'))).not.toBe(first);
    expect(readdirSync(vol).sort()).toEqual(
      ['..data', readlinkSync(join(vol, '..data')), 'tls.crt'].sort(),
    );

    // A mode change alone is a change.
    expect(writeVolumeFiles(vol, [file('tls.crt', 'B', 0o444)])).toBe(true);
    expect(statSync(join(vol, 'tls.crt')).mode & 0o777).toBe(0o444);
  });

  it('writes an empty set as an empty volume', () => {
    const vol = join(dir, 'empty');
    writeVolumeFiles(vol, []);
    expect(readdirSync(vol).filter((e) => !e.startsWith('..'))).toEqual([]);
  });
});

describe('PodVolumes', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'local-node-pod-volumes-'));
  });
  afterEach(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  /** An in-memory stand-in for the Kubernetes API (the node's own code is all real). */
  class MemoryApi implements VolumeApi {
    secrets = new Map<string, ObjectData>();
    claims = new Map<string, ClaimState>();
    requests: TokenRequestSpec[] = [];
    readSecret(_ns: string, name: string): Promise<ObjectData | undefined> {
      return Promise.resolve(this.secrets.get(name));
    }
    readConfigMap(): Promise<ObjectData | undefined> {
      return Promise.resolve(data({ 'ca.crt': 'CA' }));
    }
    readClaim(_ns: string, name: string): Promise<ClaimState> {
      return Promise.resolve(this.claims.get(name) ?? { kind: 'absent' });
    }
    requestToken(
      _ns: string,
      request: TokenRequestSpec,
    ): Promise<{ token: string; expiresAt: Date }> {
      this.requests.push(request);
      return Promise.resolve({
        token: `token-${this.requests.length}`,
        expiresAt: new Date(clock + request.expirationSeconds * 1000),
      });
    }
  }
  let clock = 0;

  const pod = (volumes: V1Volume[]): PodView => {
    // As the API server sends it: the node's pod view does not declare spec.volumes.
    const spec = { containers: [{ name: 'main' }], serviceAccountName: 'robot', volumes };
    return { metadata: { name: 'web-0', namespace: 'team', uid: 'u-1' }, spec };
  };

  const hostOf = (result: Awaited<ReturnType<PodVolumes['setUp']>>, name: string): string => {
    if (!result.ok) throw new Error(result.message);
    return result.hosts.get(name)?.path ?? '';
  };

  it('waits for a missing Secret, then writes it; reuses a token until 80% of its life', async () => {
    clock = 1_000_000;
    const api = new MemoryApi();
    const volumes = new PodVolumes({
      pod: pod([
        { name: 'creds', secret: { secretName: 'later', defaultMode: 0o400 } },
        { name: 'tmp', emptyDir: {} },
        {
          name: 'kube-api-access',
          projected: {
            sources: [{ serviceAccountToken: { path: 'token', expirationSeconds: 600 } }],
          },
        },
        { name: 'journal', persistentVolumeClaim: { claimName: 'journal-0' } },
      ]),
      dir,
      fields: () => fields,
      api,
      refreshMs: 3600_000,
      log: () => undefined,
      now: () => clock,
    });
    try {
      const waiting = await volumes.setUp();
      expect(waiting.ok ? '' : waiting.message).toBe(
        'MountVolume.SetUp failed for volume "creds" : secret "later" not found',
      );
      api.secrets.set('later', data({ password: 'pw' }));
      const unbound = await volumes.setUp();
      expect(unbound.ok ? '' : unbound.message).toContain('"journal-0" not found');
      api.claims.set('journal-0', { kind: 'bound', volumeName: 'pv', path: join(dir, 'pv') });

      const ready = await volumes.setUp();
      const creds = hostOf(ready, 'creds');
      expect(creds).toBe(join(dir, 'volumes', 'creds'));
      expect(readFileSync(join(creds, 'password'), 'utf8')).toBe('pw');
      expect(statSync(join(creds, 'password')).mode & 0o777).toBe(0o400);
      expect(statSync(hostOf(ready, 'tmp')).isDirectory()).toBe(true);
      expect(hostOf(ready, 'journal')).toBe(join(dir, 'pv'));
      expect(statSync(join(dir, 'pv')).isDirectory()).toBe(true);
      const token = join(hostOf(ready, 'kube-api-access'), 'token');
      // One TokenRequest so far: the failed passes got the token too and kept it.
      expect(readFileSync(token, 'utf8')).toBe('token-1');
      expect(api.requests).toHaveLength(1);
      expect(api.requests.at(-1)).toEqual({
        serviceAccountName: 'robot',
        audience: undefined,
        expirationSeconds: 600,
        pod: { name: 'web-0', uid: 'u-1' },
      });

      // Before 80% of 600 s the held token is written again; after it, a new one.
      clock += 479_000;
      api.secrets.set('later', data({ password: 'new' }));
      await volumes.setUp();
      expect(readFileSync(token, 'utf8')).toBe('token-1');
      expect(readFileSync(join(creds, 'password'), 'utf8')).toBe('new');
      clock += 2_000;
      await volumes.setUp();
      expect(readFileSync(token, 'utf8')).toBe('token-2');

      // emptyDir content survives a set-up again (a container restart).
      const scratch = join(hostOf(ready, 'tmp'), 'scratch');
      writeFileSync(scratch, 'kept');
      await volumes.setUp();
      expect(readFileSync(scratch, 'utf8')).toBe('kept');

      // Once the pod ran, a Secret deleted under it does not hold the other volumes back:
      // its files stay as they were, and the token is still renewed.
      api.secrets.delete('later');
      clock += 481_000;
      const stale = await volumes.setUp();
      expect(stale.ok && stale.stale).toBe(
        'MountVolume.SetUp failed for volume "creds" : secret "later" not found',
      );
      expect(hostOf(stale, 'creds')).toBe(creds);
      expect(readFileSync(join(creds, 'password'), 'utf8')).toBe('new');
      expect(readFileSync(token, 'utf8')).toBe('token-3');

      // Tearing down removes the pod's volumes, never the claim's data.
      writeFileSync(join(dir, 'pv', 'wal'), 'data');
      await volumes.tearDown();
      expect(() => statSync(join(dir, 'volumes'))).toThrow();
      expect(readFileSync(join(dir, 'pv', 'wal'), 'utf8')).toBe('data');
    } finally {
      await volumes.stop();
    }
  });

  it('rewrites a running pod’s Secret volume when the Secret changes, until stopped', async () => {
    const api = new MemoryApi();
    api.secrets.set('tls', data({ 'tls.crt': 'one' }));
    const volumes = new PodVolumes({
      pod: pod([{ name: 'tls', secret: { secretName: 'tls' } }]),
      dir,
      fields: () => fields,
      api,
      // The loop waits at least a second between passes.
      refreshMs: 10,
      log: () => undefined,
    });
    try {
      const ready = await volumes.setUp();
      const file = join(hostOf(ready, 'tls'), 'tls.crt');
      expect(readFileSync(file, 'utf8')).toBe('one');
      api.secrets.set('tls', data({ 'tls.crt': 'two' }));
      const deadline = Date.now() + 5000;
      while (readFileSync(file, 'utf8') !== 'two' && Date.now() < deadline) {
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      expect(readFileSync(file, 'utf8')).toBe('two');
      // A Secret deleted meanwhile: the volume keeps its last content, as with a kubelet.
      api.secrets.delete('tls');
      await new Promise((resolve) => setTimeout(resolve, 1200));
      expect(readFileSync(file, 'utf8')).toBe('two');
      await volumes.stop();
      api.secrets.set('tls', data({ 'tls.crt': 'three' }));
      await new Promise((resolve) => setTimeout(resolve, 1200));
      expect(readFileSync(file, 'utf8')).toBe('two');
    } finally {
      await volumes.stop();
    }
  });

  it('shares one pass between containers setting up at once', async () => {
    const api = new MemoryApi();
    const volumes = new PodVolumes({
      pod: pod([
        { name: 't', projected: { sources: [{ serviceAccountToken: { path: 'token' } }] } },
      ]),
      dir,
      fields: () => fields,
      api,
      refreshMs: 3600_000,
      log: () => undefined,
    });
    try {
      const [a, b] = await Promise.all([volumes.setUp(), volumes.setUp()]);
      expect(a).toBe(b);
      expect(api.requests).toHaveLength(1);
    } finally {
      await volumes.stop();
    }
  });
});
