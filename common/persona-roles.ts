/**
 * Roles a persona can hold (docs/api.md, "Authentication"): the state plane stores them
 * with the persona, the control plane decides with them.
 */
export const Role = {
  /** May use every conversation and answer approvals. */
  Admin: 'admin',
  Member: 'member',
  /** A front end that connects people (chat bot, web app): the only sender of directives. */
  Edge: 'edge',
} as const;
export type Role = (typeof Role)[keyof typeof Role];

/**
 * The identity prefix of every Kubernetes ServiceAccount (`kubernetesIdentityOf` of
 * `system:serviceaccount:NS:NAME`), lower-cased: compare with {@link isServiceAccountIdentity}.
 */
const SERVICE_ACCOUNT_IDENTITY_PREFIX = 'kubernetes:system%3aserviceaccount%3a';

/**
 * True for the identity of a Kubernetes ServiceAccount. Anyone who may create tokens for
 * that account (the built-in `edit` role in its namespace can) acts as it, so a persona
 * that links one never holds {@link Role.Admin} (docs/api.md, "Authentication").
 */
export function isServiceAccountIdentity(identity: string): boolean {
  return identity.toLowerCase().startsWith(SERVICE_ACCOUNT_IDENTITY_PREFIX);
}

/**
 * The roles a caller of a persona with `identities` gets from `roles`: all of them, except
 * `admin` when any identity is a ServiceAccount's. The records refuse to store that
 * combination; this drops it from a record written before they did (deny by default).
 */
export function grantedRoles<R extends string>(
  identities: readonly string[],
  roles: readonly R[],
): R[] {
  return identities.some(isServiceAccountIdentity)
    ? roles.filter((role) => role !== Role.Admin)
    : [...roles];
}
