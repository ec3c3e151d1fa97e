import { isAppError } from '../../common/errors';
import { parseIdentity } from '../../common/identity';
import { MAX_STEPS_LIMIT } from '../api/v1alpha1/conversation-values';
import type { TurnDirective } from '../turns/turn-service';
import { ApiError } from './api-error';

/*
 * Parsers for what a client sends: path parameters, bodies, the idempotency key and the
 * stream cursor. Each takes `unknown` and returns a typed value or throws an ApiError
 * `invalid_argument` (400) whose message names the field, the rule it broke and what to
 * send instead; `details.field` names the field too. Unknown fields are refused, all of
 * them named at once, so a misspelt optional field is never silently ignored.
 */

/** Longest message text (and question answer), in characters (Unicode code points). */
export const MAX_TEXT_CHARS = 32_768;
/** Longest approval comment, in characters. */
export const MAX_COMMENT_CHARS = 4_096;
/**
 * Largest `directive.maxSteps` accepted here: the Conversation CRD's bound. A directive only
 * lowers the budget; the service applies the smallest of it, the spec and the deployment's.
 */
export const MAX_DIRECTIVE_STEPS = MAX_STEPS_LIMIT;
/** Idempotency keys: 1..128 of these characters. */
export const IDEMPOTENCY_KEY_PATTERN = /^[A-Za-z0-9._:-]{1,128}$/u;
/** Conversation ids are Kubernetes uids: lower-case UUIDs. */
export const CONVERSATION_ID_PATTERN =
  /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/u;
/** Approval and question request ids. */
export const REQUEST_ID_PATTERN = /^[A-Za-z0-9._:-]{1,128}$/u;
/** Stream cursors: decimal, at most 15 digits (below 2^53, so `N + 1` stays exact). */
const CURSOR_PATTERN = /^[0-9]{1,15}$/u;

/** A message as sent in a body (the idempotency key may also come from the header). */
export interface MessageInput {
  readonly text: string;
  readonly idempotencyKey?: string;
  readonly directive?: TurnDirective;
}

function invalid(field: string, message: string): ApiError {
  return new ApiError('invalid_argument', message, { details: { field } });
}

