/**
 * The harness egress NetworkPolicy the control plane writes into every namespace that holds
 * Conversations (docs/operator.md, "Harness egress"). Pure: the `kubernetes` Service and
 * its EndpointSlices in, the API server's addresses out; those addresses and a namespace
 * in, the NetworkPolicy out.
 *
 * The policy allows TCP 443 to every address except the API server's: each endpoint
 * address of the `kubernetes` Service (a /32 or /128) and the Service's ClusterIP(s). Both,
 * because CNIs differ in when they evaluate egress policy: some after kube-proxy's DNAT
 * (they see the endpoint address), some before it, or with the Service translated at
 * connect time (they see the ClusterIP). On a managed cluster the API server listens on
 * 443, so without the exclusion a harness could reach it on the port the policy opens for
 * the model API. When the addresses cannot be known (no permission to read them, none
 * listed, a form an ipBlock cannot hold) the policy opens nothing: it fails closed.
 */
import { isIPv4, isIPv6 } from 'node:net';
import { isPlainObject } from '../api/v1alpha1/schema-check';
import { ChildLabel, FIELD_MANAGER } from './child-meta';

/** The name of the policy in each conversation namespace. */
export const HARNESS_EGRESS_POLICY_NAME = 'polychrome-harness-egress';

/**
 * The labels harness pods carry on both backends: the SandboxTemplate's podTemplate
 * (config/sandbox) and `childLabels` (pod backend). config/sandbox's static policy selects
 * the same pods.
 */
export const HARNESS_POD_SELECTOR: Readonly<Record<string, string>> = Object.freeze({
  [ChildLabel.Name]: 'polychrome-harness',
  [ChildLabel.PartOf]: 'polychrome',
});

/** Labels on the policy; the control plane watches policies by these. */
export const HARNESS_EGRESS_LABELS: Readonly<Record<string, string>> = Object.freeze({
  [ChildLabel.Name]: HARNESS_EGRESS_POLICY_NAME,
  [ChildLabel.PartOf]: 'polychrome',
  [ChildLabel.ManagedBy]: FIELD_MANAGER,
});

/** Annotation on a policy that opens nothing, saying why (`kubectl describe` shows it). */
export const EGRESS_CLOSED_ANNOTATION = 'polychrome.dev/egress-closed';

/** Where a cluster publishes its API server's addresses. */
export const KubernetesService = {
  namespace: 'default',
  name: 'kubernetes',
  /** The label every EndpointSlice of the Service carries. */
  sliceLabel: 'kubernetes.io/service-name',
} as const;

/** The HTTPS port the policy opens. */
export const HTTPS_PORT = 443;

/**
 * Cloud metadata and host-agent addresses excluded as well. They serve on port 80 (and
 * other ports), which the policy never opens; they are excluded from 443 too because a
 * turn needs nothing there and the credentials they hand out must never reach a harness:
 * link-local 169.254.0.0/16 (AWS, GCP, Azure, Oracle and DigitalOcean metadata at
 * 169.254.169.254, AWS's container and pod identity agents at 169.254.170.x), Alibaba
 * Cloud's 100.100.100.200, Azure's WireServer 168.63.129.16; for IPv6, link-local
 * fe80::/10 and AWS's metadata fd00:ec2::254 and pod identity agent fd00:ec2::23.
 */
export const METADATA_EXCEPTIONS = {
  ipv4: ['100.100.100.200/32', '168.63.129.16/32', '169.254.0.0/16'],
  ipv6: ['fd00:ec2::23/128', 'fd00:ec2::254/128', 'fe80::/10'],
} as const;

/** The API server's addresses, canonical, each family sorted: endpoints and ClusterIPs. */
export interface ApiServerAddresses {
  readonly ipv4: readonly string[];
  readonly ipv6: readonly string[];
}

/** What the policy is rendered from: the addresses, or why they are not known. */
export type EgressInputs =
  | { readonly kind: 'known'; readonly addresses: ApiServerAddresses }
  | { readonly kind: 'closed'; readonly reason: string };

