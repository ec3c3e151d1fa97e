import { z } from 'zod';

import { AppError, isErrorCode, type ErrorCode, type ErrorDetails } from '../common/errors';
import { forbiddenHint } from './kube-transport';
import {
  ConversationOperation,
  publicApiTransport,
  type ConversationTarget,
  type PublicApiTransportOptions,
  type Transport,
} from './transport';

/*
 * The CLI's client of the control plane's public API (docs/api.md, docs/api/openapi.json):
 * JSON over HTTP with node's fetch, through a transport (transport.ts: the public API with a
 * bearer session token, or the Kubernetes door). It owns the wire: answers are parsed here
 * (unknown fields kept for --format json), error bodies become ApiCallError with the API's
 * own code and message.
 */

/**
 * Where the API is and who is calling: the public API with a session token, or any
 * {@link Transport} (the Kubernetes door by Conversation name).
 */
export type ApiClientOptions = PublicApiTransportOptions | { readonly transport: Transport };

/**
 * An error answer of the API (`{error: {code, message, details?}}`), or an answer that
 * did not have that shape (then the code follows the HTTP status).
 */
export class ApiCallError extends AppError {
  override readonly name: string = 'ApiCallError';
  /** The HTTP status; 0 for an `event: error` inside a stream that had answered 200. */
  readonly status: number;
  /** The `X-Request-Id` of the answer, to quote in a report. */
  readonly requestId: string | undefined;

  constructor(
    code: ErrorCode,
    message: string,
    options: { status: number; requestId?: string; details?: ErrorDetails },
  ) {
    super(code, message, options.details === undefined ? {} : { details: options.details });
    this.status = options.status;
    this.requestId = options.requestId;
  }
}

/** The API could not be reached at all (refused, no route, DNS, reset before an answer). */
export class ApiUnreachableError extends AppError {
  override readonly name: string = 'ApiUnreachableError';
  constructor(transport: Pick<Transport, 'description' | 'unreachableHint'>, cause: unknown) {
    super(
      'unavailable',
      `cannot reach ${transport.description}: ${describeFetchFailure(cause)}; ${transport.unreachableHint}`,
      { cause },
    );
  }
}

/**
 * Why fetch failed, from undici's `TypeError('fetch failed', {cause})` chain: the deepest
 * system error's code and message (`ECONNREFUSED (connect ECONNREFUSED 127.0.0.1:8080)`).
 * Read by shape, not `instanceof`: the error may come from another realm.
 */
function describeFetchFailure(error: unknown): string {
  let current: unknown = error;
  let message = 'unknown error';
  for (let depth = 0; depth < 5 && typeof current === 'object' && current !== null; depth++) {
    const text: unknown = Reflect.get(current, 'message');
    const code: unknown = Reflect.get(current, 'code');
    if (typeof text === 'string' && text !== '') {
      message = typeof code === 'string' ? `${code} (${text})` : text;
    } else if (typeof code === 'string') {
      message = code;
    }
    const errors: unknown = Reflect.get(current, 'errors');
    current =
      Array.isArray(errors) && errors.length > 0 ? errors[0] : Reflect.get(current, 'cause');
  }
  return message;
}

const cardSchema = {
  approval: z.looseObject({
    requestId: z.string(),
    toolCallId: z.string(),
    toolName: z.string(),
    args: z.unknown(),
    argsSha256: z.string(),
    reason: z.string(),
    requiredApprover: z.string(),
  }),
  question: z.looseObject({ requestId: z.string(), question: z.string() }),
  ambiguous: z.looseObject({ toolCallId: z.string(), reason: z.string() }),
  handoff: z.looseObject({ targetAgent: z.string(), reason: z.string() }),
};

const turnStatusSchema = z.enum(['complete', 'paused', 'ambiguous', 'handoff']);

