/**
 * The forensic requests as the API receives them: the actor, and the bodies of repair,
 * resolve, accept-rollback and payment-policy, parsed and checked before any operation runs. Who may run
 * them is `operator/turns/forensic-access.ts`. Pure.
 */
import { AppError } from '../../common/errors';
import { parseIdentity } from '../../common/identity';
import type { EraseRequest } from '../forensics/conversation-forensics';
import type { AcceptRollback, ResolveTurn, SetPaymentPolicy } from '../turns/turn-service';

/**
 * Parses an actor as given in a request.
 *
 * @throws AppError `invalid_argument` (details.field `actor`) when it is absent or not an
 *   identity, with the shape expected.
 */
export function parseActor(value: unknown): string {
  if (value === undefined || value === null || value === '') {
    throw new AppError(
      'invalid_argument',
      'actor is required: the identity you act as, provider:external_id or provider:scope:external_id (one of your own)',
      { details: { field: 'actor' } },
    );
  }
  try {
    parseIdentity(value);
  } catch (error) {
    throw new AppError(
      'invalid_argument',
      `actor: ${error instanceof Error ? error.message : String(error)}`,
      { details: { field: 'actor' }, cause: error },
    );
  }
  return value as string;
}

/**
 * The body of `POST .../repair`: `{actor, dryRun?}`.
 *
 * @throws AppError `invalid_argument` naming the first bad field (details.field).
 */
export function parseRepairRequest(value: unknown): { actor: string; dryRun: boolean } {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new AppError('invalid_argument', 'the body must be a JSON object: {"actor", "dryRun"}', {
      details: { field: 'body' },
    });
  }
  const body = value as Record<string, unknown>;
  for (const field of Object.keys(body)) {
    if (field !== 'actor' && field !== 'dryRun') {
      throw new AppError(
        'invalid_argument',
        `unknown field ${JSON.stringify(field.slice(0, 40))}; a repair takes "actor" and "dryRun"`,
        { details: { field } },
      );
    }
  }
  const dryRun = body.dryRun ?? false;
  if (typeof dryRun !== 'boolean') {
    throw new AppError('invalid_argument', 'dryRun must be true or false', {
      details: { field: 'dryRun' },
    });
  }
  return { actor: parseActor(body.actor), dryRun };
}

const ERASE_FIELDS = new Set(['actor', 'positions', 'reason', 'dryRun']);

/**
 * The body of `POST .../erase`: `{actor, positions, reason, dryRun?}` (docs/state-plane.md,
 * "Erasure"). The state plane checks the positions against the journal.
 *
 * @throws AppError `invalid_argument` naming the first bad field (details.field).
 */
export function parseEraseRequest(value: unknown): EraseRequest {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw invalidField('body', 'the body must be a JSON object: {"actor", "positions", "reason"}');
  }
  const body = value as Record<string, unknown>;
  for (const field of Object.keys(body)) {
    if (!ERASE_FIELDS.has(field)) {
      throw invalidField(
        field,
        `unknown field ${JSON.stringify(field.slice(0, 40))}; an erasure takes "actor", "positions", "reason" and "dryRun"`,
      );
    }
  }
  const actor = parseActor(body.actor);
  const { positions, reason, dryRun = false } = body;
  if (
    !Array.isArray(positions) ||
    positions.length === 0 ||
    positions.length > 1000 ||
    !positions.every((p) => typeof p === 'number' && Number.isSafeInteger(p) && p >= 0)
  ) {
    throw invalidField(
      'positions',
      'positions is required: 1 to 1000 journal positions, whole numbers (see the conversation export)',
    );
  }
  if (typeof reason !== 'string' || reason.trim() === '' || reason.length > 1024) {
    throw invalidField(
      'reason',
      'reason is required: say why the entries are erased, at most 1024 characters (it is recorded in the journal)',
    );
  }
  if (typeof dryRun !== 'boolean') throw invalidField('dryRun', 'dryRun must be true or false');
  return { actor, positions: positions as number[], reason, dryRun };
}

/** What a turn id may look like on the wire (the coordinator's are `turn_` and 32 hex digits). */
const TURN_ID_PATTERN = /^[A-Za-z0-9._:-]{1,128}$/u;

/** The longest `result` a resolve takes (the body limit is 64 KiB). */
export const RESOLVE_RESULT_MAX_CHARS = 32_768;

