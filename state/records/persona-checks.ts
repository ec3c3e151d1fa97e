import { AppError } from '../../common/errors';
import { isServiceAccountIdentity, Role } from '../../common/persona-roles';
import { checkIdentity, quoteValue } from './record-input';
import { type StoredPersona } from './record-schemas';

/*
 * The rules a persona change must keep, checked before anything is written: the version
 * the caller read, known roles, no admin for a ServiceAccount, a named setter of roles, and
 * an identity index that agrees with the persona.
 */

const roleOrder: readonly Role[] = Object.values(Role);

/**
 * Throws when `expected` is given and is not the persona's version.
 *
 * @throws AppError `conflict` with the current version in details.
 */
export function checkVersion(persona: StoredPersona, expected: number | undefined): void {
  if (expected === undefined || expected === persona.version) return;
  throw new AppError(
    'conflict',
    `persona ${persona.id} is at version ${String(persona.version)}, not ` +
      `${String(expected)}: it changed since you read it; read it again and retry`,
    {
      details: {
        record: 'persona',
        personaId: persona.id,
        expectedVersion: expected,
        version: persona.version,
      },
    },
  );
}

/**
 * `roles` without repeats, in the order of {@link Role}.
 *
 * @throws AppError `invalid_argument` for a value outside {@link Role}.
 */
export function checkRoles(roles: unknown): Role[] {
  if (!Array.isArray(roles)) {
    throw new AppError(
      'invalid_argument',
      `persona roles ${quoteValue(roles)} must be a list of ${roleOrder.join(', ')}`,
      { details: { record: 'persona', field: 'roles' } },
    );
  }
  const given: unknown[] = roles;
  for (const role of given) {
    if (!roleOrder.some((known) => known === role)) {
      throw new AppError(
        'invalid_argument',
        `persona role ${quoteValue(role)} is unknown; roles are ${roleOrder.join(', ')}`,
        { details: { record: 'persona', field: 'roles' } },
      );
    }
  }
  return roleOrder.filter((role) => given.includes(role));
}

/**
 * A persona that links a ServiceAccount never holds `admin`: whoever may create tokens for
 * the account (the built-in `edit` role in its namespace can) would hold it too.
 *
 * @throws AppError `failed_precondition` naming the account and what to do.
 */
export function checkServiceAccountAdmin(
  identities: readonly string[],
  roles: readonly Role[],
  what: string,
): void {
  const account = identities.find(isServiceAccountIdentity);
  if (account === undefined || !roles.includes(Role.Admin)) return;
  throw new AppError(
    'failed_precondition',
    `${what} would link the ServiceAccount identity ${quoteValue(account)} and hold the ` +
      'admin role; anyone who may create tokens for that ServiceAccount would be an admin. ' +
      'Give the ServiceAccount its own persona without admin (edge or member)',
    { details: { record: 'persona', field: 'roles', identity: account } },
  );
}

/**
 * Who sets roles: an identity, required so that every change of roles says who made it.
 *
 * @throws AppError `invalid_argument`.
 */
export function checkSetter(value: unknown): string {
  if (value === undefined || value === '') {
    throw new AppError(
      'invalid_argument',
      'setting roles needs setBy, the identity that sets them (provider:external_id)',
      { details: { record: 'persona', field: 'setBy' } },
    );
  }
  return checkIdentity(value);
}

/** The identity index and a persona disagree: the database was damaged. */
export function indexMismatch(identity: string, personaId: string): AppError {
  return new AppError(
    'data_loss',
    `the identity index and persona ${personaId} disagree about ${quoteValue(identity)}; ` +
      'restore the state volume from a backup',
    { details: { record: 'persona', personaId, identity } },
  );
}