const turnReplySchema = z.looseObject({
  conversationId: z.string(),
  turnId: z.string(),
  status: turnStatusSchema,
  reply: z.string().optional(),
  fallback: z.boolean().optional(),
  approval: cardSchema.approval.optional(),
  question: cardSchema.question.optional(),
  ambiguous: cardSchema.ambiguous.optional(),
  handoff: cardSchema.handoff.optional(),
  requestedAt: z.number().int().nonnegative(),
});

const transcriptSchema = z.looseObject({
  conversationId: z.string(),
  head: z.number().int().nonnegative(),
  turns: z.array(
    z.looseObject({
      turnId: z.string(),
      position: z.number().int().nonnegative(),
      user: z.looseObject({ text: z.string(), caller: z.string(), receivedAtMs: z.number() }),
      status: turnStatusSchema,
      reply: z.string().optional(),
      fallback: z.boolean().optional(),
      approval: cardSchema.approval.optional(),
      question: cardSchema.question.optional(),
      ambiguous: cardSchema.ambiguous.optional(),
      handoff: cardSchema.handoff.optional(),
    }),
  ),
});

const repairResultSchema = z.looseObject({
  conversationId: z.string(),
  actor: z.string(),
  dryRun: z.boolean(),
  excised: z.array(
    z.looseObject({ position: z.number().int(), leafDigestHex: z.string(), problem: z.string() }),
  ),
  head: z.number().int().nonnegative(),
  message: z.string(),
});

const resolveResultSchema = z.looseObject({
  conversationId: z.string(),
  turnId: z.string(),
  decision: z.enum(['ran', 'did_not_run']),
  resultUnknown: z.boolean(),
  actor: z.string(),
  position: z.number().int().nonnegative(),
  head: z.number().int().nonnegative(),
  message: z.string(),
});

const acceptRollbackResultSchema = z.looseObject({
  conversationId: z.string(),
  checkpointHead: z.number().int().nonnegative(),
  checkpointRoot: z.string(),
  position: z.number().int().nonnegative(),
  head: z.number().int().nonnegative(),
  actor: z.string(),
  message: z.string(),
});

const errorBodySchema = z.object({
  error: z.object({
    code: z.string(),
    message: z.string(),
    details: z
      .record(z.string(), z.union([z.string(), z.number(), z.boolean(), z.null()]))
      .optional(),
  }),
});

/** What a repair found and did (`RepairResult`). */
export type RepairResult = z.output<typeof repairResultSchema>;
/** What a resolve committed (`ResolveResult`). */
export type ResolveResult = z.output<typeof resolveResultSchema>;
/** What accepting a rollback committed (`AcceptRollbackResult`). */
export type AcceptRollbackResult = z.output<typeof acceptRollbackResultSchema>;
/** A turn's settled state (`TurnReply`). */
export type TurnReply = z.output<typeof turnReplySchema>;
/** The transcript (`Transcript`). */
export type Transcript = z.output<typeof transcriptSchema>;
/** One turn of a transcript. */
export type TranscriptTurn = Transcript['turns'][number];
/** A paused turn's approval card. */
export type ApprovalCard = z.output<typeof cardSchema.approval>;

/** An answer and the JSON it was parsed from. */
export interface Parsed<T> {
  readonly value: T;
  /** The body as the API sent it (for `--format json`). */
  readonly raw: unknown;
}

/** Where a stream starts (docs/api.md, "Where the stream starts"). */
export interface StreamCursor {
  /** `Last-Event-ID`: resume after this position. */
  readonly lastEventId?: number;
  /** `?since=`: from this position, inclusive. */
  readonly since?: number;
}

/**
 * A Kubernetes `Status` (the Kubernetes door's errors, and kube-apiserver's own Forbidden
 * and NotFound): the Polychrome code, when the door sent one, in `details.causes[0].reason`.
 */
const kubeStatusSchema = z.looseObject({
  kind: z.literal('Status'),
  message: z.string(),
  reason: z.string().optional(),
  details: z
    .looseObject({
      causes: z.array(z.looseObject({ reason: z.string().optional() })).optional(),
    })
    .optional(),
});