/** A NetworkPolicy as sent to the API server (networking.k8s.io/v1). */
export interface NetworkPolicyManifest {
  apiVersion: 'networking.k8s.io/v1';
  kind: 'NetworkPolicy';
  metadata: {
    name: string;
    namespace: string;
    labels: Record<string, string>;
    annotations?: Record<string, string>;
    resourceVersion?: string;
  };
  spec: {
    podSelector: { matchLabels: Record<string, string> };
    policyTypes: ['Egress'];
    egress: {
      ports: { protocol: 'TCP'; port: number }[];
      to: { ipBlock: { cidr: string; except: string[] } }[];
    }[];
  };
}

const SERVICE_REF = `Service ${KubernetesService.namespace}/${KubernetesService.name}`;
const SLICES_REF = `EndpointSlices labelled ${KubernetesService.sliceLabel}=${KubernetesService.name} in namespace ${KubernetesService.namespace}`;

/** An address in the form a NetworkPolicy keeps, or undefined when it is none. */
function canonicalAddress(value: unknown): { family: 'ipv4' | 'ipv6'; ip: string } | undefined {
  if (typeof value !== 'string') return undefined;
  if (isIPv4(value)) return { family: 'ipv4', ip: value };
  if (!isIPv6(value) || value.includes('%')) return undefined;
  // The URL serializer compresses and lowercases as RFC 5952 (and Go's netip) print.
  return { family: 'ipv6', ip: new URL(`http://[${value}]/`).hostname.slice(1, -1) };
}

/** The endpoint addresses of one EndpointSlice, or the reason it cannot be used. */
function sliceAddresses(slice: unknown): { addresses: unknown[] } | { problem: string } {
  const name =
    isPlainObject(slice) && isPlainObject(slice['metadata'])
      ? slice['metadata']['name']
      : undefined;
  const ref = `EndpointSlice ${KubernetesService.namespace}/${typeof name === 'string' ? name : '?'}`;
  if (!isPlainObject(slice)) return { problem: `${ref} is not an object` };
  const type = slice['addressType'];
  if (type !== 'IPv4' && type !== 'IPv6') {
    return {
      problem: `${ref} has addressType ${String(type)}: only IP addresses can be excluded from an ipBlock`,
    };
  }
  const endpoints = Array.isArray(slice['endpoints']) ? slice['endpoints'] : [];
  // Every endpoint, ready or not: one that becomes ready must already be excluded.
  return {
    addresses: endpoints.flatMap((e: unknown) =>
      isPlainObject(e) && Array.isArray(e['addresses']) ? (e['addresses'] as unknown[]) : [],
    ),
  };
}

/** The `kubernetes` Service's ClusterIPs (`spec.clusterIPs`, else `spec.clusterIP`). */
function clusterIPsOf(service: unknown): unknown[] | undefined {
  if (!isPlainObject(service) || !isPlainObject(service['spec'])) return undefined;
  const spec = service['spec'];
  const listed: unknown = spec['clusterIPs'];
  const ips: unknown[] = Array.isArray(listed) ? listed : [spec['clusterIP']];
  return ips.filter((ip) => ip !== undefined && ip !== '' && ip !== 'None');
}

/**
 * The API server's addresses from the `kubernetes` Service (`service`; undefined when it
 * does not exist) and the EndpointSlices labelled with its name. Closed, with the reason,
 * when the Service is missing, no slice lists an address, a slice holds names (FQDN) or
 * something that is not an IP address: an address that cannot be excluded must not be
 * left reachable.
 */
export function apiServerInputs(slices: readonly unknown[], service: unknown): EgressInputs {
  const clusterIPs = clusterIPsOf(service);
  if (clusterIPs === undefined) {
    return { kind: 'closed', reason: `${SERVICE_REF} was not found` };
  }
  const raw: unknown[] = [...clusterIPs];
  let endpointCount = 0;
  for (const slice of slices) {
    const found = sliceAddresses(slice);
    if ('problem' in found) return { kind: 'closed', reason: found.problem };
    endpointCount += found.addresses.length;
    raw.push(...found.addresses);
  }
  if (endpointCount === 0) {
    return { kind: 'closed', reason: `no ${SLICES_REF} lists an address` };
  }
  const ipv4 = new Set<string>();
  const ipv6 = new Set<string>();
  for (const value of raw) {
    const address = canonicalAddress(value);
    if (address === undefined) {
      return {
        kind: 'closed',
        reason: `${JSON.stringify(value)} in the ${SLICES_REF} or the ${SERVICE_REF} is not an IP address`,
      };
    }
    (address.family === 'ipv4' ? ipv4 : ipv6).add(address.ip);
  }
  return { kind: 'known', addresses: { ipv4: [...ipv4].sort(), ipv6: [...ipv6].sort() } };
}

