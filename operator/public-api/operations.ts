/**
 * What is asked: one function per operation of the API (routes.ts), each taking the
 * {@link Asked} a door established and the exchange to answer on. None knows which
 * listener the request came in on: the door already turned it into a caller, a
 * conversation id and a body; where a write runs is holder-routing.ts's business.
 */
import { once } from 'node:events';
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import openapiDocument from '../../docs/api/openapi.json';
import type { ConversationForensics } from '../forensics/conversation-forensics';
import { checkpointHeader, publicKeysHeader } from '../forensics/conversation-forensics';
import {
  parseAcceptRollbackRequest,
  parseActor,
  parseRepairRequest,
  parseEraseRequest,
  parsePaymentPolicyRequest,
  parseResolveRequest,
} from './forensic-requests';
import type { PostMessage, TurnService } from '../turns/turn-service';
import type { PersonaPaymentPolicies } from '../turns/persona-payment-policy';
import { ApiError, noForensics } from './api-error';
import type { CallerLimits } from './caller-limits';
import type { Asked, Exchange } from './door';
import type { EventStreams } from './event-streams';
import type { HolderRouting, RequestScope, Routed } from './holder-routing';
import { headerOf, sendBody, sendJson } from './http-io';
import { hasNoBody } from './request-body';
import {
  parseApprovalAnswer,
  parseCreateConversation,
  parseMessageInput,
  parseQuestionAnswer,
  parseRequestId,
  resolveIdempotencyKey,
  type MessageInput,
} from './request-parsers';
import { Operation, type Route } from './routes';

const OPENAPI_BODY = JSON.stringify(openapiDocument);

export interface ApiOperationsOptions {
  readonly service: TurnService;
  /** Where the writes run: here, or on the replica that holds the conversation. */
  readonly where: HolderRouting;
  readonly streams: EventStreams;
  readonly limits: CallerLimits;
  /** The admins' export. None: answered 503 `unavailable`. */
  readonly forensics?: Pick<ConversationForensics, 'export'>;
  /** Idempotency key for a message sent without one. @default `api-` + a random UUID */
  readonly newIdempotencyKey?: () => string;
  /** Admins' persona payment policies. None: those routes answer 503 `unavailable`. */
  readonly personaPolicies?: PersonaPaymentPolicies;
  /** Where a cut-short export is logged. */
  readonly log: Logger;
}

type Params = Readonly<Record<string, string>>;

/** One operation: answers on the exchange, or throws for the door to answer. */
type Handler = (exchange: Exchange, asked: Asked, params: Params) => Promise<void>;

export class ApiOperations {
  constructor(private readonly options: ApiOperationsOptions) {}