/** The code an HTTP status stands for when the body is not an API error. */
function codeOfStatus(status: number): ErrorCode {
  if (status === 400 || status === 405 || status === 415) return 'invalid_argument';
  if (status === 401) return 'unauthenticated';
  if (status === 403) return 'permission_denied';
  if (status === 404) return 'not_found';
  if (status === 409) return 'conflict';
  if (status === 412) return 'failed_precondition';
  if (status === 413 || status === 429) return 'resource_exhausted';
  if (status === 503) return 'unavailable';
  if (status === 504) return 'deadline_exceeded';
  return 'internal';
}

/**
 * The error an unsuccessful answer stands for: the API's `{error}` body when it has one,
 * else the status (a proxy's HTML page, an empty body).
 */
export async function apiErrorOf(response: Response): Promise<ApiCallError> {
  const requestId = response.headers.get('x-request-id') ?? undefined;
  const text = await response.text().catch(() => '');
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    body = undefined;
  }
  const parsed = errorBodySchema.safeParse(body);
  if (parsed.success) {
    const { code, message, details } = parsed.data.error;
    return new ApiCallError(isErrorCode(code) ? code : codeOfStatus(response.status), message, {
      status: response.status,
      ...(requestId === undefined ? {} : { requestId }),
      ...(details === undefined ? {} : { details }),
    });
  }
  const status = kubeStatusSchema.safeParse(body);
  if (status.success) {
    const cause = status.data.details?.causes?.[0]?.reason;
    const hint = response.status === 403 ? forbiddenHint(status.data.message) : undefined;
    return new ApiCallError(
      cause !== undefined && isErrorCode(cause) ? cause : codeOfStatus(response.status),
      hint === undefined ? status.data.message : `${status.data.message}; ${hint}`,
      { status: response.status, ...(requestId === undefined ? {} : { requestId }) },
    );
  }
  const excerpt = text.trim().slice(0, 200);
  return new ApiCallError(
    codeOfStatus(response.status),
    `the API answered ${String(response.status)} ${response.statusText}` +
      (excerpt === '' ? '' : `: ${excerpt}`),
    { status: response.status, ...(requestId === undefined ? {} : { requestId }) },
  );
}

/** The body of a DELETE that cancels: the comment, if any. */
function commentOnly(answer: { readonly comment?: string }): { comment?: string } {
  return answer.comment === undefined ? {} : { comment: answer.comment };
}

/** The public API of one control plane, as one caller. */
export class ApiClient {
  readonly transport: Transport;

  constructor(options: ApiClientOptions) {
    this.transport = 'transport' in options ? options.transport : publicApiTransport(options);
  }

  /**
   * Posts a message; the answer is the turn's settled state and the key it used.
   *
   * @throws ApiCallError the API's error (`not_found`, `conflict`, `unavailable`, ...).
   * @throws ApiUnreachableError when no answer came.
   */
  async postMessage(
    conversationId: string,
    message: { readonly text: string; readonly idempotencyKey: string },
    signal?: AbortSignal,
  ): Promise<Parsed<TurnReply> & { idempotencyKey: string }> {
    const response = await this.request(
      'POST',
      { conversation: conversationId, operation: ConversationOperation.Messages },
      { text: message.text, idempotencyKey: message.idempotencyKey },
      signal,
    );
    const parsed = await this.parse(response, turnReplySchema, 'TurnReply');
    return {
      ...parsed,
      idempotencyKey: response.headers.get('idempotency-key') ?? message.idempotencyKey,
    };
  }

  /** The committed turns. @throws ApiCallError, ApiUnreachableError */
  async transcript(conversationId: string, signal?: AbortSignal): Promise<Parsed<Transcript>> {
    const response = await this.request(
      'GET',
      { conversation: conversationId, operation: ConversationOperation.Transcript },
      undefined,
      signal,
    );
    return this.parse(response, transcriptSchema, 'Transcript');
  }

