/**
 * The fields of a JSON body on the Kubernetes door's cluster-scoped resources (sessions,
 * personaroles): each helper names what was wrong and what to send instead. Pure.
 */
import { AppError } from '../../common/errors';
import { isIdentity } from '../../common/identity';

/** An `invalid_argument` error naming `field`. */
export function invalid(message: string, field: string): AppError {
  return new AppError('invalid_argument', message, { details: { field } });
}

/** The body as an object of fields; `example` shows a good one. */
export function objectBody(body: unknown, example: string): Record<string, unknown> {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw invalid(`the body must be a JSON object such as ${example}`, '');
  }
  return body as Record<string, unknown>;
}

/** Refuses fields outside `known`, naming them all; `takes` says what is taken. */
export function rejectUnknown(
  fields: Record<string, unknown>,
  known: ReadonlySet<string>,
  takes: string,
): void {
  const unknown = Object.keys(fields).filter((k) => !known.has(k));
  if (unknown.length === 0) return;
  throw invalid(
    `unknown field${unknown.length === 1 ? '' : 's'} ${unknown.map((k) => `"${k}"`).join(', ')}; ${takes}`,
    unknown[0] ?? '',
  );
}

/** The `persona` field: an identity. */
export function identityField(persona: unknown): string {
  if (isIdentity(persona)) return persona;
  throw invalid(
    `persona must be an identity such as "bot:support-desk" (provider:external_id), got ${JSON.stringify(persona)}`,
    'persona',
  );
}
