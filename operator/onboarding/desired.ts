/**
 * The objects an onboarded namespace should hold, rendered without I/O: config/sandbox's
 * (sandbox-bundle.ts) fitted to the namespace, and the two credential Secrets from the
 * provisioner's sources. Also the comparison that tells whether a stored object already
 * holds what we would write.
 */
import { harnessServerName } from '../../common/harness-identity';
import type { MintedPair } from '../provision/x509-mint';
import type { BundleObject } from './bundle-object';
import {
  BUNDLE_CONTROL_PLANE_NAMESPACE,
  CredentialSecret,
  ONBOARDED_LABEL,
  type ObjectRef,
} from './catalog';

/** An object as onboarding writes it (wire JSON). */
export interface Manifest {
  readonly apiVersion: string;
  readonly kind: string;
  readonly metadata: {
    readonly name: string;
    readonly namespace: string;
    readonly labels: Readonly<Record<string, string>>;
    readonly resourceVersion?: string;
  };
  readonly [field: string]: unknown;
}

/** Where the namespace's objects point outside it. */
export interface Placement {
  /** The control plane's namespace: replaces config/sandbox's `polychrome-system`. */
  readonly controlPlaneNamespace: string;
  /** The harness image; undefined keeps config/sandbox's. */
  readonly harnessImage?: string;
}

const NAMESPACE_NAME_LABEL = 'kubernetes.io/metadata.name';

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * A copy of `value` with every `namespaceSelector` that names config/sandbox's control-plane
 * namespace pointed at `controlPlaneNamespace`, and the `harness` container's image set.
 */
function fitted(value: unknown, placement: Placement, key = ''): unknown {
  if (Array.isArray(value)) return value.map((v) => fitted(v, placement));
  if (!isRecord(value)) return value;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) out[k] = fitted(v, placement, k);
  if (key === 'matchLabels' && out[NAMESPACE_NAME_LABEL] === BUNDLE_CONTROL_PLANE_NAMESPACE) {
    out[NAMESPACE_NAME_LABEL] = placement.controlPlaneNamespace;
  }
  if (
    placement.harnessImage !== undefined &&
    out['name'] === 'harness' &&
    typeof out['image'] === 'string'
  ) {
    out['image'] = placement.harnessImage;
  }
  return out;
}

/** config/sandbox's `object` as namespace `namespace` gets it, marked as ours. */
export function desiredBundleObject(
  object: BundleObject,
  namespace: string,
  placement: Placement,
): Manifest {
  const { apiVersion, kind, metadata, ...rest } = object;
  return {
    ...(fitted(rest, placement) as Record<string, unknown>),
    apiVersion,
    kind,
    metadata: {
      name: metadata.name,
      namespace,
      labels: { ...metadata.labels, [ONBOARDED_LABEL.key]: ONBOARDED_LABEL.value },
    },
  };
}

const CREDENTIAL_LABELS = {
  'app.kubernetes.io/part-of': 'polychrome',
  'app.kubernetes.io/component': 'harness',
  [ONBOARDED_LABEL.key]: ONBOARDED_LABEL.value,
} as const;

const b64 = (text: string): string => Buffer.from(text, 'utf8').toString('base64');

/** The namespace's `polychrome-harness` Secret: the approval public key config/sandbox maps. */
export function harnessSecret(namespace: string, approvalPublicKeyHex: string): Manifest {
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: { name: CredentialSecret.Harness, namespace, labels: CREDENTIAL_LABELS },
    type: 'Opaque',
    data: { 'approval-public-key': b64(approvalPublicKeyHex) },
  };
}

/** The namespace's `polychrome-harness-tls` Secret: its certificate, and the CA bundle. */
export function harnessTlsSecret(namespace: string, leaf: MintedPair, bundle: string): Manifest {
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: { name: CredentialSecret.HarnessTls, namespace, labels: CREDENTIAL_LABELS },
    type: 'kubernetes.io/tls',
    data: {
      'ca.crt': b64(bundle),
      'tls.crt': b64(leaf.certificate),
      'tls.key': b64(leaf.privateKey),
    },
  };
}

/** The subject the namespace's harness certificate is issued for. */
export function harnessLeafSubject(namespace: string): { commonName: string; dnsNames: string[] } {
  const name = harnessServerName(namespace);
  return { commonName: name, dnsNames: [name] };
}

/** The ref of a manifest. */
export function refOf(manifest: Manifest): ObjectRef {
  return { apiVersion: manifest.apiVersion, kind: manifest.kind, name: manifest.metadata.name };
}

/**
 * True when `stored` holds every field of `desired` with the same value (fields the API
 * server or another manager added are ignored; lists must match item by item). Metadata is
 * compared by labels only.
 */
export function holds(stored: unknown, desired: Manifest): boolean {
  if (!isRecord(stored)) return false;
  const { metadata, ...fields } = desired;
  const storedMeta = isRecord(stored['metadata']) ? stored['metadata'] : {};
  return contains(storedMeta['labels'], metadata.labels) && contains(stored, fields);
}

function contains(stored: unknown, desired: unknown): boolean {
  if (Array.isArray(desired)) {
    return (
      Array.isArray(stored) &&
      stored.length === desired.length &&
      desired.every((d, i) => contains(stored[i], d))
    );
  }
  if (isRecord(desired)) {
    return isRecord(stored) && Object.entries(desired).every(([k, v]) => contains(stored[k], v));
  }
  return stored === desired;
}

/**
 * `desired` without the fields `answer` lacks: what the API server keeps of it. `answer` is
 * the server's object after a dry-run merge patch of `desired`, so every field of `desired`
 * is in it unless the server drops it, as a custom resource's server drops a field its CRD
 * does not declare (an agent-sandbox older than the field). Server-side apply refuses such a
 * field instead of dropping it, and comparing it with the stored object would find it
 * missing on every pass: onboarding compares and writes this instead. Lists are taken item
 * by item (a merge patch replaces a list with ours, in our order).
 */
export function keptBy(desired: Manifest, answer: unknown): Manifest {
  return kept(desired, answer) as Manifest;
}

function kept(desired: unknown, answer: unknown): unknown {
  if (Array.isArray(desired)) {
    const items = Array.isArray(answer) ? (answer as unknown[]) : [];
    return desired.map((d, i) => kept(d, items[i]));
  }
  if (!isRecord(desired)) return desired;
  const there = isRecord(answer) ? answer : {};
  return Object.fromEntries(
    Object.entries(desired)
      .filter(([k]) => k in there)
      .map(([k, v]) => [k, kept(v, there[k])]),
  );
}

/** The dotted paths of the fields of `desired` that `servable` (its `keptBy`) lacks. */
export function droppedFields(desired: unknown, servable: unknown, at = ''): string[] {
  if (Array.isArray(desired)) {
    const items = Array.isArray(servable) ? (servable as unknown[]) : [];
    return desired.flatMap((d, i) => droppedFields(d, items[i], `${at}[${i}]`));
  }
  if (!isRecord(desired)) return [];
  const there = isRecord(servable) ? servable : {};
  return Object.entries(desired).flatMap(([k, v]) =>
    k in there
      ? droppedFields(v, there[k], at === '' ? k : `${at}.${k}`)
      : [at === '' ? k : `${at}.${k}`],
  );
}