  /** Approves or denies a paused call; the answer is the turn's next settled state. */
  async answerApproval(
    conversationId: string,
    requestId: string,
    answer: { readonly decision: 'approve' | 'deny' | 'cancel'; readonly comment?: string },
    signal?: AbortSignal,
  ): Promise<Parsed<TurnReply>> {
    const cancel = answer.decision === 'cancel' && this.transport.cancelsWithDelete === true;
    const response = await this.request(
      cancel ? 'DELETE' : 'POST',
      {
        conversation: conversationId,
        operation: ConversationOperation.Approvals,
        rest: [requestId],
      },
      cancel ? commentOnly(answer) : answer,
      signal,
    );
    return this.parse(response, turnReplySchema, 'TurnReply');
  }

  /**
   * Answers the agent's question (or, with `{cancel: true}`, an admin cancels it); the
   * answer is the turn's next settled state.
   */
  async answerQuestion(
    conversationId: string,
    requestId: string,
    answer: string | { readonly cancel: true; readonly comment?: string },
    signal?: AbortSignal,
  ): Promise<Parsed<TurnReply>> {
    const cancel = typeof answer !== 'string' && this.transport.cancelsWithDelete === true;
    const response = await this.request(
      cancel ? 'DELETE' : 'POST',
      {
        conversation: conversationId,
        operation: ConversationOperation.Questions,
        rest: [requestId],
      },
      typeof answer === 'string' ? { answer } : cancel ? commentOnly(answer) : answer,
      signal,
    );
    return this.parse(response, turnReplySchema, 'TurnReply');
  }

  /**
   * Opens the conversation's event stream. The answer is 200 `text/event-stream`; read
   * its body with SseParser.
   *
   * @throws ApiCallError for an error answer (401, 403, 404, 400, 503, ...).
   * @throws ApiUnreachableError when no answer came.
   */
  async openStream(
    conversationId: string,
    cursor: StreamCursor,
    signal: AbortSignal,
  ): Promise<Response> {
    const response = await this.send(
      'GET',
      {
        conversation: conversationId,
        operation: ConversationOperation.Stream,
        ...(cursor.since === undefined ? {} : { query: { since: String(cursor.since) } }),
      },
      {
        accept: 'text/event-stream',
        ...(cursor.lastEventId === undefined
          ? {}
          : { 'last-event-id': String(cursor.lastEventId) }),
      },
      undefined,
      signal,
    );
    if (!response.ok) throw await apiErrorOf(response);
    return response;
  }

  /**
   * The conversation's journal export (admins, acting as `actor`): the export file's text
   * and what the control plane keeps outside the journal, when it sent them: the checkpoint
   * (`X-Polychrome-Checkpoint`, `N:ROOTHEX[:KEYID]`) and the journal keys the Conversation's
   * status recorded (`X-Polychrome-Public-Keys`, base64 keys, comma-separated).
   *
   * @throws ApiCallError (`permission_denied` for a caller who is not an admin or an actor
   *   who is not theirs), ApiUnreachableError.
   */
  async exportJournal(
    conversationId: string,
    actor: string,
    signal?: AbortSignal,
  ): Promise<{
    readonly text: string;
    readonly checkpoint: string | undefined;
    readonly publicKeys: string | undefined;
  }> {
    const response = await this.send(
      'GET',
      { conversation: conversationId, operation: ConversationOperation.Export, query: { actor } },
      { accept: 'application/x-ndjson' },
      undefined,
      signal,
    );
    if (!response.ok) throw await apiErrorOf(response);
    let text: string;
    try {
      text = await response.text();
    } catch (error) {
      throw new AppError(
        'unavailable',
        `${this.transport.description} cut the export of conversation ${conversationId} short; retry`,
        { cause: error },
      );
    }
    return {
      text,
      checkpoint: response.headers.get('x-polychrome-checkpoint') ?? undefined,
      publicKeys: response.headers.get('x-polychrome-public-keys') ?? undefined,
    };
  }

