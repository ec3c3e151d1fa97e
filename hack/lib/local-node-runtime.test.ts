import { describe, expect, it } from '@jest/globals';
import {
  hostPathOf,
  IMAGE_WORKDIR,
  launchMounts,
  nodeOptionWord,
  podProcessEnv,
  podRuntimeModule,
  rewriteEnvPaths,
  type Mount,
} from './local-node-runtime';

const mounts: Mount[] = [
  { mountPath: '/etc/polychrome/tls', hostPath: '/node/pods/p/volumes/tls', readOnly: true },
  { mountPath: '/var/lib/polychrome/', hostPath: '/node/pv/journal', readOnly: false },
  { mountPath: '/var/lib/polychrome/keys', hostPath: '/node/pods/p/volumes/keys', readOnly: true },
];

describe('hostPathOf', () => {
  it.each([
    ['/etc/polychrome/tls/ca.crt', '/node/pods/p/volumes/tls/ca.crt'],
    ['/etc/polychrome/tls', '/node/pods/p/volumes/tls'],
    ['/var/lib/polychrome/journal', '/node/pv/journal/journal'],
    // The longest mount path wins: a mount inside another.
    ['/var/lib/polychrome/keys/records-key', '/node/pods/p/volumes/keys/records-key'],
    // A sibling that only shares a prefix of the name is not inside.
    ['/etc/polychrome/tls-old/ca.crt', '/etc/polychrome/tls-old/ca.crt'],
    ['relative/ca.crt', 'relative/ca.crt'],
  ])('%s is %s', (path, expected) => {
    expect(hostPathOf(path, mounts)).toBe(expected);
  });
});

describe('launchMounts', () => {
  it("maps an image-table container's /app to the checkout, so config/sandbox's script path resolves", () => {
    const all = launchMounts(mounts, 'image', '/checkout');
    expect(all).toEqual([
      ...mounts,
      { mountPath: IMAGE_WORKDIR, hostPath: '/checkout', readOnly: false },
    ]);
    expect(hostPathOf('/app/harness/model/demo-script.yaml', all)).toBe(
      '/checkout/harness/model/demo-script.yaml',
    );
    expect(rewriteEnvPaths({ HARNESS_MODEL_SCRIPT: '/app/x.yaml' }, all)).toEqual({
      HARNESS_MODEL_SCRIPT: '/checkout/x.yaml',
    });
  });

  it("adds nothing for a pod's own command, or where the pod mounts a volume at /app", () => {
    expect(launchMounts(mounts, 'annotation', '/checkout')).toEqual(mounts);
    const own = [...mounts, { mountPath: '/app/', hostPath: '/node/v/app', readOnly: true }];
    expect(launchMounts(own, 'image', '/checkout')).toEqual(own);
  });
});

describe('rewriteEnvPaths', () => {
  it('rewrites paths and lists of paths under a mount, and nothing else', () => {
    expect(
      rewriteEnvPaths(
        {
          STATE_TLS_CA_FILE: '/etc/polychrome/tls/ca.crt',
          STATE_DATA_DIR: '/var/lib/polychrome/journal',
          STATE_PREVIOUS_SIGNING_KEY_FILES: '/var/lib/polychrome/keys/a,/var/lib/polychrome/keys/b',
          PATH: '/usr/bin:/bin',
          EMPTY: '',
          URL: 'http://polychrome-state:7443/etc/polychrome/tls',
          WORD: 'info',
        },
        mounts,
      ),
    ).toEqual({
      STATE_TLS_CA_FILE: '/node/pods/p/volumes/tls/ca.crt',
      STATE_DATA_DIR: '/node/pv/journal/journal',
      STATE_PREVIOUS_SIGNING_KEY_FILES: '/node/pods/p/volumes/keys/a,/node/pods/p/volumes/keys/b',
      PATH: '/usr/bin:/bin',
      EMPTY: '',
      URL: 'http://polychrome-state:7443/etc/polychrome/tls',
      WORD: 'info',
    });
  });
});

describe('podProcessEnv', () => {
  const runtime = {
    podIP: '127.4.1.2',
    namespace: 'polychrome-system',
    mounts,
    dnsFile: '/node/dns.json',
    apiServer: { host: '127.0.0.1', port: '6443' },
  };

  it('adds the service variables, the preload and the pod view, and rewrites mounted paths', () => {
    const env = podProcessEnv({ CA: '/etc/polychrome/tls/ca.crt' }, runtime);
    expect(env.KUBERNETES_SERVICE_HOST).toBe('127.0.0.1');
    expect(env.KUBERNETES_SERVICE_PORT).toBe('6443');
    expect(env.CA).toBe('/node/pods/p/volumes/tls/ca.crt');
    expect(env.NODE_OPTIONS).toBe(`--import ${podRuntimeModule}`);
    expect(JSON.parse(env.POLYCHROME_LOCAL_POD ?? '')).toEqual({
      podIP: '127.4.1.2',
      namespace: 'polychrome-system',
      dnsFile: '/node/dns.json',
      // readOnly only where it is: the preload refuses writes there.
      mounts: mounts.map(({ mountPath, hostPath, readOnly }) =>
        readOnly ? { mountPath, hostPath, readOnly } : { mountPath, hostPath },
      ),
    });
  });

  it("keeps the container's own NODE_OPTIONS after the preload, and its own service variables", () => {
    const env = podProcessEnv(
      { NODE_OPTIONS: '--max-old-space-size=512', KUBERNETES_SERVICE_HOST: 'api.example' },
      runtime,
    );
    expect(env.NODE_OPTIONS).toBe(`--import ${podRuntimeModule} --max-old-space-size=512`);
    expect(env.KUBERNETES_SERVICE_HOST).toBe('api.example');
  });

  it('a volume at /tmp is the temp directory (TMPDIR) of native code too', () => {
    const tmp: Mount = { mountPath: '/tmp', hostPath: '/node/pods/p/volumes/tmp', readOnly: false };
    expect(podProcessEnv({}, { ...runtime, mounts: [tmp] }).TMPDIR).toBe(tmp.hostPath);
    expect(podProcessEnv({}, runtime).TMPDIR).toBeUndefined();
    expect(podProcessEnv({ TMPDIR: '/tmp/own' }, { ...runtime, mounts: [tmp] }).TMPDIR).toBe(
      '/node/pods/p/volumes/tmp/own',
    );
  });

  it('leaves the service variables out when the node knows no API server', () => {
    const env = podProcessEnv({}, { ...runtime, apiServer: undefined });
    expect(env.KUBERNETES_SERVICE_HOST).toBeUndefined();
    expect(env.KUBERNETES_SERVICE_PORT).toBeUndefined();
  });
});

describe('nodeOptionWord', () => {
  it.each([
    ['/repo/hack/lib/local-pod-runtime.mjs', '/repo/hack/lib/local-pod-runtime.mjs'],
    ['/my repo/x.mjs', '"/my repo/x.mjs"'],
    ['/a"b/x.mjs', '"/a\\"b/x.mjs"'],
  ])('%s is written %s', (word, expected) => {
    expect(nodeOptionWord(word)).toBe(expected);
  });
});
