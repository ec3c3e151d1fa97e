import { describe, expect, it } from '@jest/globals';
import type { V1Pod } from '@kubernetes/client-node';
import { findPeerAddress } from './peer-endpoints';

const NS = 'polychrome-system';

/** A control-plane pod as the Deployment and the kubelet write it: Running and Ready. */
function pod(
  name: string,
  ip: string,
  overrides: { meta?: object; spec?: object; status?: object } = {},
): V1Pod {
  return {
    metadata: {
      name,
      namespace: NS,
      labels: {
        'app.kubernetes.io/name': 'polychrome-control-plane',
        'app.kubernetes.io/part-of': 'polychrome',
      },
      ...overrides.meta,
    },
    spec: {
      containers: [
        {
          name: 'control-plane',
          ports: [
            { name: 'api', containerPort: 8080, protocol: 'TCP' },
            { name: 'https-peer', containerPort: 9443, protocol: 'TCP' },
          ],
        },
      ],
      ...overrides.spec,
    },
    status: {
      phase: 'Running',
      conditions: [
        { type: 'Ready', status: 'True' },
        { type: 'ContainersReady', status: 'True' },
      ],
      podIP: ip,
      podIPs: [{ ip }],
      ...overrides.status,
    },
  };
}

describe('findPeerAddress', () => {
  const pods = [pod('cp-a', '10.0.0.5'), pod('cp-b', '10.0.0.6')];

  it("finds the holder's pod by name, at its pod IP and https-peer container port", () => {
    expect(findPeerAddress(pods, 'cp-b', NS)).toEqual({ host: '10.0.0.6', port: 9443 });
    expect(findPeerAddress(pods, 'cp-a', NS)).toEqual({ host: '10.0.0.5', port: 9443 });
  });

  it('takes 8443 when the spec names no https-peer port, and a loopback or IPv6 pod IP', () => {
    const bare = pod('cp-a', '127.0.0.1', { spec: { containers: [{ name: 'control-plane' }] } });
    expect(findPeerAddress([bare], 'cp-a', NS)).toEqual({ host: '127.0.0.1', port: 8443 });
    const v6 = pod('cp-a', 'fd00::5');
    expect(findPeerAddress([v6], 'cp-a', NS)).toEqual({ host: 'fd00::5', port: 9443 });
  });

  it.each([
    ['a holder no pod is named', 'cp-c'],
    ['an empty holder', ''],
    ['a URL written as holder', 'https://10.0.0.6:9443'],
    ['a pod IP written as holder', '10.0.0.6'],
    ['an address and port written as holder', '10.0.0.6:9443'],
  ])('finds nothing for %s', (_label, holder) => {
    expect(findPeerAddress(pods, holder, NS)).toBeUndefined();
  });

  it.each([
    [
      'a pod that is not Ready',
      pod('cp-a', '10.0.0.5', { status: { conditions: [{ type: 'Ready', status: 'False' }] } }),
    ],
    ['a pod without conditions', pod('cp-a', '10.0.0.5', { status: { conditions: undefined } })],
    ['a pod that is not Running', pod('cp-a', '10.0.0.5', { status: { phase: 'Pending' } })],
    ['a pod being deleted', pod('cp-a', '10.0.0.5', { meta: { deletionTimestamp: new Date() } })],
    [
      'a pod without the control-plane label',
      pod('cp-a', '10.0.0.5', { meta: { labels: { 'app.kubernetes.io/part-of': 'polychrome' } } }),
    ],
    [
      'a pod labelled as another app',
      pod('cp-a', '10.0.0.5', {
        meta: { labels: { 'app.kubernetes.io/name': 'polychrome-harness' } },
      }),
    ],
    ['a pod of another namespace', pod('cp-a', '10.0.0.5', { meta: { namespace: 'team-a' } })],
    [
      'a pod without an IP',
      pod('cp-a', '10.0.0.5', { status: { podIP: undefined, podIPs: undefined } }),
    ],
    ['a pod whose IP is a name', pod('cp-a', 'evil.example.com', { status: { podIPs: [] } })],
    [
      'a pod whose https-peer port is UDP',
      pod('cp-a', '10.0.0.5', {
        spec: {
          containers: [
            { name: 'c', ports: [{ name: 'https-peer', containerPort: 9443, protocol: 'UDP' }] },
          ],
        },
      }),
    ],
  ])('never dials %s', (_label, p) => {
    expect(findPeerAddress([p], 'cp-a', NS)).toBeUndefined();
  });

  it('looks past a pod of the same name in another namespace', () => {
    const decoy = pod('cp-a', '10.9.9.9', { meta: { namespace: 'team-a' } });
    expect(findPeerAddress([decoy, pod('cp-a', '10.0.0.5')], 'cp-a', NS)).toEqual({
      host: '10.0.0.5',
      port: 9443,
    });
  });
});
