/**
 * What namespace onboarding installs and how it marks what is its own (docs/operator.md,
 * "Conversation namespaces"): the label an administrator sets on a Namespace, the label on
 * every object the reconciler creates, the field manager it writes with, and the names of
 * the two credential Secrets. The sandbox objects themselves come from config/sandbox
 * (sandbox-bundle.ts, generated), so their kinds, API versions and names are read from
 * there, never written here a second time.
 */
import { harnessServerName } from '../../common/harness-identity';
import { SecretName } from '../provision/catalog';
import type { LeafRequirements } from '../provision/inspect';
import type { BundleObject } from './bundle-object';
import { SANDBOX_BUNDLE } from './sandbox-bundle';

/**
 * The label on every object onboarding created. An object of one of our names without it was
 * made by someone else: it is never written over, adopted or deleted.
 */
export const ONBOARDED_LABEL = {
  key: 'app.kubernetes.io/managed-by',
  value: 'polychrome-onboarding',
} as const;

/** The field manager of every write (server-side apply and creates). */
export const ONBOARDING_FIELD_MANAGER = 'polychrome-onboarding';

/** The namespace config/sandbox names where it admits the control plane's pods. */
export const BUNDLE_CONTROL_PLANE_NAMESPACE = 'polychrome-system';

/** The credential Secrets each onboarded namespace gets (config/sandbox's template mounts them). */
export const CredentialSecret = {
  /** `approval-public-key`: the control plane's approval public key, from polychrome-approval-key. */
  Harness: 'polychrome-harness',
  /** The namespace's harness certificate, issued from polychrome-harness-ca. */
  HarnessTls: 'polychrome-harness-tls',
} as const;
export type CredentialSecret = (typeof CredentialSecret)[keyof typeof CredentialSecret];

/** The provisioner's Secrets the credentials are made from (in the control plane's namespace). */
export const CREDENTIAL_SOURCES = [SecretName.HarnessCa, SecretName.ApprovalKey] as const;

/** What the namespace's harness certificate must hold (docs/operator.md, "The harness door"). */
export function harnessLeafRequirements(namespace: string): LeafRequirements {
  return { usage: 'server', requiredDnsNames: [harnessServerName(namespace)], organizations: [] };
}

/** One object onboarding keeps in a namespace: its API version, kind and name. */
export interface ObjectRef {
  readonly apiVersion: string;
  readonly kind: string;
  readonly name: string;
}

/** `Kind name`, as messages name an object. */
export function describeRef(ref: ObjectRef): string {
  return `${ref.kind} ${ref.name}`;
}

/** A stable key of a ref, for maps. */
export function refKey(ref: ObjectRef): string {
  return `${ref.apiVersion}/${ref.kind}/${ref.name}`;
}

/** The credential Secrets as refs, in the order they are written (before the pods need them). */
export const CREDENTIAL_REFS: readonly ObjectRef[] = [
  { apiVersion: 'v1', kind: 'Secret', name: CredentialSecret.Harness },
  { apiVersion: 'v1', kind: 'Secret', name: CredentialSecret.HarnessTls },
];

/**
 * config/sandbox's objects in the order they are written: the NetworkPolicy before the
 * template, the template before the warm pool that starts pods from it.
 */
export const BUNDLE_OBJECTS: readonly BundleObject[] = [...SANDBOX_BUNDLE].sort(
  (a, b) => writeRank(a.kind) - writeRank(b.kind),
);

function writeRank(kind: string): number {
  const order = ['NetworkPolicy', 'SandboxTemplate', 'SandboxWarmPool'];
  const at = order.indexOf(kind);
  return at === -1 ? order.length : at;
}

/** Every object onboarding keeps in a namespace: the credentials, then config/sandbox's. */
export const ONBOARDED_REFS: readonly ObjectRef[] = [
  ...CREDENTIAL_REFS,
  ...BUNDLE_OBJECTS.map((o) => ({ apiVersion: o.apiVersion, kind: o.kind, name: o.metadata.name })),
];
