/**
 * Who a mutual TLS peer is, decided from the subject of the certificate that completed the
 * handshake (the handshake itself already proved the Polychrome CA signed it). The state
 * plane grants its roles from this (docs/state-plane.md, "Identities and roles"), and the
 * control plane's replicas accept each other by the same rule (docs/api.md, "Between
 * replicas"): both read one parser, so a certificate means the same thing to both.
 */

/**
 * Roles a certificate can carry, each named in its subject O or OU. Nothing else grants a
 * role (not the CN), and no role implies another: a certificate has exactly the roles it
 * names. Which RPC needs which role is one table, state/server/rpc-roles.ts.
 */
export const CertificateRole = {
  /** Appends and reads journals, and the records the control plane's own code uses. */
  Writer: 'polychrome:writer',
  /** Reads only: Read, Head, Proof, Verify, Export, ListPartitions. */
  Verifier: 'polychrome:verifier',
  /** Repair: excises unreadable journal entries. */
  Repair: 'polychrome:repair',
  /** Retire: removes a deleted conversation's journal partition (docs/state-plane.md). */
  Retire: 'polychrome:retire',
  /** Erasure: excises readable journal entries an admin asked to erase. */
  Erase: 'polychrome:erase',
  /** Backup: reads every journal and record at once, for a backup file (docs/state-plane.md). */
  Backup: 'polychrome:backup',
  /** Every Records RPC: personas, sessions, credentials, ceremonies. */
  RecordsAdmin: 'polychrome:records-admin',
  /**
   * A control-plane replica on the peer port (docs/api.md, "Between replicas"): it may
   * claim a caller there. The state plane grants it nothing, and no state-plane role
   * implies it.
   */
  ControlPlaneReplica: 'polychrome:control-plane-replica',
} as const;
export type CertificateRole = (typeof CertificateRole)[keyof typeof CertificateRole];

const ROLES: ReadonlySet<string> = new Set(Object.values(CertificateRole));

function isCertificateRole(value: string): value is CertificateRole {
  return ROLES.has(value);
}

/**
 * The common name of the control plane's shipped certificate. A name for logs and
 * messages only: it grants no role, a certificate's roles are its O and OU.
 */
export const CONTROL_PLANE_COMMON_NAME = 'polychrome-control-plane';

/** A peer as its certificate names it. */
export interface CertificateIdentity {
  readonly commonName: string;
  readonly organizations: readonly string[];
  readonly organizationalUnits: readonly string[];
  readonly roles: ReadonlySet<CertificateRole>;
}

function strings(value: unknown): string[] {
  if (typeof value === 'string') return [value];
  if (Array.isArray(value)) return value.filter((v): v is string => typeof v === 'string');
  return [];
}

function field(subject: object, name: string): string[] {
  return name in subject ? strings(Reflect.get(subject, name)) : [];
}

/**
 * Reads the identity from a peer certificate as node:tls reports it
 * (`TLSSocket.getPeerCertificate()`: `subject.CN`, `subject.O`, `subject.OU`, each a
 * string, or an array when the subject repeats the attribute). Returns `undefined` when
 * there is no certificate or it has no subject (node:tls reports a missing certificate
 * as an empty object).
 */
export function certificateIdentityOf(certificate: unknown): CertificateIdentity | undefined {
  if (typeof certificate !== 'object' || certificate === null || !('subject' in certificate)) {
    return undefined;
  }
  const subject: unknown = certificate.subject;
  if (typeof subject !== 'object' || subject === null) return undefined;
  const commonName = field(subject, 'CN')[0] ?? '';
  const organizations = field(subject, 'O');
  const organizationalUnits = field(subject, 'OU');
  const roles = new Set([...organizations, ...organizationalUnits].filter(isCertificateRole));
  return { commonName, organizations, organizationalUnits, roles };
}

/**
 * True when the identity is a control-plane replica's: the role
 * {@link CertificateRole.ControlPlaneReplica}, which only the control plane's own
 * certificate carries. A certificate with only state-plane roles (a writer, a records
 * admin, a verifier, a repair tool) is not a replica and may not claim a caller.
 */
export function isControlPlaneReplica(identity: CertificateIdentity | undefined): boolean {
  return identity?.roles.has(CertificateRole.ControlPlaneReplica) ?? false;
}

/** The roles as a sorted list for messages: `polychrome:a, polychrome:b`, or `no Polychrome role`. */
export function describeRoles(roles: Iterable<string>): string {
  const list = [...roles].sort();
  return list.length === 0 ? 'no Polychrome role' : list.join(', ');
}

/** The identity as one line for messages and logs: `CN=..., O=..., OU=...`. */
export function describeCertificateIdentity(identity: CertificateIdentity): string {
  return [
    `CN=${identity.commonName || '(none)'}`,
    ...identity.organizations.map((o) => `O=${o}`),
    ...identity.organizationalUnits.map((u) => `OU=${u}`),
  ].join(', ');
}
