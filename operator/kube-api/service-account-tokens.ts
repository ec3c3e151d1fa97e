/**
 * An in-cluster edge's ServiceAccount token as a public-API credential (docs/kube-api.md,
 * "Edges"): a projected token with audience `polychrome`, checked by kube-apiserver with a
 * TokenReview (the control plane's system:auth-delegator binding allows it), then mapped to
 * the persona that links the identity `kubernetes:<username>`, the same identity the
 * Kubernetes door gives that ServiceAccount. Only ServiceAccounts: a person's token is for
 * kube-apiserver, and people use the door. The token is sent to kube-apiserver and nowhere
 * else; the control plane keeps no copy (the authentication cache keys by digest).
 */
import { AppError, isAppError } from '../../common/errors';
import { grantedRoles } from '../../common/persona-roles';
import type { RecordsClient } from '../../common/records-client';
import type { Authenticate } from '../public-api/auth-cache';
import { kubernetesIdentity } from './front-proxy';

/** The audience an edge's projected token must carry. */
export const POLYCHROME_TOKEN_AUDIENCE = 'polychrome';

const SERVICE_ACCOUNT_PREFIX = 'system:serviceaccount:';

/** kube-apiserver's answer to one TokenReview. */
export interface TokenReviewAnswer {
  readonly authenticated: boolean;
  readonly username: string;
  readonly audiences: readonly string[];
  readonly error: string;
}

/** Asks kube-apiserver (authentication.k8s.io/v1 TokenReview) for `audiences`. */
export type ReviewToken = (
  token: string,
  audiences: readonly string[],
  signal: AbortSignal,
) => Promise<TokenReviewAnswer>;

/**
 * The public API's authenticator for ServiceAccount tokens.
 *
 * @throws (from the returned function) AppError `unauthenticated` for a token
 *   kube-apiserver does not accept for the audience, or that is not a ServiceAccount's;
 *   `permission_denied` when no persona links the ServiceAccount's identity; `unavailable`
 *   when kube-apiserver or the records cannot be asked.
 */
export function serviceAccountAuthenticator(options: {
  readonly review: ReviewToken;
  readonly records: Pick<RecordsClient, 'findPersonaByIdentity'>;
  readonly timeoutMs?: number;
}): Authenticate {
  const timeoutMs = options.timeoutMs ?? 5_000;
  return async (token) => {
    const answer = await options.review(
      token,
      [POLYCHROME_TOKEN_AUDIENCE],
      AbortSignal.timeout(timeoutMs),
    );
    if (!answer.authenticated || !answer.audiences.includes(POLYCHROME_TOKEN_AUDIENCE)) {
      throw new AppError(
        'unauthenticated',
        `kube-apiserver did not accept the bearer token for audience "${POLYCHROME_TOKEN_AUDIENCE}"${answer.error === '' ? '' : ` (${answer.error})`}; an edge projects its ServiceAccount token with that audience, anyone else sends a session token`,
      );
    }
    if (!answer.username.startsWith(SERVICE_ACCOUNT_PREFIX)) {
      throw new AppError(
        'unauthenticated',
        `the bearer token belongs to "${answer.username}", not a ServiceAccount; people reach conversations through kubectl (api.polychrome.dev) or a session token`,
      );
    }
    const identity = kubernetesIdentity({ username: answer.username, groups: [], extra: {} });
    let persona: Awaited<ReturnType<RecordsClient['findPersonaByIdentity']>>;
    try {
      persona = await options.records.findPersonaByIdentity(identity, { timeoutMs });
    } catch (error: unknown) {
      throw new AppError(
        isAppError(error) && error.code === 'unavailable' ? 'unavailable' : 'internal',
        `could not look up the persona of ${identity}; retry shortly`,
        { cause: error },
      );
    }
    if (persona === undefined) {
      throw new AppError(
        'permission_denied',
        `ServiceAccount ${answer.username.slice(SERVICE_ACCOUNT_PREFIX.length)} has no persona: an admin links the identity ${identity} to one (docs/kube-api.md, "Edges")`,
        { details: { identity } },
      );
    }
    return {
      identity,
      identities: [...persona.identities],
      personaId: persona.id,
      // Never admin: whoever may create this account's tokens would be (persona-roles.ts).
      roles: grantedRoles(persona.identities, persona.roles),
      sessionId: '',
    };
  };
}

/**
 * Session tokens to the records, anything else to the ServiceAccount authenticator: a
 * session token has the `pcs_` prefix, a projected token is a JWT.
 */
export function eitherAuthenticator(
  sessions: Authenticate,
  serviceAccounts: Authenticate,
): Authenticate {
  return (token) => (token.startsWith('pcs_') ? sessions(token) : serviceAccounts(token));
}
