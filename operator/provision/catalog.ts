/**
 * What the provisioner keeps in the control plane's namespace (docs/operator.md,
 * "Installing: what the operator provisions"): the names of the Secrets, the keys each
 * holds, the certificates' subjects and how long they live. Constants and pure functions
 * only; plan.ts decides from them.
 */
import { CertificateRole, CONTROL_PLANE_COMMON_NAME } from '../../common/certificate-identity';
import type { LeafUsage } from './x509-mint';

/** The label that marks a Secret as the provisioner's own: it renews only those. */
export const PROVISIONED_LABEL = { key: 'app.kubernetes.io/managed-by', value: 'polychrome' };

/** The Secrets the provisioner creates when absent, CAs first. */
export const SecretName = {
  /** The Polychrome CA of the state plane's mTLS: `tls.crt`, `tls.key`, `ca.crt` (trust bundle). */
  StateCa: 'polychrome-state-ca',
  /** The state plane's server certificate: `ca.crt`, `tls.crt`, `tls.key`. */
  StateTls: 'polychrome-state-tls',
  /** The control plane's client (and peer) certificate: `ca.crt`, `tls.crt`, `tls.key`. */
  ControlPlaneTls: 'polychrome-control-plane-tls',
  /** The journal signing key: `signing-key`, ed25519 PKCS#8 PEM. */
  SigningKey: 'polychrome-state-signing-key',
  /** The records key: `records-key`, 64 hex digits. */
  RecordsKey: 'polychrome-state-records-key',
  /** The harness CA: `ca.crt` (trust bundle), and `tls.crt`, `tls.key` to issue harness certificates. */
  HarnessCa: 'polychrome-harness-ca',
  /** The approval key: `key.pem` (ed25519 PKCS#8 PEM) and `public-key` (64 hex digits). */
  ApprovalKey: 'polychrome-approval-key',
} as const;
export type SecretName = (typeof SecretName)[keyof typeof SecretName];

/** Every provisioned Secret, in the order a pass handles them (a CA before its leaves). */
export const SECRET_NAMES: readonly SecretName[] = Object.values(SecretName);

/** The CAs, and the common name each gets when the provisioner makes it. */
export const CA_COMMON_NAMES = {
  [SecretName.StateCa]: 'Polychrome state CA',
  [SecretName.HarnessCa]: 'Polychrome harness CA',
} as const;
export type CaName = keyof typeof CA_COMMON_NAMES;

/** A leaf certificate the provisioner issues, and what it must hold to be valid. */
export interface LeafSpec {
  readonly name: SecretName;
  readonly ca: CaName;
  readonly commonName: string;
  readonly organizations: readonly string[];
  /** Names the certificate is issued for. */
  readonly dnsNames: readonly string[];
  /** Names a certificate brought by the user must cover (a subset of dnsNames). */
  readonly requiredDnsNames: readonly string[];
  readonly usage: LeafUsage;
}

/** The five roles of the control plane's certificate (docs/state-plane.md, "Identities and roles"). */
export const CONTROL_PLANE_ROLES: readonly string[] = [
  CertificateRole.Writer,
  CertificateRole.Repair,
  CertificateRole.Erase,
  CertificateRole.Retire,
  CertificateRole.ControlPlaneReplica,
];

/** The leaves in `namespace`: the state plane's server certificate and the control plane's. */
export function leafSpecs(namespace: string): readonly LeafSpec[] {
  const service = `polychrome-state.${namespace}.svc`;
  return [
    {
      name: SecretName.StateTls,
      ca: SecretName.StateCa,
      commonName: 'polychrome-state',
      organizations: [],
      dnsNames: [
        'polychrome-state',
        `polychrome-state.${namespace}`,
        service,
        `${service}.cluster.local`,
        `polychrome-state-0.polychrome-state-headless.${namespace}.svc`,
      ],
      // What the control plane dials (config/control-plane: polychrome-state.$(POD_NAMESPACE).svc).
      requiredDnsNames: [service],
      usage: 'server',
    },
    {
      name: SecretName.ControlPlaneTls,
      ca: SecretName.StateCa,
      commonName: CONTROL_PLANE_COMMON_NAME,
      organizations: CONTROL_PLANE_ROLES,
      dnsNames: [],
      requiredDnsNames: [],
      // Replicas also present it to each other on the peer port.
      usage: 'both',
    },
  ];
}

/** How long what the provisioner mints is valid; it renews at two thirds of that. */
export interface Lifetimes {
  readonly caMs: number;
  readonly leafMs: number;
}

const DAY_MS = 86_400_000;

/** Ten years for a CA, one year for a leaf. */
export const DEFAULT_LIFETIMES: Lifetimes = { caMs: 3650 * DAY_MS, leafMs: 365 * DAY_MS };

/** When a certificate valid from `notBefore` to `notAfter` is renewed: at two thirds. */
export function renewAt(notBefore: Date, notAfter: Date): Date {
  return new Date(notBefore.getTime() + ((notAfter.getTime() - notBefore.getTime()) * 2) / 3);
}
