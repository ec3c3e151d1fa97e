/**
 * The peer door (docs/api.md, "Between replicas"): another control-plane replica forwards
 * a request for a conversation this replica holds. The handshake already required a
 * certificate from the Polychrome CA; this door takes only a control-plane replica's (its
 * own role: a state-plane role such as the writer is not enough), only the forwarded
 * operations, and the caller from the envelope the forwarding replica sent, which it
 * authenticated. A bearer token never travels on a hop, so one that arrives means a
 * misrouted client.
 */
import type { IncomingMessage } from 'node:http';
import type { TLSSocket } from 'node:tls';
import {
  certificateIdentityOf,
  CertificateRole,
  describeCertificateIdentity,
  describeRoles,
  isControlPlaneReplica,
} from '../../common/certificate-identity';
import { ApiError, type ErrorAnswer } from './api-error';
import { Listener, type Asked, type Door, type DoorMatch, type Exchange } from './door';
import { headerOf } from './http-io';
import { FORWARDED_HEADER, parsePeerEnvelope } from './peer-hop';
import { answerPublicError, conversationIdOf, routeOf } from './public-door';
import { readJsonBody } from './request-body';
import { Operation } from './routes';

/** The only operations the peer listener serves: the ones a replica forwards. */
export const PEER_OPERATIONS: ReadonlySet<Operation> = new Set([
  Operation.PostMessage,
  Operation.AnswerApproval,
  Operation.AnswerQuestion,
  Operation.RepairConversation,
  Operation.ResolveTurn,
  Operation.AcceptRollback,
  Operation.SetPaymentPolicy,
  Operation.ClearMemory,
]);

export class PeerDoor implements Door {
  readonly listener = Listener.Peer;

  constructor(private readonly maxBodyBytes: number) {}

  match(request: IncomingMessage, method: string, path: string): DoorMatch {
    const match = routeOf(method, path);
    const refusal = peerRefusal(request, match);
    return refusal === undefined
      ? match
      : { kind: 'refused', template: match.template, error: refusal };
  }

  async ask(
    exchange: Exchange,
    _route: unknown,
    params: Readonly<Record<string, string>>,
  ): Promise<Asked> {
    const envelope = parsePeerEnvelope(await readJsonBody(exchange.request, this.maxBodyBytes));
    return {
      caller: envelope.caller,
      conversationId: () => conversationIdOf(exchange, params),
      body: () => Promise.resolve(envelope.body),
      recheck: () => () =>
        Promise.reject(new ApiError('not_found', 'the peer port serves no streams')),
    };
  }

  answerError(
    exchange: Pick<Exchange, 'request' | 'response' | 'requestId'>,
    error: unknown,
  ): ErrorAnswer {
    return answerPublicError(exchange, error);
  }
}

/** Why the peer listener refuses a request before anything reads it, or undefined. */
function peerRefusal(request: IncomingMessage, match: DoorMatch): ApiError | undefined {
  const socket = request.socket as TLSSocket;
  const identity = socket.authorized
    ? certificateIdentityOf(socket.getPeerCertificate())
    : undefined;
  if (!isControlPlaneReplica(identity)) {
    return new ApiError(
      'permission_denied',
      `the peer port takes requests only from control-plane replicas (a certificate with O or ` +
        `OU ${CertificateRole.ControlPlaneReplica}), and this one is ` +
        (identity === undefined
          ? 'not authorized'
          : `"${describeCertificateIdentity(identity)}", holding ${describeRoles(identity.roles)}`) +
        '; clients use the public API',
    );
  }
  if (request.headers.authorization !== undefined) {
    return new ApiError(
      'invalid_argument',
      'a forwarded request never carries an Authorization header; send the caller in the body',
      { details: { field: 'Authorization' } },
    );
  }
  if (headerOf(request, FORWARDED_HEADER) === undefined) {
    return new ApiError(
      'invalid_argument',
      `a forwarded request names the forwarding replica's request id in ${FORWARDED_HEADER}`,
      { details: { field: FORWARDED_HEADER } },
    );
  }
  if (match.kind !== 'operation' || !PEER_OPERATIONS.has(match.route.operation)) {
    return new ApiError(
      'not_found',
      'the peer port serves only forwarded messages, approval answers and question answers; ' +
        'use the public API for anything else',
    );
  }
  return undefined;
}
