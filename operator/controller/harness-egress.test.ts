import { describe, expect, it } from '@jest/globals';
import type { Conversation } from '../api/v1alpha1/conversation-types';
import { validMinimalConversationSpec } from '../api/v1alpha1/conversation-cases';
import { desiredPod } from './desired-pod';
import {
  EGRESS_CLOSED_ANNOTATION,
  HARNESS_EGRESS_POLICY_NAME,
  METADATA_EXCEPTIONS,
  apiServerInputs,
  harnessEgressPolicy,
  isSameEgressPolicy,
  type EgressInputs,
} from './harness-egress';

/** The `kubernetes` Service of a cluster whose ClusterIPs are `ips`. */
const service = (...ips: string[]): unknown => ({
  metadata: { name: 'kubernetes', namespace: 'default' },
  spec: { clusterIP: ips[0], clusterIPs: ips, ports: [{ name: 'https', port: 443 }] },
});

/** An EndpointSlice of the `kubernetes` Service, as a managed cluster's API server writes it. */
const slice = (name: string, addressType: string, ...addresses: string[]): unknown => ({
  metadata: { name, namespace: 'default', labels: { 'kubernetes.io/service-name': 'kubernetes' } },
  addressType,
  endpoints: addresses.map((a) => ({ addresses: [a], conditions: { ready: true } })),
  ports: [{ name: 'https', port: 443, protocol: 'TCP' }],
});

const known = (inputs: EgressInputs): { ipv4: readonly string[]; ipv6: readonly string[] } => {
  if (inputs.kind !== 'known') throw new Error(`expected known addresses, got: ${inputs.reason}`);
  return inputs.addresses;
};

/** Every CIDR the rendered policy opens 443 to, with what it excepts. */
const blocks = (inputs: EgressInputs): { cidr: string; except: string[] }[] =>
  harnessEgressPolicy('team', inputs).spec.egress.flatMap((rule) => rule.to.map((p) => p.ipBlock));

describe('apiServerInputs', () => {
  it('reads the endpoint addresses and the ClusterIP of an API server on 443', () => {
    const inputs = apiServerInputs(
      [slice('kubernetes', 'IPv4', '172.20.32.10', '172.20.48.11')],
      service('10.100.0.1'),
    );
    expect(known(inputs)).toEqual({
      ipv4: ['10.100.0.1', '172.20.32.10', '172.20.48.11'],
      ipv6: [],
    });
  });

  it('joins every slice of the Service, both families, and canonicalizes IPv6', () => {
    const inputs = apiServerInputs(
      [
        slice('kubernetes', 'IPv4', '192.168.5.4'),
        slice('kubernetes-v6', 'IPv6', 'FD00:0:0:0:0:0:0:A'),
        slice('kubernetes-v6-b', 'IPv6', 'fd00::a'),
      ],
      service('10.96.0.1', 'fd00:96::1'),
    );
    expect(known(inputs)).toEqual({
      ipv4: ['10.96.0.1', '192.168.5.4'],
      ipv6: ['fd00:96::1', 'fd00::a'],
    });
  });

  it('excludes an endpoint that is not ready yet', () => {
    const s = {
      addressType: 'IPv4',
      metadata: { name: 'kubernetes' },
      endpoints: [{ addresses: ['10.1.2.3'], conditions: { ready: false } }],
    };
    expect(known(apiServerInputs([s], service('10.0.0.1'))).ipv4).toContain('10.1.2.3');
  });

  it.each([
    [
      'no Service',
      [slice('kubernetes', 'IPv4', '10.1.2.3')],
      undefined,
      /Service default\/kubernetes was not found/,
    ],
    [
      'no slice',
      [],
      service('10.0.0.1'),
      /no EndpointSlices labelled kubernetes.io\/service-name=kubernetes in namespace default lists an address/,
    ],
    [
      'a slice without endpoints',
      [slice('kubernetes', 'IPv4')],
      service('10.0.0.1'),
      /lists an address/,
    ],
    [
      'an FQDN slice',
      [slice('kubernetes', 'IPv4', '10.1.2.3'), slice('api-name', 'FQDN', 'api.example.com')],
      service('10.0.0.1'),
      /EndpointSlice default\/api-name has addressType FQDN: only IP addresses can be excluded/,
    ],
    [
      'a slice address that is no IP',
      [slice('kubernetes', 'IPv4', '10.1.2')],
      service('10.0.0.1'),
      /"10.1.2" in the EndpointSlices .* is not an IP address/,
    ],
    [
      'an IPv6 zone',
      [slice('kubernetes', 'IPv6', 'fe80::1%eth0')],
      service('10.0.0.1'),
      /"fe80::1%eth0" .* is not an IP address/,
    ],
    [
      'a ClusterIP that is no IP',
      [slice('kubernetes', 'IPv4', '10.1.2.3')],
      service('10.0.0.256'),
      /"10.0.0.256" .* is not an IP address/,
    ],
  ])('fails closed with %s', (_what, slices, svc, reason) => {
    const inputs = apiServerInputs(slices, svc);
    expect(inputs.kind).toBe('closed');
    expect(inputs.kind === 'closed' ? inputs.reason : '').toMatch(reason);
  });
});