  /** Each operation but the OpenAPI document, which anyone may read. */
  private readonly handlers: Readonly<Record<Exclude<Operation, 'getOpenApi'>, Handler>> = {
    [Operation.CreateConversation]: (exchange, asked) => this.createConversation(exchange, asked),
    [Operation.GetConversation]: async (exchange, asked) => {
      const summary = await this.options.service.conversation(asked.caller, asked.conversationId());
      sendJson(exchange.response, 200, summary);
    },
    [Operation.GetTranscript]: async (exchange, asked) => {
      const id = asked.conversationId();
      const transcript = await this.options.service.transcript(asked.caller, id, exchange.signal);
      sendJson(exchange.response, 200, transcript);
    },
    [Operation.GetMemory]: async (exchange, asked) => {
      const id = asked.conversationId();
      sendJson(
        exchange.response,
        200,
        await this.options.service.memory(asked.caller, id, exchange.signal),
      );
    },
    [Operation.ClearMemory]: async (exchange, asked, params) => {
      const conversationId = asked.conversationId();
      const request = { conversationId, ...(params.key === undefined ? {} : { key: params.key }) };
      answered(exchange, await this.where.clearMemory(asked.caller, request, scopeOf(exchange)));
    },
    [Operation.PostMessage]: (exchange, asked) => this.postMessage(exchange, asked),
    [Operation.AnswerApproval]: async (exchange, asked, params) => {
      const conversationId = asked.conversationId();
      const requestId = parseRequestId(params.requestId ?? '');
      const answer = parseApprovalAnswer(await asked.body());
      const request = { conversationId, requestId, ...answer };
      answered(exchange, await this.where.answerApproval(asked.caller, request, scopeOf(exchange)));
    },
    [Operation.AnswerQuestion]: async (exchange, asked, params) => {
      const conversationId = asked.conversationId();
      const requestId = parseRequestId(params.requestId ?? '');
      const answer = parseQuestionAnswer(await asked.body());
      const request = { conversationId, requestId, ...answer };
      answered(exchange, await this.where.answerQuestion(asked.caller, request, scopeOf(exchange)));
    },
    [Operation.StreamEvents]: (exchange, asked) => this.options.streams.serve(exchange, asked),
    [Operation.ExportConversation]: (exchange, asked) => this.exportConversation(exchange, asked),
    [Operation.RepairConversation]: async (exchange, asked) => {
      const conversationId = asked.conversationId();
      const request = parseRepairRequest(await asked.body());
      const scope = scopeOf(exchange);
      answered(exchange, await this.where.repair(asked.caller, conversationId, request, scope));
    },
    [Operation.EraseConversation]: async (exchange, asked) => {
      const conversationId = asked.conversationId();
      const request = parseEraseRequest(await asked.body());
      const scope = scopeOf(exchange);
      answered(exchange, await this.where.erase(asked.caller, conversationId, request, scope));
    },
    [Operation.ResolveTurn]: async (exchange, asked, params) => {
      const conversationId = asked.conversationId();
      const request = { conversationId, ...parseResolveRequest(await asked.body(), params.turnId) };
      answered(exchange, await this.where.resolveTurn(asked.caller, request, scopeOf(exchange)));
    },
    [Operation.AcceptRollback]: async (exchange, asked) => {
      const conversationId = asked.conversationId();
      const request = { conversationId, ...parseAcceptRollbackRequest(await asked.body()) };
      answered(exchange, await this.where.acceptRollback(asked.caller, request, scopeOf(exchange)));
    },
    [Operation.SetPaymentPolicy]: async (exchange, asked) => {
      const conversationId = asked.conversationId();
      const request = { conversationId, ...parsePaymentPolicyRequest(await asked.body()) };
      const scope = scopeOf(exchange);
      answered(exchange, await this.where.setPaymentPolicy(asked.caller, request, scope));
    },
    [Operation.GetPaymentPolicy]: async (exchange, asked) => {
      const conversationId = asked.conversationId();
      const actor = parseActor(exchange.query.get('actor') ?? undefined);
      const policy = await this.options.service.paymentPolicy(
        asked.caller,
        conversationId,
        actor,
        exchange.signal,
      );
      sendJson(exchange.response, 200, policy);
    },
    [Operation.SetPersonaPaymentPolicy]: async (exchange, asked, params) => {
      const personaId = params.personaId ?? '';
      const request = { personaId, ...parsePaymentPolicyRequest(await asked.body()) };
      const policies = this.personaPolicies();
      sendJson(exchange.response, 200, await policies.set(asked.caller, request, exchange.signal));
    },
    [Operation.GetPersonaPaymentPolicy]: async (exchange, asked, params) => {
      const actor = parseActor(exchange.query.get('actor') ?? undefined);
      const policies = this.personaPolicies();
      const personaId = params.personaId ?? '';
      sendJson(
        exchange.response,
        200,
        await policies.read(asked.caller, personaId, actor, exchange.signal),
      );
    },
  };

  private personaPolicies(): PersonaPaymentPolicies {
    const policies = this.options.personaPolicies;
    if (policies === undefined) {
      throw new ApiError(
        'unavailable',
        'this control plane serves no persona payment policies (it was started without the records)',
      );
    }
    return policies;
  }

  /**
   * Runs `route`'s operation and answers on the exchange.
   *
   * @throws ApiError (or any AppError) for the door to answer; nothing was sent then.
   */
  async run(
    exchange: Exchange,
    route: Route,
    params: Params,
    asked: Asked | undefined,
  ): Promise<void> {
    if (route.operation === Operation.GetOpenApi) {
      sendBody(exchange.response, 200, OPENAPI_BODY, { 'cache-control': 'public, max-age=300' });
      return;
    }
    if (asked === undefined) {
      throw new Error(`${route.operation} runs for an authenticated caller only`);
    }
    await this.handlers[route.operation](exchange, asked, params);
  }

  private get where(): HolderRouting {
    return this.options.where;
  }