const RESOLVE_FIELDS = new Set([
  'actor',
  'decision',
  'result',
  'resultUnknown',
  'transaction',
  'turnId',
]);

/**
 * The body of `POST .../turns/{turnId}/resolve` (and of the Kubernetes door's `resolve`,
 * which names the turn in the body): `{actor, decision, result?, resultUnknown?,
 * transaction?, turnId?}`. `ran` takes exactly one of `result` (the tool's result text),
 * `resultUnknown: true` and `transaction` (the payment of a turn quarantined on one,
 * docs/payments.md "Exactly once"); `did_not_run` takes none.
 *
 * @param pathTurnId the turn id of the path; absent on the Kubernetes door.
 * @throws AppError `invalid_argument` naming the first bad field (details.field).
 */
export function parseResolveRequest(
  value: unknown,
  pathTurnId: string | undefined,
): Omit<ResolveTurn, 'conversationId'> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw invalidField(
      'body',
      'the body must be a JSON object: {"actor", "decision", "result"?, "resultUnknown"?}',
    );
  }
  const body = value as Record<string, unknown>;
  for (const field of Object.keys(body)) {
    if (!RESOLVE_FIELDS.has(field)) {
      throw invalidField(
        field,
        `unknown field ${JSON.stringify(field.slice(0, 40))}; a resolve takes "actor", "decision", "result", "resultUnknown", "transaction" and "turnId"`,
      );
    }
  }
  const turnId = resolveTurnId(body.turnId, pathTurnId);
  const actor = parseActor(body.actor);
  const { result, resultUnknown = false, transaction } = body;
  if (transaction !== undefined && (typeof transaction !== 'string' || transaction === '')) {
    throw invalidField(
      'transaction',
      'transaction must be a non-empty string: the transaction that paid the quarantined payment',
    );
  }
  if (result !== undefined && typeof result !== 'string') {
    throw invalidField('result', 'result must be a string: the tool call’s result text');
  }
  if (typeof resultUnknown !== 'boolean') {
    throw invalidField('resultUnknown', 'resultUnknown must be true or false');
  }
  if (typeof result === 'string' && result.length > RESOLVE_RESULT_MAX_CHARS) {
    throw invalidField(
      'result',
      `result is ${String(result.length)} characters; at most ${String(RESOLVE_RESULT_MAX_CHARS)} are taken`,
    );
  }
  return {
    turnId,
    actor,
    decision: parseDecision(body.decision, result, resultUnknown, transaction),
  };
}

/** The decision of a resolve and what goes with it (see {@link parseResolveRequest}). */
function parseDecision(
  decision: unknown,
  result: string | undefined,
  resultUnknown: boolean,
  transaction: string | undefined,
): ResolveTurn['decision'] {
  switch (decision) {
    case 'did_not_run':
      if (result !== undefined || resultUnknown || transaction !== undefined) {
        throw invalidField(
          result !== undefined ? 'result' : resultUnknown ? 'resultUnknown' : 'transaction',
          '"did_not_run" takes no result: the call did not run, so the turn runs it again; leave out "result", "resultUnknown" and "transaction"',
        );
      }
      return { kind: 'did_not_run' };
    case 'ran': {
      const given = [result !== undefined, resultUnknown, transaction !== undefined];
      if (given.filter(Boolean).length !== 1) {
        throw invalidField(
          transaction === undefined ? 'result' : 'transaction',
          '"ran" takes exactly one of "result" (the tool call’s result text), "resultUnknown": true, and "transaction" (the transaction that paid a quarantined payment)',
        );
      }
      return transaction === undefined
        ? { kind: 'ran', result }
        : { kind: 'ran', result: undefined, transaction };
    }
    default:
      throw invalidField('decision', 'decision must be "ran" or "did_not_run"');
  }
}

/**
 * A resolve in the wire form {@link parseResolveRequest} reads back: what a replica sends
 * the holder of the conversation (operator/public-api/holder-routing.ts).
 */
export function resolveRequestBody(
  request: Omit<ResolveTurn, 'conversationId'>,
): Readonly<Record<string, unknown>> {
  const { turnId, actor, decision } = request;
  if (decision.kind === 'did_not_run') return { turnId, actor, decision: 'did_not_run' };
  if (decision.transaction !== undefined) {
    return { turnId, actor, decision: 'ran', transaction: decision.transaction };
  }
  return decision.result === undefined
    ? { turnId, actor, decision: 'ran', resultUnknown: true }
    : { turnId, actor, decision: 'ran', result: decision.result };
}

