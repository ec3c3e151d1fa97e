import { describe, expect, it } from '@jest/globals';
import type { V1Container } from '@kubernetes/client-node';
import {
  fieldValue,
  referencedObjects,
  resolveEnv,
  expandReferences,
  type EnvSources,
  type PodFields,
} from './local-node-env';

const fields: PodFields = {
  name: 'web-0',
  namespace: 'team',
  uid: 'u-1',
  nodeName: 'polychrome-local',
  podIP: '127.0.1.7',
  hostIP: '127.0.0.1',
  labels: { app: 'web' },
  annotations: { note: 'hi' },
};

const sources: EnvSources = {
  secrets: new Map([['creds', { token: 's3cret', user: 'bob' }]]),
  configMaps: new Map([['settings', { LEVEL: 'debug', MODE: 'fast' }]]),
};

const container = (spec: Partial<V1Container>): V1Container => ({ name: 'main', ...spec });

describe('resolveEnv', () => {
  it('resolves plain values, key refs and downward-API fields', () => {
    const result = resolveEnv(
      container({
        env: [
          { name: 'PLAIN', value: 'v' },
          { name: 'EMPTY' },
          { name: 'TOKEN', valueFrom: { secretKeyRef: { name: 'creds', key: 'token' } } },
          { name: 'LEVEL', valueFrom: { configMapKeyRef: { name: 'settings', key: 'LEVEL' } } },
          { name: 'NAME', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } },
          { name: 'NS', valueFrom: { fieldRef: { fieldPath: 'metadata.namespace' } } },
          { name: 'UID', valueFrom: { fieldRef: { fieldPath: 'metadata.uid' } } },
          { name: 'IP', valueFrom: { fieldRef: { fieldPath: 'status.podIP' } } },
          { name: 'HOST', valueFrom: { fieldRef: { fieldPath: 'status.hostIP' } } },
          { name: 'APP', valueFrom: { fieldRef: { fieldPath: "metadata.labels['app']" } } },
          { name: 'NOTE', valueFrom: { fieldRef: { fieldPath: "metadata.annotations['note']" } } },
        ],
      }),
      fields,
      sources,
    );
    expect(result).toEqual({
      ok: true,
      env: {
        PLAIN: 'v',
        EMPTY: '',
        TOKEN: 's3cret',
        LEVEL: 'debug',
        NAME: 'web-0',
        NS: 'team',
        UID: 'u-1',
        IP: '127.0.1.7',
        HOST: '127.0.0.1',
        APP: 'web',
        NOTE: 'hi',
      },
    });
  });

  it('applies envFrom in order with prefixes, and env over envFrom', () => {
    const result = resolveEnv(
      container({
        envFrom: [
          { configMapRef: { name: 'settings' } },
          { secretRef: { name: 'creds' }, prefix: 'DB_' },
        ],
        env: [{ name: 'MODE', value: 'slow' }],
      }),
      fields,
      sources,
    );
    expect(result).toEqual({
      ok: true,
      env: { LEVEL: 'debug', MODE: 'slow', DB_token: 's3cret', DB_user: 'bob' },
    });
  });

  it('skips optional refs to missing objects and keys', () => {
    const result = resolveEnv(
      container({
        envFrom: [{ secretRef: { name: 'absent', optional: true } }],
        env: [
          { name: 'A', valueFrom: { secretKeyRef: { name: 'absent', key: 'k', optional: true } } },
          {
            name: 'B',
            valueFrom: { configMapKeyRef: { name: 'settings', key: 'nope', optional: true } },
          },
        ],
      }),
      fields,
      sources,
    );
    expect(result).toEqual({ ok: true, env: {} });
  });

  it.each<[string, Partial<V1Container>, string]>([
    [
      'a missing Secret',
      { env: [{ name: 'A', valueFrom: { secretKeyRef: { name: 'absent', key: 'k' } } }] },
      'secret "absent" not found',
    ],
    [
      'a missing Secret key',
      { env: [{ name: 'A', valueFrom: { secretKeyRef: { name: 'creds', key: 'k' } } }] },
      "couldn't find key k in Secret team/creds",
    ],
    [
      'a missing ConfigMap',
      { env: [{ name: 'A', valueFrom: { configMapKeyRef: { name: 'absent', key: 'k' } } }] },
      'configmap "absent" not found',
    ],
    [
      'a missing ConfigMap key',
      { env: [{ name: 'A', valueFrom: { configMapKeyRef: { name: 'settings', key: 'k' } } }] },
      "couldn't find key k in ConfigMap team/settings",
    ],
    [
      'a missing envFrom Secret',
      { envFrom: [{ secretRef: { name: 'absent' } }] },
      'secret "absent" not found',
    ],
    [
      'a missing envFrom ConfigMap',
      { envFrom: [{ configMapRef: { name: 'absent' } }] },
      'configmap "absent" not found',
    ],
    [
      'an unsupported field path',
      { env: [{ name: 'A', valueFrom: { fieldRef: { fieldPath: 'spec.hostname' } } }] },
      'env A: the local node does not support fieldPath "spec.hostname"',
    ],
    [
      'a resource field ref',
      { env: [{ name: 'A', valueFrom: { resourceFieldRef: { resource: 'limits.cpu' } } }] },
      'env A: the local node supports value, secretKeyRef, configMapKeyRef and fieldRef only',
    ],
  ])('fails on %s with the kubelet message', (_what, spec, message) => {
    expect(resolveEnv(container(spec), fields, sources)).toEqual({ ok: false, message });
  });
});