function describe(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  return typeof value === 'object' ? 'an object' : `a ${typeof value}`;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function fieldName(path: string, key: string): string {
  return path === '' ? key : `${path}.${key}`;
}

/**
 * `value` as an object holding only `allowed` keys.
 *
 * @throws ApiError naming the object when it is not one, or every unknown key.
 */
function objectOf(
  value: unknown,
  path: string,
  allowed: readonly string[],
): Record<string, unknown> {
  if (!isRecord(value)) {
    const what = path === '' ? 'the request body' : path;
    throw invalid(
      path === '' ? 'body' : path,
      `${what} must be a JSON object, got ${describe(value)}`,
    );
  }
  const unknown = Object.keys(value).filter((key) => !allowed.includes(key));
  if (unknown.length > 0) {
    const names = unknown.map((key) => JSON.stringify(fieldName(path, key))).join(', ');
    const where = path === '' ? 'the request body' : path;
    throw new ApiError(
      'invalid_argument',
      `unknown field${unknown.length === 1 ? '' : 's'} ${names} in ${where}; ` +
        `the allowed fields are ${allowed.join(', ')}`,
      { details: { field: fieldName(path, unknown[0] ?? ''), unknown: unknown.join(',') } },
    );
  }
  return value;
}

/**
 * The UTF-16 index of the first lone surrogate in `text`, or -1 when it is well-formed
 * (`String.prototype.isWellFormed`, which lib ES2023 does not type yet).
 */
function loneSurrogateAt(text: string): number {
  if ((text as string & { isWellFormed(): boolean }).isWellFormed()) return -1;
  for (let i = 0; i < text.length; i += 1) {
    const unit = text.charCodeAt(i);
    if (unit >= 0xd800 && unit <= 0xdbff) {
      const next = text.charCodeAt(i + 1);
      if (next >= 0xdc00 && next <= 0xdfff) i += 1;
      else return i;
    } else if (unit >= 0xdc00 && unit <= 0xdfff) {
      return i;
    }
  }
  return -1;
}

function textOf(value: unknown, field: string, maxChars: number, what: string): string {
  if (typeof value !== 'string') {
    throw invalid(field, `${field} must be a string (${what}), got ${describe(value)}`);
  }
  // A lone surrogate cannot be stored as UTF-8: it would come back as U+FFFD, and an exact
  // retry of the same text would then no longer match the turn it created.
  const lone = loneSurrogateAt(value);
  if (lone >= 0) {
    throw new ApiError(
      'invalid_argument',
      `${field} is not well-formed Unicode: it has a lone surrogate ` +
        `(\\u${value.charCodeAt(lone).toString(16)} at UTF-16 index ${String(lone)}); ` +
        `send ${what} with every surrogate pair complete`,
      { details: { field, index: lone } },
    );
  }
  const chars = value.length === 0 ? 0 : Array.from(value).length;
  if (chars === 0 || chars > maxChars) {
    throw invalid(
      field,
      `${field} must be 1 to ${String(maxChars)} characters long, got ${String(chars)}; send ${what}`,
    );
  }
  return value;
}

/**
 * An idempotency key: 1 to 128 characters of `A-Z a-z 0-9 . _ : -`.
 *
 * @param field `idempotencyKey`, `message.idempotencyKey` or `Idempotency-Key` (the header).
 * @throws ApiError naming `field`.
 */
export function parseIdempotencyKey(value: unknown, field: string): string {
  if (typeof value !== 'string' || !IDEMPOTENCY_KEY_PATTERN.test(value)) {
    const got = typeof value === 'string' ? `${String(value.length)} characters` : describe(value);
    throw invalid(
      field,
      `${field} must be 1 to 128 characters of A-Z, a-z, 0-9, ".", "_", ":" and "-", ` +
        `got ${got}; a UUID is a good key`,
    );
  }
  return value;
}

/**
 * The key a message is posted with: the body's, the header's (they must agree when both
 * are given), or a fresh one from `generate` (then a retry is a new turn).
 *
 * @throws ApiError when either is malformed, or both are given and differ.
 */
export function resolveIdempotencyKey(
  bodyKey: string | undefined,
  header: string | undefined,
  bodyField: string,
  generate: () => string,
): { key: string; generated: boolean } {
  const headerKey =
    header === undefined ? undefined : parseIdempotencyKey(header, 'Idempotency-Key');
  if (bodyKey !== undefined && headerKey !== undefined && bodyKey !== headerKey) {
    throw invalid(
      bodyField,
      `the Idempotency-Key header and ${bodyField} differ; send the key once, or the same key in both`,
    );
  }
  const key = bodyKey ?? headerKey;
  return key === undefined ? { key: generate(), generated: true } : { key, generated: false };
}

function parseDirective(value: unknown, path: string): TurnDirective {
  const body = objectOf(value, path, ['maxSteps', 'requiredApprover']);
  const directive: { maxSteps?: number; requiredApprover?: string } = {};
  if (body.maxSteps !== undefined) {
    const field = fieldName(path, 'maxSteps');
    const steps = body.maxSteps;
    if (
      typeof steps !== 'number' ||
      !Number.isInteger(steps) ||
      steps < 1 ||
      steps > MAX_DIRECTIVE_STEPS
    ) {
      throw invalid(
        field,
        `${field} must be an integer from 1 to ${String(MAX_DIRECTIVE_STEPS)}, got ` +
          `${typeof steps === 'number' ? String(steps) : describe(steps)}; it can only lower ` +
          `the conversation's step budget`,
      );
    }
    directive.maxSteps = steps;
  }
  if (body.requiredApprover !== undefined) {
    const field = fieldName(path, 'requiredApprover');
    const approver = body.requiredApprover;
    try {
      parseIdentity(approver);
    } catch (error) {
      if (!isAppError(error)) throw error;
      throw invalid(field, `${field}: ${error.message}`);
    }
    if (typeof approver === 'string') directive.requiredApprover = approver;
  }
  return directive;
}

/**
 * A message object: `{text, idempotencyKey?, directive?: {maxSteps?, requiredApprover?}}`.
 *
 * @param path where it sits in the body: '' for the messages route, `message` on create.
 * @throws ApiError naming the first bad field.
 */
export function parseMessageInput(value: unknown, path: string): MessageInput {
  const body = objectOf(value, path, ['text', 'idempotencyKey', 'directive']);
  const text = textOf(body.text, fieldName(path, 'text'), MAX_TEXT_CHARS, 'the message text');
  const idempotencyKey =
    body.idempotencyKey === undefined
      ? undefined
      : parseIdempotencyKey(body.idempotencyKey, fieldName(path, 'idempotencyKey'));
  const directive =
    body.directive === undefined
      ? undefined
      : parseDirective(body.directive, fieldName(path, 'directive'));
  return {
    text,
    ...(idempotencyKey === undefined ? {} : { idempotencyKey }),
    ...(directive === undefined ? {} : { directive }),
  };
}

/**
 * The body of `POST /v1/conversations`: `{message?}` (an absent body is `{}`).
 *
 * @throws ApiError naming the first bad field.
 */
export function parseCreateConversation(value: unknown): { message?: MessageInput } {
  const body = objectOf(value, '', ['message']);
  return body.message === undefined ? {} : { message: parseMessageInput(body.message, 'message') };
}

/**
 * The body of `POST .../approvals/{requestId}`:
 * `{decision: "approve"|"deny"|"cancel", comment?}` (`cancel`: admins only, checked by the
 * service).
 *
 * @throws ApiError naming the first bad field.
 */
export function parseApprovalAnswer(value: unknown): {
  decision: 'approve' | 'deny' | 'cancel';
  comment?: string;
} {
  const body = objectOf(value, '', ['decision', 'comment']);
  const decision = body.decision;
  if (decision !== 'approve' && decision !== 'deny' && decision !== 'cancel') {
    throw invalid(
      'decision',
      `decision must be "approve", "deny" or "cancel", got ${
        typeof decision === 'string' ? JSON.stringify(decision.slice(0, 40)) : describe(decision)
      }`,
    );
  }
  if (body.comment === undefined) return { decision };
  return {
    decision,
    comment: textOf(body.comment, 'comment', MAX_COMMENT_CHARS, 'a short comment, or leave it out'),
  };
}

/**
 * The body of `POST .../questions/{requestId}`: `{answer}`, or `{cancel: true, comment?}`
 * (an admin's cancel, checked by the service).
 *
 * @throws ApiError naming the first bad field.
 */
export function parseQuestionAnswer(
  value: unknown,
): { answer: string } | { cancel: true; comment?: string } {
  const body = objectOf(value, '', ['answer', 'cancel', 'comment']);
  if (body.cancel === undefined) {
    if (body.comment !== undefined) {
      throw invalid('comment', 'comment goes only with "cancel": true; send {"answer": "..."}');
    }
    return { answer: textOf(body.answer, 'answer', MAX_TEXT_CHARS, 'the answer text') };
  }
  if (body.cancel !== true) {
    throw invalid(
      'cancel',
      `cancel must be true, got ${describe(body.cancel)}; or send {"answer"}`,
    );
  }
  if (body.answer !== undefined) {
    throw invalid('answer', 'send either "answer" or "cancel": true, not both');
  }
  if (body.comment === undefined) return { cancel: true };
  return {
    cancel: true,
    comment: textOf(body.comment, 'comment', MAX_COMMENT_CHARS, 'a short comment, or leave it out'),
  };
}

/**
 * A conversation id path parameter (a Kubernetes uid).
 *
 * @throws ApiError 400 "not a conversation id".
 */
export function parseConversationId(value: string): string {
  if (CONVERSATION_ID_PATTERN.test(value)) return value;
  throw invalid(
    'conversationId',
    `${JSON.stringify(value.slice(0, 64))} is not a conversation id; use the conversationId ` +
      'a create answered with (a lower-case UUID such as 0b5c3a9e-4f0d-4d0a-9a52-6f1e2b7c8d90)',
  );
}

/**
 * An approval or question request id path parameter.
 *
 * @throws ApiError 400 naming `requestId`.
 */
export function parseRequestId(value: string): string {
  if (REQUEST_ID_PATTERN.test(value)) return value;
  throw invalid(
    'requestId',
    `${JSON.stringify(value.slice(0, 64))} is not a request id; use the requestId of the ` +
      'approval or question card',
  );
}

/** Where a stream starts, from the request's cursors. */
export interface StreamCursorInput {
  /** The `Last-Event-ID` header. */
  readonly lastEventIdHeader: string | undefined;
  /** The `lastEventId` query parameter. */
  readonly lastEventIdQuery: string | undefined;
  /** The `since` query parameter. */
  readonly since: string | undefined;
}

function cursorOf(value: string, field: string, meaning: string): number {
  if (!CURSOR_PATTERN.test(value)) {
    throw invalid(
      field,
      `${field} must be a journal position: a non-negative decimal integer of at most 15 ` +
        `digits, got ${JSON.stringify(value.slice(0, 32))}; ${meaning}`,
    );
  }
  return Number(value);
}

/**
 * The first journal position a stream sends. `Last-Event-ID` (header, or `lastEventId` in
 * the query for clients that cannot set headers) names the last event the client has:
 * the stream starts after it, and it wins over `since` (a browser reconnects to the same URL
 * and adds the header). `since` is inclusive (a TurnReply's `requestedAt`). No cursor: 0.
 * An empty `Last-Event-ID` means none (EventSource sends it after an event without an id).
 *
 * @throws ApiError 400 for a malformed cursor, or a header and query `lastEventId` that
 *   differ.
 */
export function parseStreamCursor(input: StreamCursorInput): number {
  const header = input.lastEventIdHeader === '' ? undefined : input.lastEventIdHeader;
  const query = input.lastEventIdQuery === '' ? undefined : input.lastEventIdQuery;
  const last = 'the id of the last event received';
  const fromHeader = header === undefined ? undefined : cursorOf(header, 'Last-Event-ID', last);
  const fromQuery = query === undefined ? undefined : cursorOf(query, 'lastEventId', last);
  if (fromHeader !== undefined && fromQuery !== undefined && fromHeader !== fromQuery) {
    throw invalid(
      'lastEventId',
      `the Last-Event-ID header (${String(fromHeader)}) and the lastEventId query parameter ` +
        `(${String(fromQuery)}) differ; send one of them`,
    );
  }
  const since =
    input.since === undefined
      ? undefined
      : cursorOf(input.since, 'since', "the first position wanted, e.g. a reply's requestedAt");
  const lastSeen = fromHeader ?? fromQuery;
  if (lastSeen !== undefined) return lastSeen + 1;
  return since ?? 0;
}