const ACCEPT_ROLLBACK_FIELDS = new Set(['actor', 'head', 'reason']);

/**
 * The body of `POST .../accept-rollback`: `{actor, head, reason}` (docs/turns.md, "A
 * rolled-back journal").
 *
 * @throws AppError `invalid_argument` naming the first bad field (details.field).
 */
export function parseAcceptRollbackRequest(value: unknown): Omit<AcceptRollback, 'conversationId'> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw invalidField('body', 'the body must be a JSON object: {"actor", "head", "reason"}');
  }
  const body = value as Record<string, unknown>;
  for (const field of Object.keys(body)) {
    if (!ACCEPT_ROLLBACK_FIELDS.has(field)) {
      throw invalidField(
        field,
        `unknown field ${JSON.stringify(field.slice(0, 40))}; accepting a rollback takes "actor", "head" and "reason"`,
      );
    }
  }
  const actor = parseActor(body.actor);
  const { head, reason } = body;
  if (typeof head !== 'number' || !Number.isSafeInteger(head) || head < 0) {
    throw invalidField(
      'head',
      'head is required: the journal head you accept, a whole number (status.journal.rollback.journalHead)',
    );
  }
  if (typeof reason !== 'string' || reason.trim() === '') {
    throw invalidField(
      'reason',
      'reason is required: say why the lost entries are accepted (it is recorded in the journal)',
    );
  }
  return { actor, head, reason };
}

const PAYMENT_POLICY_FIELDS = new Set(['actor', 'wallet', 'limits', 'reason']);

/**
 * The body of `PUT .../payment-policy`: `{actor, wallet, limits, reason}`, `wallet` ""
 * (and no limits) to unlink (docs/payments.md, "Linking a wallet"). The wallet's name and
 * the limits are checked by the plan (operator/turns/plan-payment-policy.ts).
 *
 * @throws AppError `invalid_argument` naming the first bad field (details.field).
 */
export function parsePaymentPolicyRequest(
  value: unknown,
): Omit<SetPaymentPolicy, 'conversationId'> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw invalidField(
      'body',
      'the body must be a JSON object: {"actor", "wallet", "limits", "reason"}',
    );
  }
  const body = value as Record<string, unknown>;
  for (const field of Object.keys(body)) {
    if (!PAYMENT_POLICY_FIELDS.has(field)) {
      throw invalidField(
        field,
        `unknown field ${JSON.stringify(field.slice(0, 40))}; a payment policy takes "actor", "wallet", "limits" and "reason"`,
      );
    }
  }
  const actor = parseActor(body.actor);
  const { wallet, limits, reason } = body;
  if (typeof wallet !== 'string') {
    throw invalidField('wallet', 'wallet is required: a wallet name, or "" to unlink');
  }
  if (typeof reason !== 'string' || reason.trim() === '') {
    throw invalidField(
      'reason',
      'reason is required: say why the wallet is linked or unlinked (it is recorded in the journal)',
    );
  }
  return { actor, wallet, limits, reason };
}

function resolveTurnId(bodyTurnId: unknown, pathTurnId: string | undefined): string {
  if (bodyTurnId !== undefined && typeof bodyTurnId !== 'string') {
    throw invalidField('turnId', 'turnId must be a string');
  }
  if (pathTurnId !== undefined && bodyTurnId !== undefined && bodyTurnId !== pathTurnId) {
    throw invalidField(
      'turnId',
      `the body names turn ${bodyTurnId.slice(0, 64)}, the path ${pathTurnId.slice(0, 64)}; name one turn`,
    );
  }
  const turnId = pathTurnId ?? bodyTurnId;
  if (turnId === undefined || !TURN_ID_PATTERN.test(turnId)) {
    throw invalidField(
      'turnId',
      turnId === undefined
        ? 'turnId is required: the quarantined turn (status.turns.quarantined.turnId)'
        : `${JSON.stringify(turnId.slice(0, 64))} is not a turn id; use status.turns.quarantined.turnId`,
    );
  }
  return turnId;
}

function invalidField(field: string, message: string): AppError {
  return new AppError('invalid_argument', message, { details: { field } });
}
