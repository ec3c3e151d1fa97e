import { describe, expect, it } from '@jest/globals';
import {
  isPodSpecManifest,
  isReconcilableConversation,
  readClaim,
  readPod,
  readSandbox,
  readSandboxTemplate,
  readWarmPool,
} from './read-objects';
import { isObjectList, ownerKeys } from './watch-keys';

const conv = (spec: Record<string, unknown>): Record<string, unknown> => ({
  apiVersion: 'polychrome.dev/v1alpha1',
  kind: 'Conversation',
  metadata: { name: 'c1', namespace: 'team', uid: 'u1' },
  spec: { agent: {}, ...spec },
});

describe('isReconcilableConversation', () => {
  it('accepts a valid object, and one whose retention or idleTimeout breaks its pattern', () => {
    expect(isReconcilableConversation(conv({ retention: '24h' }))).toBe(true);
    expect(isReconcilableConversation(conv({ retention: '3 days', idleTimeout: '1d' }))).toBe(true);
  });
  it('rejects other kinds, missing identity and other schema violations', () => {
    expect(isReconcilableConversation({ ...conv({}), kind: 'Pod' })).toBe(false);
    expect(isReconcilableConversation({ ...conv({}), metadata: { name: 'c1' } })).toBe(false);
    expect(isReconcilableConversation(conv({ visibility: 'public' }))).toBe(false);
    expect(isReconcilableConversation(conv({ retention: 5 }))).toBe(false);
    expect(isReconcilableConversation('nope')).toBe(false);
  });
});

describe('readers', () => {
  it('reads a claim, its owners, sandbox name and conditions', () => {
    expect(
      readClaim({
        metadata: {
          name: 'c1',
          uid: 'cu',
          ownerReferences: [
            {
              apiVersion: 'polychrome.dev/v1alpha1',
              kind: 'Conversation',
              name: 'c1',
              uid: 'u1',
              controller: true,
            },
          ],
        },
        spec: {
          warmPoolRef: { name: 'pool' },
          env: [
            { name: 'HARNESS_MCP_SERVERS', value: '[]', containerName: 'harness' },
            { name: 'EMPTY' },
            { value: 'no name' },
          ],
        },
        status: {
          sandbox: { name: 'sb' },
          conditions: [
            { type: 'Ready', status: 'False', reason: 'SandboxNotReady', message: '' },
            { bad: 1 },
          ],
        },
      }),
    ).toEqual({
      name: 'c1',
      uid: 'cu',
      deleting: false,
      owners: [
        {
          apiVersion: 'polychrome.dev/v1alpha1',
          kind: 'Conversation',
          name: 'c1',
          uid: 'u1',
          controller: true,
        },
      ],
      warmPoolName: 'pool',
      env: [
        { name: 'HARNESS_MCP_SERVERS', value: '[]', containerName: 'harness' },
        { name: 'EMPTY', value: '' },
      ],
      sandboxName: 'sb',
      conditions: [{ type: 'Ready', status: 'False', reason: 'SandboxNotReady' }],
    });
    expect(readClaim({ metadata: {} })).toBeUndefined();
  });

  it("reads a claim's generation and each condition's observedGeneration, when they are integers", () => {
    const read = readClaim({
      metadata: { name: 'c1', uid: 'cu', generation: 3 },
      status: {
        conditions: [
          { type: 'Ready', status: 'True', observedGeneration: 2 },
          { type: 'Finished', status: 'False', observedGeneration: '3' },
          { type: 'Other', status: 'False', observedGeneration: 1.5 },
        ],
      },
    });
    expect(read?.generation).toBe(3);
    expect(read?.conditions).toEqual([
      { type: 'Ready', status: 'True', observedGeneration: 2 },
      { type: 'Finished', status: 'False' },
      { type: 'Other', status: 'False' },
    ]);
    expect(readClaim({ metadata: { name: 'c1', uid: 'cu', generation: -1 } })?.generation).toBe(
      undefined,
    );
  });

  it('reads a SandboxTemplate: its env injection policy and a pod spec with containers only', () => {
    const spec = { containers: [{ name: 'harness', env: [{ name: 'A', value: '1' }] }] };
    expect(
      readSandboxTemplate({
        metadata: { name: 't' },
        spec: { envVarsInjectionPolicy: 'Overrides', podTemplate: { spec } },
      }),
    ).toEqual({ envVarsInjectionPolicy: 'Overrides', podSpec: spec });
    expect(
      readSandboxTemplate({ metadata: { name: 't' }, spec: { podTemplate: { spec: {} } } }),
    ).toEqual({});
    expect(readSandboxTemplate({ spec: {} })).toBeUndefined();
  });

  it('reads the pod name from the Sandbox annotation, else its name', () => {
    const annotated = readSandbox({
      metadata: {
        name: 'sb',
        annotations: { 'agents.x-k8s.io/pod-name': 'sb-pod' },
        deletionTimestamp: 'x',
      },
      status: { podIPs: ['10.0.0.5', 7] },
    });
    expect(annotated).toMatchObject({ podName: 'sb-pod', podIPs: ['10.0.0.5'], deleting: true });
    expect(readSandbox({ metadata: { name: 'sb' } })?.podName).toBe('sb');
  });

  it('reads a pod’s phase, IP and readiness, and a warm pool’s template', () => {
    expect(
      readPod({
        metadata: { name: 'p', uid: 'pu', annotations: { a: 'b' } },
        status: {
          phase: 'Running',
          podIP: '10.0.0.9',
          conditions: [{ type: 'Ready', status: 'True' }],
        },
      }),
    ).toEqual({
      name: 'p',
      uid: 'pu',
      deleting: false,
      owners: [],
      annotations: { a: 'b' },
      phase: 'Running',
      podIP: '10.0.0.9',
      ready: true,
    });
    expect(
      readWarmPool({ metadata: { name: 'w' }, spec: { sandboxTemplateRef: { name: 't' } } }),
    ).toEqual({ templateName: 't' });
    expect(readWarmPool({})).toBeUndefined();
  });

  it('guards pod specs and lists, and maps owners to keys', () => {
    expect(isPodSpecManifest({ containers: [{ name: 'a' }] })).toBe(true);
    expect(isPodSpecManifest({ containers: [] })).toBe(false);
    expect(isPodSpecManifest({ containers: [{ image: 'x' }] })).toBe(false);
    expect(isObjectList({ items: [{ metadata: {} }] })).toBe(true);
    expect(isObjectList({ items: [1] })).toBe(false);
    expect(
      ownerKeys(
        {
          metadata: {
            namespace: 'ns',
            ownerReferences: [
              { apiVersion: 'v', kind: 'SandboxClaim', name: 'c1', uid: 'u' },
              { apiVersion: 'v', kind: 'Other', name: 'x', uid: 'u' },
            ],
          },
        },
        'SandboxClaim',
      ),
    ).toEqual(['ns/c1']);
  });
});
