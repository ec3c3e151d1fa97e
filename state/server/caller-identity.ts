import {
  certificateIdentityOf,
  CertificateRole,
  describeCertificateIdentity,
  describeRoles,
  type CertificateIdentity,
} from '../../common/certificate-identity';
import { AppError } from '../../common/errors';

/**
 * Who may call the state plane, decided from the subject of the client certificate that
 * completed the mutual TLS handshake (the handshake itself already proved the certificate
 * was signed by the Polychrome CA). No token, no header: the certificate is the identity.
 * The subject is parsed in common/certificate-identity.ts, which the control plane's
 * replicas also use to accept each other; which roles each RPC needs is rpc-roles.ts.
 */

/** Roles a certificate can carry, in its subject O or OU (common/certificate-identity.ts). */
export const StateRole = CertificateRole;
export type StateRole = CertificateRole;

/** The caller as its certificate names it. */
export type CallerIdentity = CertificateIdentity;

/** Reads the identity from a peer certificate (common/certificate-identity.ts). */
export const callerIdentityOf = certificateIdentityOf;

/** The identity as one line for messages and logs: `CN=..., O=..., OU=...`. */
export const describeIdentity = describeCertificateIdentity;

/** True when `identity` holds one of `roles`. */
export function isAllowed(identity: CallerIdentity, roles: readonly StateRole[]): boolean {
  return roles.some((role) => identity.roles.has(role));
}

/**
 * Checks that the caller may call `method`, which needs one of `roles` (rpc-roles.ts).
 *
 * @throws AppError `unauthenticated` when the call carries no client certificate (cannot
 *   happen behind the mutual TLS listener, but the check does not rely on it);
 *   `permission_denied` naming the identity, the method, the roles it needs and the roles
 *   the certificate holds.
 */
export function authorize(
  identity: CallerIdentity | undefined,
  method: string,
  roles: readonly StateRole[],
): CallerIdentity {
  if (identity === undefined) {
    throw new AppError(
      'unauthenticated',
      `${method} needs a client certificate signed by the Polychrome CA; connect with mutual TLS`,
      { details: { method } },
    );
  }
  if (isAllowed(identity, roles)) return identity;
  const needed =
    roles.length === 0
      ? 'a role no certificate can hold (the method has no entry in the role table)'
      : `role ${roles.join(' or ')} (in the certificate's O or OU)`;
  throw new AppError(
    'permission_denied',
    `caller "${describeIdentity(identity)}" may not call ${method}: it needs ${needed}, and ` +
      `its certificate holds ${describeRoles(identity.roles)}; use a certificate issued ` +
      'with that role',
    {
      details: {
        method,
        identity: describeIdentity(identity),
        needed: roles.join(','),
        held: [...identity.roles].sort().join(','),
      },
    },
  );
}
