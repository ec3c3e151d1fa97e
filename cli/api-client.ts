import type { z } from 'zod';

import { AppError } from '../common/errors';
import {
  acceptRollbackResultSchema,
  memoryClearedSchema,
  memorySchema,
  repairResultSchema,
  eraseResultSchema,
  resolveResultSchema,
  transcriptSchema,
  turnReplySchema,
  type AcceptRollbackResult,
  type Memory,
  type MemoryCleared,
  type Parsed,
  type EraseResult,
  type RepairResult,
  type ResolveResult,
  type Transcript,
  type TurnReply,
} from './api-answers';
import { apiErrorOf, ApiUnreachableError } from './api-errors';
import {
  ConversationOperation,
  publicApiTransport,
  type ApiTarget,
  type PublicApiTransportOptions,
  type Transport,
} from './transport';

/*
 * The CLI's client of the control plane's public API (docs/api.md, docs/api/openapi.json):
 * JSON over HTTP with node's fetch, through a transport (transport.ts: the public API with a
 * bearer session token, or the Kubernetes door). It owns the wire: answers are parsed here
 * with the schemas of api-answers.ts (unknown fields kept for --format json), error bodies
 * become ApiCallError with the API's own code and message (api-errors.ts).
 */

/**
 * Where the API is and who is calling: the public API with a session token, or any
 * {@link Transport} (the Kubernetes door by Conversation name).
 */
export type ApiClientOptions = PublicApiTransportOptions | { readonly transport: Transport };

/** Where a stream starts (docs/api.md, "Where the stream starts"). */
export interface StreamCursor {
  /** `Last-Event-ID`: resume after this position. */
  readonly lastEventId?: number;
  /** `?since=`: from this position, inclusive. */
  readonly since?: number;
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
    const target = { conversation: conversationId, operation: ConversationOperation.Transcript };
    return this.exchange('GET', target, undefined, transcriptSchema, 'Transcript', signal);
  }

  /** The agent's memory, oldest set first. @throws ApiCallError, ApiUnreachableError */
  async memory(conversationId: string, signal?: AbortSignal): Promise<Parsed<Memory>> {
    const target = { conversation: conversationId, operation: ConversationOperation.Memory };
    return this.exchange('GET', target, undefined, memorySchema, 'Memory', signal);
  }

  /** Clears `key`, or all memory when absent. @throws ApiCallError, ApiUnreachableError */
  async clearMemory(
    conversationId: string,
    key: string | undefined,
    signal?: AbortSignal,
  ): Promise<Parsed<MemoryCleared>> {
    const target = {
      conversation: conversationId,
      operation: ConversationOperation.Memory,
      ...(key === undefined ? {} : { rest: [key] }),
    };
    return this.exchange('DELETE', target, undefined, memoryClearedSchema, 'MemoryCleared', signal);
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
    const target = { conversation: conversationId, operation: ConversationOperation.Repair };
    return this.exchange('POST', target, request, repairResultSchema, 'RepairResult', signal);
  }

  /** Erases entries of the conversation's journal (admins, acting as `actor`). @throws ApiCallError, ApiUnreachableError */
  async erase(
    conversationId: string,
    request: {
      readonly actor: string;
      readonly positions: readonly number[];
      readonly reason: string;
      readonly dryRun: boolean;
    },
    signal?: AbortSignal,
  ): Promise<Parsed<EraseResult>> {
    const target = { conversation: conversationId, operation: ConversationOperation.Erase };
    return this.exchange('POST', target, request, eraseResultSchema, 'EraseResult', signal);
  }

  /** Settles a quarantined turn (admins, as `request.actor`; docs/turns.md). @throws ApiCallError, ApiUnreachableError */
  async resolveTurn(
    conversationId: string,
    turnId: string,
    request: {
      readonly actor: string;
      readonly decision: 'ran' | 'did_not_run';
      readonly result?: string;
      readonly resultUnknown?: boolean;
      readonly transaction?: string;
    },
    signal?: AbortSignal,
  ): Promise<Parsed<ResolveResult>> {
    const target = {
      conversation: conversationId,
      operation: ConversationOperation.Resolve,
      rest: [turnId],
    };
    return this.exchange(
      'POST',
      target,
      { ...request, turnId },
      resolveResultSchema,
      'ResolveResult',
      signal,
    );
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
    const target = {
      conversation: conversationId,
      operation: ConversationOperation.AcceptRollback,
    };
    return this.exchange(
      'POST',
      target,
      request,
      acceptRollbackResultSchema,
      'AcceptRollbackResult',
      signal,
    );
  }

  /** A request whose answer is parsed as `what` (a PUT as a POST where the door says). */
  async exchange<S extends z.ZodType>(
    method: 'GET' | 'POST' | 'PUT' | 'DELETE',
    target: ApiTarget,
    body: unknown,
    schema: S,
    what: string,
    signal: AbortSignal | undefined,
  ): Promise<Parsed<z.output<S>>> {
    const sent = method === 'PUT' && this.transport.putsAsPost === true ? 'POST' : method;
    return this.parse(await this.request(sent, target, body, signal), schema, what);
  }

  private async request(
    method: string,
    target: ApiTarget,
    body: unknown,
    signal: AbortSignal | undefined,
  ): Promise<Response> {
    const response = await this.send(
      method,
      target,
      {
        accept: 'application/json',
        // Every POST, PUT and DELETE is declared JSON, with a body or without: both doors answer
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
    target: ApiTarget,
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
