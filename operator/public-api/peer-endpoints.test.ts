import { describe, expect, it } from '@jest/globals';
import type { V1EndpointSlice } from '@kubernetes/client-node';
import { findPeerAddress } from './peer-endpoints';

/** A slice as the EndpointSlice controller writes it for the control-plane Service. */
function slice(
  endpoints: V1EndpointSlice['endpoints'],
  overrides: Partial<V1EndpointSlice> = {},
): V1EndpointSlice {
  return {
    addressType: 'IPv4',
    endpoints,
    ports: [
      { name: 'http-api', port: 8080, protocol: 'TCP' },
      { name: 'https-peer', port: 8443, protocol: 'TCP' },
    ],
    ...overrides,
  };
}

const pod = (name: string, ip: string, conditions = { ready: true, serving: true }) => ({
  addresses: [ip],
  conditions,
  targetRef: { kind: 'Pod', name, namespace: 'polychrome-system' },
});

describe('findPeerAddress', () => {
  const slices = [slice([pod('cp-a', '10.0.0.5'), pod('cp-b', '10.0.0.6')])];

  it("finds the holder's pod by targetRef name, on the https-peer port", () => {
    expect(findPeerAddress(slices, 'cp-b')).toEqual({ host: '10.0.0.6', port: 8443 });
    expect(findPeerAddress(slices, 'cp-a')).toEqual({ host: '10.0.0.5', port: 8443 });
  });

  it.each([
    ['a holder no endpoint names', 'cp-c'],
    ['an empty holder', ''],
    ['a URL written as holder', 'https://10.0.0.6:8443'],
    ['an address written as holder', '10.0.0.6'],
  ])('finds nothing for %s', (_label, holder) => {
    expect(findPeerAddress(slices, holder)).toBeUndefined();
  });

  it('skips an endpoint that is not serving, and uses serving over ready while it terminates', () => {
    expect(
      findPeerAddress([slice([pod('cp-a', '10.0.0.5', { ready: false, serving: false })])], 'cp-a'),
    ).toBeUndefined();
    expect(
      findPeerAddress([slice([pod('cp-a', '10.0.0.5', { ready: false, serving: true })])], 'cp-a'),
    ).toEqual({ host: '10.0.0.5', port: 8443 });
    expect(
      findPeerAddress(
        [slice([{ ...pod('cp-a', '10.0.0.5'), conditions: { ready: false } }])],
        'cp-a',
      ),
    ).toBeUndefined();
  });

  it('takes a port from the slice that has the endpoint', () => {
    const two = [
      slice([pod('cp-a', '10.0.0.5')], { ports: [{ name: 'https-peer', port: 9001 }] }),
      slice([pod('cp-b', '10.0.0.6')], { ports: [{ name: 'https-peer', port: 9002 }] }),
    ];
    expect(findPeerAddress(two, 'cp-b')).toEqual({ host: '10.0.0.6', port: 9002 });
  });

  it('finds IPv6 endpoints', () => {
    expect(
      findPeerAddress([slice([pod('cp-a', 'fd00::5')], { addressType: 'IPv6' })], 'cp-a'),
    ).toEqual({ host: 'fd00::5', port: 8443 });
  });

  it.each([
    ['an FQDN slice', slice([pod('cp-a', 'evil.example.com')], { addressType: 'FQDN' })],
    [
      'a slice without the peer port',
      slice([pod('cp-a', '10.0.0.5')], { ports: [{ name: 'http-api', port: 8080 }] }),
    ],
    [
      'a UDP peer port',
      slice([pod('cp-a', '10.0.0.5')], {
        ports: [{ name: 'https-peer', port: 8443, protocol: 'UDP' }],
      }),
    ],
    [
      'a target that is not a Pod',
      slice([{ ...pod('cp-a', '10.0.0.5'), targetRef: { kind: 'Node', name: 'cp-a' } }]),
    ],
    ['an endpoint without addresses', slice([{ ...pod('cp-a', '10.0.0.5'), addresses: [] }])],
  ])('never dials %s', (_label, s) => {
    expect(findPeerAddress([s], 'cp-a')).toBeUndefined();
  });
});