  private async createConversation(exchange: Exchange, asked: Asked): Promise<void> {
    const body = hasNoBody(exchange.request) ? {} : await asked.body();
    const input = parseCreateConversation(body);
    const header = headerOf(exchange.request, 'idempotency-key');
    if (input.message === undefined && header !== undefined) {
      throw new ApiError(
        'invalid_argument',
        'the Idempotency-Key header applies to a first message, and the body has none; ' +
          'creating a conversation is not idempotent: send no key, or send a message',
        { details: { field: 'Idempotency-Key' } },
      );
    }
    const message =
      input.message === undefined
        ? undefined
        : this.withKey(input.message, header, 'message.idempotencyKey');
    const release = this.options.limits.reserveConversation(asked.caller);
    let created: Awaited<ReturnType<TurnService['createConversation']>>;
    try {
      created = await this.options.service.createConversation(
        asked.caller,
        message === undefined ? {} : { message },
        exchange.signal,
      );
    } finally {
      release();
    }
    const conversationId = created.summary.conversationId;
    exchange.notes.conversation = conversationId;
    sendJson(
      exchange.response,
      201,
      {
        conversationId,
        conversation: created.summary,
        ...(created.turn === undefined ? {} : { turn: created.turn }),
      },
      {
        location: `/v1/conversations/${conversationId}`,
        ...(message === undefined ? {} : { 'idempotency-key': message.idempotencyKey }),
      },
    );
  }

  private async postMessage(exchange: Exchange, asked: Asked): Promise<void> {
    const conversationId = asked.conversationId();
    const input = parseMessageInput(await asked.body(), '');
    // The key travels with a forwarded message, so a generated one names the same turn there.
    const message = this.withKey(
      input,
      headerOf(exchange.request, 'idempotency-key'),
      'idempotencyKey',
    );
    const request: PostMessage = { conversationId, ...message };
    const routed = await this.where.postMessage(asked.caller, request, scopeOf(exchange));
    answered(exchange, routed, { 'idempotency-key': message.idempotencyKey });
  }

  /** The message with its idempotency key settled (body, header or generated). */
  private withKey(
    input: MessageInput,
    header: string | undefined,
    bodyField: string,
  ): Omit<PostMessage, 'conversationId'> {
    const { key } = resolveIdempotencyKey(
      input.idempotencyKey,
      header,
      bodyField,
      this.options.newIdempotencyKey ?? (() => `api-${randomUUID()}`),
    );
    return {
      text: input.text,
      idempotencyKey: key,
      ...(input.directive === undefined ? {} : { directive: input.directive }),
    };
  }

  /**
   * The journal export, streamed as NDJSON in the file format of `polychrome state export`;
   * the Conversation's status checkpoint goes in `X-Polychrome-Checkpoint`, its journal keys
   * in `X-Polychrome-Public-Keys`. A failure after the first line cuts the stream (the file
   * then fails verification where it stops).
   */
  private async exportConversation(exchange: Exchange, asked: Asked): Promise<void> {
    const conversationId = asked.conversationId();
    const actor = parseActor(exchange.query.get('actor') ?? undefined);
    const forensics = this.options.forensics;
    if (forensics === undefined) throw noForensics();
    const exported = await forensics.export(asked.caller, conversationId, actor, exchange.signal);
    const response = exchange.response;
    response.writeHead(200, {
      'content-type': 'application/x-ndjson; charset=utf-8',
      'cache-control': 'no-store',
      ...(exported.checkpoint === undefined
        ? {}
        : { 'x-polychrome-checkpoint': checkpointHeader(exported.checkpoint) }),
      ...(exported.publicKeys.length === 0
        ? {}
        : { 'x-polychrome-public-keys': publicKeysHeader(exported.publicKeys) }),
    });
    try {
      for await (const line of exported.lines) {
        if (!response.write(line)) await once(response, 'drain', { signal: exchange.signal });
      }
      response.end();
    } catch (error) {
      this.options.log.warn(
        { err: error, requestId: exchange.requestId, conversation: conversationId },
        'export cut short',
      );
      response.destroy(error instanceof Error ? error : new Error(String(error)));
    }
  }
}

/** Answers a write's result: 200, and which replica served it when it was forwarded. */
function answered(
  exchange: Exchange,
  routed: Routed<unknown>,
  headers: Readonly<Record<string, string>> = {},
): void {
  sendJson(exchange.response, 200, routed.value, {
    ...(routed.servedBy === undefined ? {} : { 'x-polychrome-served-by': routed.servedBy }),
    ...headers,
  });
}

function scopeOf(exchange: Exchange): RequestScope {
  return { requestId: exchange.requestId, signal: exchange.signal };
}
