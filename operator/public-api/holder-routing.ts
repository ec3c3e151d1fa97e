/**
 * Where an operation that writes a conversation's journal runs (docs/api.md, "Between
 * replicas"): on this replica, or, when another replica holds the conversation's Lease, on
 * that one. The turn service says which by refusing with `details.forwardTo` naming the
 * holder (turns/turn-claims.ts); this wrapper is the one place that reads it. It sends the
 * already authenticated caller and the request, in the public API's wire form, once to the
 * holder's peer listener, and gives back the holder's answer as its own, or the holder's
 * error as an error. The bearer token never leaves this replica.
 *
 * Built without peers (the peer listener's operations, or a control plane started without
 * forwarding), it only runs locally: a request is never forwarded twice, and the caller of
 * a replica that cannot forward gets the service's 503 naming the holder.
 */
import type { Logger } from 'pino';
import { isAppError } from '../../common/errors';
import type { ConversationForensics } from '../forensics/conversation-forensics';
import { resolveRequestBody } from './forensic-requests';
import type {
  AcceptRollback,
  AnswerApproval,
  AnswerQuestion,
  Caller,
  ClearMemory,
  PostMessage,
  ResolveTurn,
  SetPaymentPolicy,
  TurnService,
} from '../turns/turn-service';
import { ApiError, errorOfAnswer, noForensics } from './api-error';
import type { PeerDirectory } from './peer-endpoints';
import type { PeerAnswer, PeerClient } from './peer-hop';
import { Operation, ROUTES } from './routes';

/** An operation's answer, and the replica that gave it when it was not this one. */
export interface Routed<T> {
  readonly value: T;
  /** The holder's identity, when the request was forwarded to it. */
  readonly servedBy?: string;
}

/** The request the operation serves: its id (named on the hop) and its signal. */
export interface RequestScope {
  readonly requestId: string;
  readonly signal: AbortSignal;
}

/** How to reach the holder; none: run locally only. */
export interface HolderPeers {
  readonly client: PeerClient;
  readonly directory: PeerDirectory;
}

export interface HolderRoutingOptions {
  readonly service: TurnService;
  readonly forensics?: Pick<ConversationForensics, 'repair' | 'erase'>;
  readonly peers?: HolderPeers;
  readonly log: Logger;
}

type RepairRequest = Parameters<ConversationForensics['repair']>[2];
type EraseRequest = Parameters<ConversationForensics['erase']>[2];

export class HolderRouting {
  constructor(private readonly options: HolderRoutingOptions) {}

  postMessage(caller: Caller, request: PostMessage, scope: RequestScope) {
    const { conversationId, ...body } = request;
    return this.run(caller, Operation.PostMessage, { conversationId }, body, scope, () =>
      this.options.service.postMessage(caller, request, scope.signal),
    );
  }

  answerApproval(caller: Caller, request: AnswerApproval, scope: RequestScope) {
    const { conversationId, requestId, ...body } = request;
    return this.run(
      caller,
      Operation.AnswerApproval,
      { conversationId, requestId },
      body,
      scope,
      () => this.options.service.answerApproval(caller, request, scope.signal),
    );
  }

  answerQuestion(caller: Caller, request: AnswerQuestion, scope: RequestScope) {
    const { conversationId, requestId, ...body } = request;
    return this.run(
      caller,
      Operation.AnswerQuestion,
      { conversationId, requestId },
      body,
      scope,
      () => this.options.service.answerQuestion(caller, request, scope.signal),
    );
  }

  resolveTurn(caller: Caller, request: ResolveTurn, scope: RequestScope) {
    const { conversationId, turnId } = request;
    const body = resolveRequestBody(request);
    return this.run(caller, Operation.ResolveTurn, { conversationId, turnId }, body, scope, () =>
      this.options.service.resolveTurn(caller, request, scope.signal),
    );
  }

  acceptRollback(caller: Caller, request: AcceptRollback, scope: RequestScope) {
    const { conversationId, ...body } = request;
    return this.run(caller, Operation.AcceptRollback, { conversationId }, body, scope, () =>
      this.options.service.acceptRollback(caller, request, scope.signal),
    );
  }

  setPaymentPolicy(caller: Caller, request: SetPaymentPolicy, scope: RequestScope) {
    const { conversationId, ...body } = request;
    return this.run(caller, Operation.SetPaymentPolicy, { conversationId }, body, scope, () =>
      this.options.service.setPaymentPolicy(caller, request, scope.signal),
    );
  }

  clearMemory(caller: Caller, request: ClearMemory, scope: RequestScope) {
    const { conversationId, key } = request;
    const ids: Record<string, string> =
      key === undefined ? { conversationId } : { conversationId, key };
    return this.run(caller, Operation.ClearMemory, ids, {}, scope, () =>
      this.options.service.clearMemory(caller, request, scope.signal),
    );
  }