describe('fieldValue', () => {
  it('reads a missing label as empty and the default service account', () => {
    expect(fieldValue(fields, "metadata.labels['absent']")).toBe('');
    expect(fieldValue(fields, 'spec.serviceAccountName')).toBe('default');
    expect(fieldValue(fields, 'spec.nodeName')).toBe('polychrome-local');
  });
});

describe('referencedObjects', () => {
  it('collects every Secret and ConfigMap a container names', () => {
    const refs = referencedObjects(
      container({
        envFrom: [{ secretRef: { name: 's1' } }, { configMapRef: { name: 'c1' } }],
        env: [
          { name: 'A', valueFrom: { secretKeyRef: { name: 's2', key: 'k' } } },
          { name: 'B', valueFrom: { configMapKeyRef: { name: 'c1', key: 'k' } } },
          { name: 'C', value: 'x' },
        ],
      }),
    );
    expect([...refs.secrets]).toEqual(['s1', 's2']);
    expect([...refs.configMaps]).toEqual(['c1']);
  });
});

describe('expandReferences', () => {
  it.each([
    ['polychrome-state.$(POD_NAMESPACE).svc:7443', 'polychrome-state.polychrome-system.svc:7443'],
    ['$(UNDEFINED) stays', '$(UNDEFINED) stays'],
    ['$$(POD_NAMESPACE) is escaped', '$(POD_NAMESPACE) is escaped'],
    ['cost $$5', 'cost $5'],
    ['$(EMPTY)x', 'x'],
    ['$POD_NAMESPACE is not a reference', '$POD_NAMESPACE is not a reference'],
  ])('%s', (value, expected) => {
    expect(expandReferences(value, { POD_NAMESPACE: 'polychrome-system', EMPTY: '' })).toBe(
      expected,
    );
  });

  it('in resolveEnv, a value sees only what is defined before it', () => {
    const result = resolveEnv(
      container({
        env: [
          { name: 'EARLY', value: 'at $(LATER)' },
          {
            name: 'POD_NAMESPACE',
            valueFrom: { fieldRef: { fieldPath: 'metadata.namespace' } },
          },
          { name: 'ADDRESS', value: 'polychrome-state.$(POD_NAMESPACE).svc:7443' },
          { name: 'LATER', value: 'now' },
        ],
      }),
      fields,
      sources,
    );
    expect(result).toEqual({
      ok: true,
      env: {
        EARLY: 'at $(LATER)',
        POD_NAMESPACE: fields.namespace,
        ADDRESS: `polychrome-state.${fields.namespace}.svc:7443`,
        LATER: 'now',
      },
    });
  });
});
