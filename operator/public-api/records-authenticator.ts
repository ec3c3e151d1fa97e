import { AppError, isAppError } from '../../common/errors';
import { grantedRoles } from '../../common/persona-roles';
import type { RecordsClient } from '../../common/records-client';
import type { Caller } from '../turns/turn-service';
import type { Authenticate } from './auth-cache';

/** Deadline of one token check. @default 5000 */
export const DEFAULT_AUTHENTICATE_TIMEOUT_MS = 5_000;

/**
 * The public API's authenticator over the state plane's records (`Authenticate` RPC): the
 * one place that knows a bearer token is a records session token. The caller's identity is
 * the persona's first identity (identities are sorted), `identities` all of them.
 * Failures are classified here, once:
 *   - `unauthenticated` / `invalid_argument` from the records: the token is malformed,
 *     unknown, expired or revoked → `unauthenticated`;
 *   - `unavailable` / `deadline_exceeded` (state plane down or slow) → `unavailable`;
 *   - a persona without any identity → `permission_denied` (nothing to attribute turns to);
 *   - anything else (e.g. this replica's certificate lacks the writer role) → `internal`,
 *     the original as `cause` for the log.
 *
 * @param records anything with RecordsClient's `authenticate` (tests pass their own).
 */
export function recordsAuthenticator(
  records: Pick<RecordsClient, 'authenticate'>,
  options: { readonly timeoutMs?: number } = {},
): Authenticate {
  const timeoutMs = options.timeoutMs ?? DEFAULT_AUTHENTICATE_TIMEOUT_MS;
  return async (token: string): Promise<Caller> => {
    let found: Awaited<ReturnType<RecordsClient['authenticate']>>;
    try {
      found = await records.authenticate(token, { timeoutMs });
    } catch (error) {
      throw classify(error);
    }
    const { session, persona } = found;
    const identity = persona.identities[0];
    if (identity === undefined) {
      throw new AppError(
        'permission_denied',
        `persona ${persona.id} has no linked identity, so nothing can be attributed to it; ` +
          'link an identity to the persona, then retry',
        { details: { personaId: persona.id } },
      );
    }
    return {
      identity,
      identities: [...persona.identities],
      personaId: persona.id,
      // A ServiceAccount's persona never acts as admin, even from an old record.
      roles: grantedRoles(persona.identities, persona.roles),
      sessionId: session.id,
    };
  };
}

function classify(error: unknown): AppError {
  if (isAppError(error)) {
    switch (error.code) {
      case 'unauthenticated':
      case 'invalid_argument':
        return new AppError(
          'unauthenticated',
          'the bearer token is malformed, unknown, expired or revoked; get a new session token',
          { cause: error },
        );
      case 'unavailable':
      case 'deadline_exceeded':
        return new AppError(
          'unavailable',
          'the session token cannot be checked right now (the state plane is not reachable); retry shortly',
          { cause: error },
        );
      default:
        break;
    }
  }
  return new AppError('internal', 'checking the session token failed; see the cause', {
    cause: error,
  });
}