describe('harnessEgressPolicy', () => {
  const onManagedCluster = apiServerInputs(
    [slice('kubernetes', 'IPv4', '172.20.32.10', '172.20.48.11')],
    service('10.100.0.1'),
  );

  it('opens TCP 443 only, to everything but the API server and the metadata servers', () => {
    const policy = harnessEgressPolicy('team', onManagedCluster);
    expect(policy.metadata).toEqual({
      name: HARNESS_EGRESS_POLICY_NAME,
      namespace: 'team',
      labels: {
        'app.kubernetes.io/name': 'polychrome-harness-egress',
        'app.kubernetes.io/part-of': 'polychrome',
        'app.kubernetes.io/managed-by': 'polychrome-control-plane',
      },
    });
    expect(policy.spec.policyTypes).toEqual(['Egress']);
    expect(policy.spec.egress).toHaveLength(1);
    expect(policy.spec.egress[0]?.ports).toEqual([{ protocol: 'TCP', port: 443 }]);
    expect(blocks(onManagedCluster)).toEqual([
      {
        cidr: '0.0.0.0/0',
        except: [
          '10.100.0.1/32',
          '172.20.32.10/32',
          '172.20.48.11/32',
          ...METADATA_EXCEPTIONS.ipv4,
        ],
      },
    ]);
  });

  it('excludes 169.254.169.254 (the metadata server) through the link-local range', () => {
    expect(blocks(onManagedCluster)[0]?.except).toContain('169.254.0.0/16');
  });

  it('adds ::/0 only when the API server has an IPv6 address, excepting those', () => {
    const dual = apiServerInputs(
      [slice('kubernetes', 'IPv4', '192.168.5.4'), slice('kubernetes-v6', 'IPv6', 'fd00:10::4')],
      service('10.96.0.1', 'fd00:96::1'),
    );
    expect(blocks(dual)).toEqual([
      {
        cidr: '0.0.0.0/0',
        except: ['10.96.0.1/32', '192.168.5.4/32', ...METADATA_EXCEPTIONS.ipv4],
      },
      {
        cidr: '::/0',
        except: ['fd00:10::4/128', 'fd00:96::1/128', ...METADATA_EXCEPTIONS.ipv6],
      },
    ]);
    expect(blocks(onManagedCluster).map((b) => b.cidr)).toEqual(['0.0.0.0/0']);
  });

  it('opens nothing when the addresses are not known, and says why', () => {
    const closed = harnessEgressPolicy('team', {
      kind: 'closed',
      reason: 'the control plane may not list EndpointSlices',
    });
    expect(closed.spec.egress).toEqual([]);
    expect(closed.spec.policyTypes).toEqual(['Egress']);
    expect(closed.metadata.annotations).toEqual({
      [EGRESS_CLOSED_ANNOTATION]: 'the control plane may not list EndpointSlices',
    });
  });

  it('selects the harness pods of the pod backend and no other pod', () => {
    const conversation = {
      apiVersion: 'polychrome.dev/v1alpha1',
      kind: 'Conversation',
      metadata: { name: 'c1', namespace: 'team', uid: '5a1d4c9e-0000-4000-8000-000000000001' },
      spec: { ...validMinimalConversationSpec, sandbox: { backend: 'pod' } },
    } as unknown as Conversation;
    const pod = desiredPod({ conversation, harnessImage: 'polychrome/harness:0.1.0' });
    const selector = harnessEgressPolicy('team', onManagedCluster).spec.podSelector.matchLabels;
    expect(Object.keys(selector).length).toBeGreaterThan(0);
    for (const [k, v] of Object.entries(selector)) expect(pod.metadata.labels[k]).toBe(v);
    expect(selector['app.kubernetes.io/name']).toBe('polychrome-harness');
  });
});

describe('isSameEgressPolicy', () => {
  const inputs = apiServerInputs(
    [slice('kubernetes', 'IPv4', '172.20.32.10')],
    service('10.100.0.1'),
  );
  const desired = harnessEgressPolicy('team', inputs);
  /** The policy as the API server returns it: defaults filled, empty lists left out. */
  const stored = (policy: unknown): Record<string, unknown> => ({
    ...(JSON.parse(JSON.stringify(policy)) as Record<string, unknown>),
    metadata: {
      ...(JSON.parse(JSON.stringify((policy as { metadata: object }).metadata)) as object),
      resourceVersion: '42',
      uid: 'u',
      managedFields: [{ manager: 'polychrome-control-plane' }],
    },
  });

  it('is true for what the API server returns of the same policy', () => {
    expect(isSameEgressPolicy(stored(desired), desired)).toBe(true);
    const closed = harnessEgressPolicy('team', { kind: 'closed', reason: 'r' });
    const { egress: _egress, ...withoutEgress } = closed.spec;
    expect(isSameEgressPolicy({ ...stored(closed), spec: withoutEgress }, closed)).toBe(true);
  });

  it('is false when an address moved, an except was removed, or the reason changed', () => {
    const moved = harnessEgressPolicy(
      'team',
      apiServerInputs([slice('kubernetes', 'IPv4', '172.20.32.99')], service('10.100.0.1')),
    );
    expect(isSameEgressPolicy(stored(desired), moved)).toBe(false);
    const tampered = stored(desired);
    tampered['spec'] = {
      ...desired.spec,
      egress: [
        { ports: [{ protocol: 'TCP', port: 443 }], to: [{ ipBlock: { cidr: '0.0.0.0/0' } }] },
      ],
    };
    expect(isSameEgressPolicy(tampered, desired)).toBe(false);
    const closedA = harnessEgressPolicy('team', { kind: 'closed', reason: 'a' });
    const closedB = harnessEgressPolicy('team', { kind: 'closed', reason: 'b' });
    expect(isSameEgressPolicy(stored(closedA), closedB)).toBe(false);
    expect(isSameEgressPolicy(stored(closedA), desired)).toBe(false);
  });

  it('is false when our labels are gone (the watch would no longer see it)', () => {
    const unlabelled = stored(desired);
    unlabelled['metadata'] = { name: HARNESS_EGRESS_POLICY_NAME, namespace: 'team' };
    expect(isSameEgressPolicy(unlabelled, desired)).toBe(false);
  });
});
