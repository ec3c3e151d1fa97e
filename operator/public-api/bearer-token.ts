import { ApiError, bearerChallenge } from './api-error';

/**
 * Longest bearer token accepted before asking anyone: session tokens are 47 characters, a
 * ServiceAccount's projected token (a JWT, docs/kube-api.md, "Edges") about 1 000.
 */
const MAX_TOKEN_CHARS = 4096;
/** RFC 6750 `b64token`. */
const TOKEN_PATTERN = /^[A-Za-z0-9\-._~+/]+=*$/u;

/**
 * The token of an `Authorization: Bearer <token>` header. Only the shape is checked here;
 * whether the token is a live session is the authenticator's question.
 *
 * @throws ApiError 401 `unauthenticated` with a `WWW-Authenticate: Bearer` challenge when
 *   the header is missing, not the Bearer scheme, or the token is malformed.
 */
export function parseBearerToken(header: string | undefined): string {
  if (header === undefined || header.trim() === '') {
    throw new ApiError(
      'unauthenticated',
      'this route needs a session token: send "Authorization: Bearer <token>" ' +
        '(docs/api.md, "Authentication", says how to get one)',
      { headers: { 'www-authenticate': bearerChallenge() } },
    );
  }
  const match = /^Bearer +(\S+) *$/iu.exec(header);
  const token = match?.[1];
  if (token === undefined || token.length > MAX_TOKEN_CHARS || !TOKEN_PATTERN.test(token)) {
    throw new ApiError(
      'unauthenticated',
      'the Authorization header is malformed: expected "Bearer <token>" with one session token',
      { headers: { 'www-authenticate': bearerChallenge('invalid_request') } },
    );
  }
  return token;
}
