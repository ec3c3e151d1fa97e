import { AppError } from '../../common/errors';

/**
 * Who may call the state plane, decided from the subject of the client certificate that
 * completed the mutual TLS handshake (the handshake itself already proved the certificate
 * was signed by the Polychrome CA). No token, no header: the certificate is the identity.
 */

/** Roles a certificate can carry, in its subject O or OU. */
export const StateRole = {
  /** May read and write journals: the control plane. */
  Writer: 'polychrome:writer',
  /** May only read (Read, Head, Proof, Verify, Export, ListPartitions). */
  Verifier: 'polychrome:verifier',
} as const;
export type StateRole = (typeof StateRole)[keyof typeof StateRole];

/** The common name of the control plane's client certificate; it implies the writer role. */
export const CONTROL_PLANE_COMMON_NAME = 'polychrome-control-plane';

/** What a call needs. */
export const StateAccess = { Read: 'read', Write: 'write' } as const;
export type StateAccess = (typeof StateAccess)[keyof typeof StateAccess];

/** The caller as its certificate names it. */
export interface CallerIdentity {
  readonly commonName: string;
  readonly organizations: readonly string[];
  readonly organizationalUnits: readonly string[];
  readonly roles: ReadonlySet<StateRole>;
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
 * there is no certificate or it has no subject.
 */
export function callerIdentityOf(certificate: unknown): CallerIdentity | undefined {
  if (typeof certificate !== 'object' || certificate === null || !('subject' in certificate)) {
    return undefined;
  }
  const subject: unknown = certificate.subject;
  if (typeof subject !== 'object' || subject === null) return undefined;
  const commonName = field(subject, 'CN')[0] ?? '';
  const organizations = field(subject, 'O');
  const organizationalUnits = field(subject, 'OU');
  const roles = new Set<StateRole>();
  const claimed = new Set([...organizations, ...organizationalUnits]);
  if (commonName === CONTROL_PLANE_COMMON_NAME || claimed.has(StateRole.Writer)) {
    roles.add(StateRole.Writer);
  }
  if (claimed.has(StateRole.Verifier)) roles.add(StateRole.Verifier);
  return { commonName, organizations, organizationalUnits, roles };
}

/** The identity as one line for messages and logs: `CN=..., O=..., OU=...`. */
export function describeIdentity(identity: CallerIdentity): string {
  return [
    `CN=${identity.commonName || '(none)'}`,
    ...identity.organizations.map((o) => `O=${o}`),
    ...identity.organizationalUnits.map((u) => `OU=${u}`),
  ].join(', ');
}

/** True when `identity` may make a call that needs `access`. */
export function isAllowed(identity: CallerIdentity, access: StateAccess): boolean {
  switch (access) {
    case StateAccess.Write:
      return identity.roles.has(StateRole.Writer);
    case StateAccess.Read:
      return identity.roles.has(StateRole.Writer) || identity.roles.has(StateRole.Verifier);
  }
}

/**
 * Checks that the caller may call `method`, which needs `access`.
 *
 * @throws AppError `unauthenticated` when the call carries no client certificate (cannot
 *   happen behind the mutual TLS listener, but the check does not rely on it);
 *   `permission_denied` naming the identity, the method and the role it needs.
 */
export function authorize(
  identity: CallerIdentity | undefined,
  method: string,
  access: StateAccess,
): CallerIdentity {
  if (identity === undefined) {
    throw new AppError(
      'unauthenticated',
      `${method} needs a client certificate signed by the Polychrome CA; connect with mutual TLS`,
      { details: { method } },
    );
  }
  if (isAllowed(identity, access)) return identity;
  const needed =
    access === StateAccess.Write
      ? `role ${StateRole.Writer} (a certificate with CN ${CONTROL_PLANE_COMMON_NAME}, or O or OU ${StateRole.Writer})`
      : `role ${StateRole.Verifier} or ${StateRole.Writer} (in the certificate's O or OU)`;
  const held = identity.roles.size === 0 ? 'no Polychrome role' : [...identity.roles].join(', ');
  throw new AppError(
    'permission_denied',
    `caller "${describeIdentity(identity)}" may not call ${method}: it needs ${needed}, and ` +
      `its certificate grants ${held}; issue it a certificate with the right subject`,
    { details: { method, identity: describeIdentity(identity), needed: access } },
  );
}