  repair(caller: Caller, conversationId: string, request: RepairRequest, scope: RequestScope) {
    return this.run(caller, Operation.RepairConversation, { conversationId }, request, scope, () =>
      this.forensics().repair(caller, conversationId, request, scope.signal),
    );
  }

  erase(caller: Caller, conversationId: string, request: EraseRequest, scope: RequestScope) {
    return this.run(caller, Operation.EraseConversation, { conversationId }, request, scope, () =>
      this.forensics().erase(caller, conversationId, request, scope.signal),
    );
  }

  private forensics(): Pick<ConversationForensics, 'repair' | 'erase'> {
    const forensics = this.options.forensics;
    if (forensics === undefined) throw noForensics();
    return forensics;
  }

  /** Runs locally; when another replica holds the conversation, there instead. */
  private async run<T>(
    caller: Caller,
    operation: Operation,
    ids: Readonly<Record<string, string>>,
    body: unknown,
    scope: RequestScope,
    local: () => Promise<T>,
  ): Promise<Routed<T>> {
    try {
      return { value: await local() };
    } catch (error) {
      const holder = isAppError(error) ? error.details?.forwardTo : undefined;
      const peers = this.options.peers;
      if (typeof holder !== 'string' || peers === undefined) throw error;
      const answer = await this.forward(peers, holder, error, ids, scope, {
        operation,
        caller,
        body,
      });
      return { value: JSON.parse(answer.text) as T, servedBy: holder };
    }
  }

  /**
   * Sends the request once to the holder's peer listener (found by the holder's Pod in
   * the control plane's namespace) and returns its answer.
   *
   * @throws ApiError 503 `unavailable` when no Ready control-plane pod is the holder or the
   *   hop fails: nothing was sent anywhere, or the holder may have started the turn, and
   *   either way a retry with the same idempotency key is safe. The holder's own error
   *   (status 400 and up) as an ApiError with its code, message, details and status.
   */
  private async forward(
    peers: HolderPeers,
    holder: string,
    error: unknown,
    ids: Readonly<Record<string, string>>,
    scope: RequestScope,
    request: { operation: Operation; caller: Caller; body: unknown },
  ): Promise<PeerAnswer> {
    const conversation = ids.conversationId ?? 'of this request';
    const address = peers.directory.find(holder);
    if (address === undefined) {
      throw new ApiError(
        'unavailable',
        `replica ${JSON.stringify(holder.slice(0, 100))} holds conversation ${conversation}, and ` +
          `no Ready pod of that name is among ${peers.directory.source}, so the request was ` +
          'not forwarded; retry shortly (with the same idempotency key for a message: that is safe)',
        { details: { holder: holder.slice(0, 100) }, cause: error },
      );
    }
    let answer: PeerAnswer;
    try {
      answer = await peers.client.send(
        address,
        {
          ...publicRequest(request.operation, ids),
          envelope: { caller: request.caller, body: request.body },
          requestId: scope.requestId,
        },
        scope.signal,
      );
    } catch (cause) {
      const reason = cause instanceof Error ? cause.message : String(cause);
      this.options.log.warn(
        { err: cause, requestId: scope.requestId, holder, peer: address },
        'forwarding failed',
      );
      throw new ApiError(
        'unavailable',
        `replica ${holder} holds conversation ${conversation}, and forwarding to it failed ` +
          `(${reason}); retry (with the same idempotency key for a message: that is safe)`,
        { details: { holder }, cause },
      );
    }
    if (answer.status >= 400) {
      throw errorOfAnswer(
        answer.status,
        answer.text,
        `replica ${holder} answered ${String(answer.status)}`,
        {
          holder,
        },
      );
    }
    return answer;
  }
}

/**
 * The public route of `operation` that writes (POST, PUT or DELETE) and takes exactly `ids` as
 * its parameters, with them filled in: what the peer listener serves.
 */
function publicRequest(
  operation: Operation,
  ids: Readonly<Record<string, string>>,
): { method: string; path: string } {
  const names = Object.keys(ids).sort().join(',');
  const route = ROUTES.find(
    (r) =>
      r.operation === operation &&
      r.method !== 'GET' &&
      [...r.template.matchAll(/\{([A-Za-z]+)\}/gu)]
        .map((m) => m[1])
        .sort()
        .join(',') === names,
  );
  if (route === undefined) throw new Error(`no write route serves ${operation} with ${names}`);
  const path = route.template.replace(/\{([A-Za-z]+)\}/gu, (_, name: string) =>
    encodeURIComponent(ids[name] ?? ''),
  );
  return { method: route.method, path };
}