/**
 * The harness egress policy of `namespace`. Known addresses: TCP 443 to 0.0.0.0/0 except
 * each IPv4 address (/32) and {@link METADATA_EXCEPTIONS}, and, when the API server has an
 * IPv6 address, to ::/0 likewise (an IPv4-only API server gets no IPv6 rule: IPv6 443 stays
 * closed). Closed: no egress rule at all, the reason in {@link EGRESS_CLOSED_ANNOTATION}.
 * It adds to config/sandbox's policy (DNS and the ingress rules); NetworkPolicies add up.
 */
export function harnessEgressPolicy(
  namespace: string,
  inputs: EgressInputs,
): NetworkPolicyManifest {
  const metadata: NetworkPolicyManifest['metadata'] = {
    name: HARNESS_EGRESS_POLICY_NAME,
    namespace,
    labels: { ...HARNESS_EGRESS_LABELS },
    ...(inputs.kind === 'closed'
      ? { annotations: { [EGRESS_CLOSED_ANNOTATION]: inputs.reason } }
      : {}),
  };
  const to: NetworkPolicyManifest['spec']['egress'][number]['to'] = [];
  if (inputs.kind === 'known') {
    const { ipv4, ipv6 } = inputs.addresses;
    to.push({
      ipBlock: {
        cidr: '0.0.0.0/0',
        except: [...ipv4.map((ip) => `${ip}/32`), ...METADATA_EXCEPTIONS.ipv4],
      },
    });
    if (ipv6.length > 0) {
      to.push({
        ipBlock: {
          cidr: '::/0',
          except: [...ipv6.map((ip) => `${ip}/128`), ...METADATA_EXCEPTIONS.ipv6],
        },
      });
    }
  }
  return {
    apiVersion: 'networking.k8s.io/v1',
    kind: 'NetworkPolicy',
    metadata,
    spec: {
      podSelector: { matchLabels: { ...HARNESS_POD_SELECTOR } },
      policyTypes: ['Egress'],
      egress: to.length === 0 ? [] : [{ ports: [{ protocol: 'TCP', port: HTTPS_PORT }], to }],
    },
  };
}

/**
 * Whether the stored policy `existing` already is `desired`: the same spec, our labels and
 * the same closed-reason annotation. Empty lists and maps count as absent (the API server
 * leaves them out).
 */
export function isSameEgressPolicy(existing: unknown, desired: NetworkPolicyManifest): boolean {
  if (!isPlainObject(existing) || !isPlainObject(existing['metadata'])) return false;
  const meta = existing['metadata'];
  const labels = isPlainObject(meta['labels']) ? meta['labels'] : {};
  if (Object.entries(desired.metadata.labels).some(([k, v]) => labels[k] !== v)) return false;
  const annotations = isPlainObject(meta['annotations']) ? meta['annotations'] : {};
  if (
    annotations[EGRESS_CLOSED_ANNOTATION] !==
    desired.metadata.annotations?.[EGRESS_CLOSED_ANNOTATION]
  ) {
    return false;
  }
  return stable(existing['spec']) === stable(desired.spec);
}

/** JSON with sorted keys and without empty lists, maps and undefined values. */
function stable(value: unknown): string {
  return JSON.stringify(pruned(value)) ?? '';
}

function pruned(value: unknown): unknown {
  if (Array.isArray(value)) {
    const items = value.map(pruned);
    return items.length === 0 ? undefined : items;
  }
  if (!isPlainObject(value)) return value;
  const out: Record<string, unknown> = {};
  for (const key of Object.keys(value).sort()) {
    const v = pruned(value[key]);
    if (v !== undefined) out[key] = v;
  }
  return Object.keys(out).length === 0 ? undefined : out;
}