  /** Repairs the conversation's journal (admins, acting as `actor`). @throws ApiCallError, ApiUnreachableError */
  async repair(
    conversationId: string,
    request: { readonly actor: string; readonly dryRun: boolean },
    signal?: AbortSignal,
  ): Promise<Parsed<RepairResult>> {
    const response = await this.request(
      'POST',
      { conversation: conversationId, operation: ConversationOperation.Repair },
      request,
      signal,
    );
    return this.parse(response, repairResultSchema, 'RepairResult');
  }

  /**
   * Settles a quarantined turn (admins, acting as `request.actor`; docs/turns.md).
   * @throws ApiCallError, ApiUnreachableError
   */
  async resolveTurn(
    conversationId: string,
    turnId: string,
    request: {
      readonly actor: string;
      readonly decision: 'ran' | 'did_not_run';
      readonly result?: string;
      readonly resultUnknown?: boolean;
    },
    signal?: AbortSignal,
  ): Promise<Parsed<ResolveResult>> {
    const response = await this.request(
      'POST',
      { conversation: conversationId, operation: ConversationOperation.Resolve, rest: [turnId] },
      { ...request, turnId },
      signal,
    );
    return this.parse(response, resolveResultSchema, 'ResolveResult');
  }

  /**
   * Accepts a rolled-back journal at `request.head` (admins, acting as `request.actor`;
   * docs/turns.md, "A rolled-back journal").
   * @throws ApiCallError, ApiUnreachableError
   */
  async acceptRollback(
    conversationId: string,
    request: { readonly actor: string; readonly head: number; readonly reason: string },
    signal?: AbortSignal,
  ): Promise<Parsed<AcceptRollbackResult>> {
    const response = await this.request(
      'POST',
      { conversation: conversationId, operation: ConversationOperation.AcceptRollback },
      request,
      signal,
    );
    return this.parse(response, acceptRollbackResultSchema, 'AcceptRollbackResult');
  }

  private async request(
    method: string,
    target: ConversationTarget,
    body: unknown,
    signal: AbortSignal | undefined,
  ): Promise<Response> {
    const response = await this.send(
      method,
      target,
      {
        accept: 'application/json',
        // Every POST and DELETE is declared JSON, with a body or without: both doors answer
        // 415 otherwise (docs/api.md, "Conventions").
        ...(body === undefined && method === 'GET' ? {} : { 'content-type': 'application/json' }),
      },
      body === undefined ? undefined : JSON.stringify(body),
      signal,
    );
    if (!response.ok) throw await apiErrorOf(response);
    return response;
  }

  private async send(
    method: string,
    target: ConversationTarget,
    headers: Record<string, string>,
    body: string | undefined,
    signal: AbortSignal | undefined,
  ): Promise<Response> {
    const url = this.transport.url(target);
    try {
      return await this.transport.fetch(url, {
        method,
        headers,
        ...(body === undefined ? {} : { body }),
        ...(signal === undefined ? {} : { signal }),
      });
    } catch (error) {
      if (signal?.aborted === true) throw error;
      throw new ApiUnreachableError(this.transport, error);
    }
  }

  private async parse<S extends z.ZodType>(
    response: Response,
    schema: S,
    what: string,
  ): Promise<Parsed<z.output<S>>> {
    const text = await response.text();
    let raw: unknown;
    try {
      raw = JSON.parse(text);
    } catch {
      throw new AppError(
        'internal',
        `${this.transport.description} answered ${String(response.status)} with a body that is not JSON; ` +
          'is it the Polychrome control plane?',
      );
    }
    const parsed = schema.safeParse(raw);
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      throw new AppError(
        'internal',
        `${this.transport.description} answered with a body that is not a ${what}` +
          (issue === undefined
            ? ''
            : ` (${issue.path.map(String).join('.') || 'body'}: ${issue.message})`) +
          '; is the CLI older than the control plane?',
      );
    }
    return { value: parsed.data, raw };
  }
}
