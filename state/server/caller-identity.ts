import {
  certificateIdentityOf,
  CertificateRole,
  CONTROL_PLANE_COMMON_NAME,
  describeCertificateIdentity,
  type CertificateIdentity,
} from '../../common/certificate-identity';
import { AppError } from '../../common/errors';

/**
 * Who may call the state plane, decided from the subject of the client certificate that
 * completed the mutual TLS handshake (the handshake itself already proved the certificate
 * was signed by the Polychrome CA). No token, no header: the certificate is the identity.
 * The subject is parsed in common/certificate-identity.ts, which the control plane's
 * replicas also use to accept each other.
 */

/** Roles a certificate can carry, in its subject O or OU (common/certificate-identity.ts). */
export const StateRole = CertificateRole;
export type StateRole = CertificateRole;
export { CONTROL_PLANE_COMMON_NAME };

/** What a call needs. */
export const StateAccess = { Read: 'read', Write: 'write' } as const;
export type StateAccess = (typeof StateAccess)[keyof typeof StateAccess];

/** The caller as its certificate names it. */
export type CallerIdentity = CertificateIdentity;

/** Reads the identity from a peer certificate (common/certificate-identity.ts). */
export const callerIdentityOf = certificateIdentityOf;

/** The identity as one line for messages and logs: `CN=..., O=..., OU=...`. */
export const describeIdentity = describeCertificateIdentity;

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
