import { describe, expect, it } from '@jest/globals';
import { builtInHarnessPodSpec, desiredPod, podSpecHash } from './desired-pod';
import { UID, conversation } from './snapshot-fixtures';

describe('desiredPod', () => {
  const c = conversation({ sandbox: { backend: 'pod' } });

  it('uses the hardened built-in spec when there is no PodTemplate', () => {
    const pod = desiredPod({ conversation: c, harnessImage: 'img:1' });
    expect(pod.metadata.name).toBe('c1');
    expect(pod.metadata.namespace).toBe('team');
    expect(pod.metadata.ownerReferences).toEqual([
      {
        apiVersion: 'polychrome.dev/v1alpha1',
        kind: 'Conversation',
        name: 'c1',
        uid: UID,
        controller: true,
        blockOwnerDeletion: true,
      },
    ]);
    expect(pod.metadata.labels['polychrome.dev/conversation-uid']).toBe(UID);
    expect(pod.spec).toMatchObject({
      runtimeClassName: 'gvisor',
      automountServiceAccountToken: false,
      securityContext: { runAsNonRoot: true, seccompProfile: { type: 'RuntimeDefault' } },
    });
    expect(pod.spec.containers[0]).toMatchObject({
      name: 'harness',
      image: 'img:1',
      ports: [{ name: 'grpc', containerPort: 7070, protocol: 'TCP' }],
      securityContext: {
        allowPrivilegeEscalation: false,
        readOnlyRootFilesystem: true,
        runAsNonRoot: true,
        capabilities: { drop: ['ALL'] },
      },
      resources: { requests: { cpu: '100m', memory: '256Mi' } },
    });
    expect(pod.metadata.annotations['polychrome.dev/pod-spec-hash']).toBe(podSpecHash(pod.spec));
  });

  it('takes a PodTemplate spec, forces automountServiceAccountToken off, applies resources', () => {
    const templateSpec = {
      automountServiceAccountToken: true,
      containers: [
        { name: 'sidecar' },
        { name: 'harness', image: 'mine', resources: { limits: { cpu: '1' } } },
      ],
    };
    const pod = desiredPod({
      conversation: conversation({
        sandbox: { backend: 'pod', resources: { limits: { memory: '2Gi' }, requests: { cpu: 2 } } },
      }),
      templateSpec,
      harnessImage: 'unused',
    });
    expect(pod.spec.automountServiceAccountToken).toBe(false);
    expect(pod.spec.containers).toEqual([
      { name: 'sidecar' },
      {
        name: 'harness',
        image: 'mine',
        resources: { limits: { cpu: '1', memory: '2Gi' }, requests: { cpu: '2' } },
      },
    ]);
    expect(templateSpec.automountServiceAccountToken).toBe(true);
  });

  it('changes the spec hash when the spec changes, and only then', () => {
    const a = desiredPod({ conversation: c, harnessImage: 'img:1' });
    const b = desiredPod({ conversation: c, harnessImage: 'img:1' });
    const other = desiredPod({ conversation: c, harnessImage: 'img:2' });
    expect(a.metadata.annotations).toEqual(b.metadata.annotations);
    expect(other.metadata.annotations).not.toEqual(a.metadata.annotations);
    expect(builtInHarnessPodSpec('x').volumes).toEqual([
      { name: 'tmp', emptyDir: { sizeLimit: '256Mi' } },
    ]);
  });
});
