/**
 * Who a mutual TLS peer is, decided from the subject of the certificate that completed the
 * handshake (the handshake itself already proved the Polychrome CA signed it). The state
 * plane grants its roles from this (docs/state-plane.md, "Identities and roles"), and the
 * control plane's replicas accept each other by the same rule (docs/api.md, "Between
 * replicas"): both read one parser, so a certificate means the same thing to both.
 */

/** Roles a certificate can carry, in its subject O or OU. */
export const CertificateRole = {
  /** May read and write journals: the control plane. */
  Writer: 'polychrome:writer',
  /** May only read (Read, Head, Proof, Verify, Export, ListPartitions). */
  Verifier: 'polychrome:verifier',
} as const;
export type CertificateRole = (typeof CertificateRole)[keyof typeof CertificateRole];

/** The common name of the control plane's certificate; it implies the writer role. */
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
  const roles = new Set<CertificateRole>();
  const claimed = new Set([...organizations, ...organizationalUnits]);
  if (commonName === CONTROL_PLANE_COMMON_NAME || claimed.has(CertificateRole.Writer)) {
    roles.add(CertificateRole.Writer);
  }
  if (claimed.has(CertificateRole.Verifier)) roles.add(CertificateRole.Verifier);
  return { commonName, organizations, organizationalUnits, roles };
}

/**
 * True when the identity is the control plane's: the writer role, exactly what the state
 * plane requires of a journal writer. A replica that trusts another replica trusts
 * nothing the state plane does not already trust with every journal.
 */
export function isControlPlaneIdentity(identity: CertificateIdentity | undefined): boolean {
  return identity?.roles.has(CertificateRole.Writer) ?? false;
}

/** The identity as one line for messages and logs: `CN=..., O=..., OU=...`. */
export function describeCertificateIdentity(identity: CertificateIdentity): string {
  return [
    `CN=${identity.commonName || '(none)'}`,
    ...identity.organizations.map((o) => `O=${o}`),
    ...identity.organizationalUnits.map((u) => `OU=${u}`),
  ].join(', ');
}
