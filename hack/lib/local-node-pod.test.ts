import { describe, expect, it } from '@jest/globals';
import {
  imageMatches,
  isPodView,
  localCommandAnnotation,
  resolveCommand,
  restartPolicyOf,
  type PodView,
} from './local-node-pod';

const view = (annotations?: Record<string, string>): PodView => ({
  metadata: { name: 'p', namespace: 'n', uid: 'u', ...(annotations ? { annotations } : {}) },
  spec: {
    containers: [{ name: 'main', image: 'polychrome/harness:dev', args: ['--port', '7070'] }],
  },
});

describe('isPodView', () => {
  const wire = {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name: 'p',
      namespace: 'n',
      uid: 'u',
      creationTimestamp: '2026-01-01T00:00:00Z',
      deletionTimestamp: '2026-01-01T00:01:00Z',
      annotations: { a: 'b' },
    },
    spec: { containers: [{ name: 'main', image: 'x', env: [] }], nodeName: 'node' },
    status: {
      phase: 'Running',
      conditions: [{ type: 'Ready', status: 'True', lastTransitionTime: '2026-01-01T00:00:00Z' }],
    },
  };

  it('accepts a pod as the API server sends it', () => {
    expect(isPodView(wire)).toBe(true);
  });

  it.each<[string, unknown]>([
    ['null', null],
    ['a pod without uid', { ...wire, metadata: { name: 'p', namespace: 'n' } }],
    ['a pod without containers', { ...wire, spec: {} }],
    ['a container without a name', { ...wire, spec: { containers: [{ image: 'x' }] } }],
    [
      'annotations that are not strings',
      { ...wire, metadata: { ...wire.metadata, annotations: { a: 1 } } },
    ],
    [
      'a Date deletion timestamp',
      { ...wire, metadata: { ...wire.metadata, deletionTimestamp: new Date() } },
    ],
    ['conditions without a status', { ...wire, status: { conditions: [{ type: 'Ready' }] } }],
  ])('rejects %s', (_what, value) => {
    expect(isPodView(value)).toBe(false);
  });
});

describe('imageMatches', () => {
  it.each<[string, string, boolean]>([
    ['polychrome/harness:*', 'polychrome/harness:dev', true],
    ['polychrome/harness:*', 'polychrome/harness-x:dev', false],
    ['*/harness:dev', 'ghcr.io/polychrome/harness:dev', true],
    ['polychrome/harness:dev', 'polychrome/harness:dev', true],
    ['polychrome/harness.dev', 'polychrome/harnessXdev', false],
  ])('%s matches %s: %s', (pattern, image, expected) => {
    expect(imageMatches(pattern, image)).toBe(expected);
  });
});

describe('resolveCommand', () => {
  const images = { 'other/*': ['other'], 'polychrome/harness:*': ['node', 'dist/harness/main.js'] };

  it('maps an image and appends the container args', () => {
    expect(resolveCommand(view(), view().spec.containers[0]!, images)).toEqual({
      ok: true,
      argv: ['node', 'dist/harness/main.js', '--port', '7070'],
      source: 'image',
    });
  });

  it('prefers the annotation, as an array or per container', () => {
    const pod = view({ [localCommandAnnotation]: '["node","-e","1"]' });
    expect(resolveCommand(pod, pod.spec.containers[0]!, images)).toEqual({
      ok: true,
      argv: ['node', '-e', '1'],
      source: 'annotation',
    });
    const perContainer = view({ [localCommandAnnotation]: '{"main":["a"],"side":["b"]}' });
    expect(resolveCommand(perContainer, perContainer.spec.containers[0]!, images)).toMatchObject({
      argv: ['a'],
    });
    const notThis = view({ [localCommandAnnotation]: '{"side":["b"]}' });
    expect(resolveCommand(notThis, notThis.spec.containers[0]!, images)).toMatchObject({
      source: 'image',
    });
  });

  it.each(['not json', '[]', '[1]', '"node"', '{"main":"node"}'])(
    'calls annotation %s a CreateContainerConfigError',
    (raw) => {
      const pod = view({ [localCommandAnnotation]: raw });
      expect(resolveCommand(pod, pod.spec.containers[0]!, images)).toMatchObject({
        ok: false,
        reason: 'CreateContainerConfigError',
      });
    },
  );

  it('calls an unmapped image ErrImagePull and says how to map it', () => {
    expect(resolveCommand(view(), { name: 'main', image: 'nginx:1' }, images)).toEqual({
      ok: false,
      reason: 'ErrImagePull',
      message: `the local node has no command for image "nginx:1": map it in the node's images or set the pod annotation ${localCommandAnnotation}`,
    });
  });
});

describe('restartPolicyOf', () => {
  it('defaults to Always, as the API server does', () => {
    expect(restartPolicyOf(view())).toBe('Always');
    const never = view();
    never.spec.restartPolicy = 'Never';
    expect(restartPolicyOf(never)).toBe('Never');
  });
});
