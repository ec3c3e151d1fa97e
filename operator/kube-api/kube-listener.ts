/**
 * The Kubernetes door's listener (docs/kube-api.md): HTTPS for kube-apiserver's front
 * proxy, serving api.polychrome.dev. It answers the door's two questions: which operation
 * a path asks for (kube-routes.ts: a Conversation subresource runs its public API
 * operation), and who is calling (the front proxy's user, allowed that subresource of
 * that Conversation by a SubjectAccessReview, with the Conversation's uid: kube-door.ts).
 * Discovery, the `sessions` resource and the forensics UI it answers itself. Errors are
 * Kubernetes Status objects. The operations are the public API's.
 */
import type { IncomingMessage, Server } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { TLSSocket } from 'node:tls';
import { ApiError, errorAnswer, type ErrorAnswer } from '../public-api/api-error';
import type { CallerLimits } from '../public-api/caller-limits';
import {
  Listener,
  type ApiListenerContext,
  type Asked,
  type Door,
  type DoorMatch,
  type Exchange,
} from '../public-api/door';
import { boundAddress, closed, headerOf, listen, sendJson } from '../public-api/http-io';
import { discardBody, hasNoBody, readJsonBody } from '../public-api/request-body';
import { tracedRequest } from '../public-api/request-span';
import { Operation, type Route } from '../public-api/routes';
import type { UiAssets } from '../ui/ui-assets';
import type { KubeUser } from './front-proxy';
import type { KubeAdmission, KubeDoor } from './kube-door';
import { KUBE_SUBRESOURCES } from './kube-subresources';
import {
  KUBE_UI,
  kubeSessionsTemplate,
  kubeSubresourceTemplate,
  kubeUiTemplate,
  matchKubeRoute,
  type KubeRouteMatch,
  type SessionsAction,
} from './kube-routes';
import type { KubeSessions } from './kube-sessions';
import { kubeStatusBody } from './kube-status';

/** The Kubernetes door's port (the APIService's Service targets it). */
export const DEFAULT_KUBE_API_PORT = 8444;

/** The Kubernetes door's listener. */
export interface KubeListenerOptions {
  /** @default '0.0.0.0' */
  readonly host?: string;
  /** 0 lets the system pick (tests). @default {@link DEFAULT_KUBE_API_PORT} */
  readonly port?: number;
  /** The serving certificate (PEM) the APIService's caBundle vouches for, and its key. */
  readonly cert: string;
  readonly key: string;
  /**
   * Registers a listener for a renewed certificate and key (common/serving-certificate.ts);
   * the listener serves them to new connections. None: served as given until restart.
   */
  readonly onCertificateChange?: (listener: (pair: { cert: string; key: string }) => void) => void;
  /** Who is calling and may they: the front proxy, SubjectAccessReviews, names to uids. */
  readonly door: KubeDoor;
  /** The `sessions` resource (kube-sessions.ts). None: answered NotFound. */
  readonly sessions?: KubeSessions;
  /** The forensics UI's files (operator/ui). None: answered NotFound. */
  readonly ui?: UiAssets;
}

export class KubeListener {
  private server: Server | undefined;

  constructor(readonly options: KubeListenerOptions) {}

  /**
   * Reads the front proxy's configuration and listens. The handshake asks for a client
   * certificate but admits every client: a request without one from the requestheader CA
   * is answered 401 by the door, with a message (rejecting in the handshake would leave
   * the caller with a bare TLS alert).
   */
  async start(context: ApiListenerContext): Promise<{ host: string; port: number }> {
    const { options } = this;
    const door = new KubeApiDoor(options, context.limits, context.maxBodyBytes);
    const requestHeader = await options.door.start(AbortSignal.timeout(30_000));
    // What new connections get: the front-proxy CA and the serving pair, each replaced
    // when it changes (a rotated CA, a renewed certificate).
    let clientCa = requestHeader.clientCa;
    let serving = { cert: options.cert, key: options.key };
    const secureContext = (): { cert: string; key: string; ca: string } => ({
      ...serving,
      ca: clientCa,
    });
    const server = createHttpsServer(
      { ...secureContext(), requestCert: true, rejectUnauthorized: false, minVersion: 'TLSv1.2' },
      (request, response) =>
        void tracedRequest(
          request,
          response,
          () => context.serve(door, request, response),
          kubeRouteTemplate,
        ),
    );
    options.door.onConfigChange((next) => {
      clientCa = next.clientCa;
      server.setSecureContext(secureContext());
    });
    options.onCertificateChange?.((next) => {
      serving = next;
      server.setSecureContext(secureContext());
    });
    this.server = server;
    await listen(server, options.port ?? DEFAULT_KUBE_API_PORT, options.host);
    return this.address();
  }

  /**
   * The bound address.
   * @throws Error when it is not listening.
   */
  address(): { host: string; port: number } {
    return boundAddress(this.server, 'the Kubernetes door');
  }

  /** Stops taking connections and the door's watches; resolves once the listener closed. */
  stopListening(): Promise<void> {
    this.options.door.stop();
    return closed(this.server);
  }

  closeAllConnections(): void {
    this.server?.closeAllConnections();
  }
}

/** The door's two questions, and its Status answers. */
class KubeApiDoor implements Door {
  readonly listener = Listener.Kube;

  constructor(
    private readonly options: KubeListenerOptions,
    private readonly limits: CallerLimits,
    private readonly maxBodyBytes: number,
  ) {}

  match(_request: IncomingMessage, method: string, path: string): DoorMatch {
    const match = matchKubeRoute(method, path);
    switch (match.kind) {
      case 'discovery':
        return {
          kind: 'own',
          template: path,
          serve: (exchange) => this.serveDiscovery(exchange, match.body),
        };
      case 'sessions':
        return {
          kind: 'own',
          template: kubeSessionsTemplate(match.action),
          serve: (exchange) => this.serveSessions(exchange, match.action),
        };
      case 'ui':
        return {
          kind: 'own',
          template: kubeUiTemplate(),
          serve: (exchange) => this.serveUi(exchange, match),
        };
      case 'method_not_allowed':
        return {
          kind: 'refused',
          template: path,
          error: new ApiError(
            'invalid_argument',
            `${path} does not accept ${method}; use ${match.allow.join(' or ')}`,
            { httpStatus: 405, headers: { allow: match.allow.join(', ') } },
          ),
        };
      case 'not_found':
        return {
          kind: 'refused',
          template: 'unmatched',
          error: new ApiError(
            'not_found',
            `no subresource ${method} ${path.slice(0, 200)}; docs/kube-api.md lists them (kubectl get --raw /apis/api.polychrome.dev/v1alpha1)`,
          ),
        };
      case 'subresource':
        return subresourceOperation(match);
    }
  }

  async ask(
    exchange: Exchange,
    route: Route,
    params: Readonly<Record<string, string>>,
  ): Promise<Asked> {
    const admission = await this.admit(exchange, route, params);
    this.limits.admitRequest(admission.caller);
    const conversationId = admission.caller.kubernetes?.conversationId ?? '';
    exchange.notes.conversation = conversationId;
    return {
      caller: admission.caller,
      conversationId: () => conversationId,
      body: () => this.body(exchange, route),
      // Does RBAC still allow the stream (a new SubjectAccessReview), and does the name
      // still mean the same Conversation?
      recheck: (followed) => async () => {
        const again = await this.admit(exchange, route, params);
        if (again.caller.kubernetes?.conversationId !== followed) {
          throw new ApiError(
            'not_found',
            `the Conversation this stream followed (${followed}) is gone; its name now means another one`,
          );
        }
      },
    };
  }

  /** Kubernetes clients read a Status; no Bearer challenge on this door. */
  answerError(
    exchange: Pick<Exchange, 'request' | 'response' | 'requestId'>,
    error: unknown,
  ): ErrorAnswer {
    const answer = errorAnswer(error, exchange.requestId);
    discardBody(exchange.request);
    const { 'www-authenticate': _challenge, ...headers } = answer.headers;
    sendJson(
      exchange.response,
      answer.status,
      kubeStatusBody(answer.status, answer.body.error),
      headers,
    );
    return answer;
  }

  /**
   * The door's verdict: the front proxy's user, allowed this subresource of this
   * Conversation by a SubjectAccessReview, with the Conversation's uid.
   */
  private admit(
    exchange: Exchange,
    route: Route,
    params: Readonly<Record<string, string>>,
  ): Promise<KubeAdmission> {
    const { namespace, name, subresource } = params;
    const sub = KUBE_SUBRESOURCES.find((s) => s.name === subresource && s.method === route.method);
    if (namespace === undefined || name === undefined || sub === undefined) {
      throw new Error('a Kubernetes door request without its target');
    }
    return this.options.door.admit(
      this.user(exchange.request),
      { namespace, name, subresource: sub },
      exchange.signal,
    );
  }

  /**
   * The body as the operation reads it. A DELETE of an approval or a question is the
   * cancel (RBAC `delete`), with an optional body `{"comment"}`; a POST is read as sent (its
   * `cancel` is refused by the turn code: a `create` grant does not cancel).
   */
  private async body(exchange: Exchange, route: Route): Promise<unknown> {
    const read = (): Promise<unknown> => readJsonBody(exchange.request, this.maxBodyBytes);
    const type =
      route.operation === Operation.AnswerApproval
        ? 'approval'
        : route.operation === Operation.AnswerQuestion
          ? 'question'
          : undefined;
    if (type === undefined || route.method !== 'DELETE') return read();
    const sent: unknown = hasNoBody(exchange.request) ? {} : await read();
    const fields = typeof sent === 'object' && sent !== null && !Array.isArray(sent) ? sent : {};
    const extra = Object.keys(fields).find((k) => k !== 'comment');
    if (extra !== undefined || fields !== sent) {
      throw new ApiError(
        'invalid_argument',
        `a DELETE of ${type}s/{requestId} cancels it and takes no body but {"comment": "..."}; got ${extra === undefined ? 'a body that is not an object' : `the field ${JSON.stringify(extra.slice(0, 40))}`}`,
        { details: { field: extra ?? 'body' } },
      );
    }
    const comment: unknown = Reflect.get(fields, 'comment');
    const withComment = comment === undefined ? {} : { comment };
    return type === 'approval'
      ? { decision: 'cancel', ...withComment }
      : { cancel: true, ...withComment };
  }

  /** The front proxy's user, or the door's 401 (no certificate from the requestheader CA). */
  private user(request: IncomingMessage): KubeUser {
    const socket = request.socket as TLSSocket;
    const commonName: unknown = socket.authorized
      ? Reflect.get(socket.getPeerCertificate().subject ?? {}, 'CN')
      : undefined;
    return this.options.door.authenticate(
      {
        authorized: socket.authorized,
        commonName: typeof commonName === 'string' ? commonName : undefined,
      },
      request.headersDistinct,
    );
  }

  /** Discovery: any user the front proxy vouches for may read it (the aggregator does). */
  private serveDiscovery(exchange: Exchange, body: object): Promise<void> {
    this.user(exchange.request);
    sendJson(exchange.response, 200, body);
    return Promise.resolve();
  }

  /**
   * The `sessions` resource: the front proxy's user, then kube-sessions.ts (which asks its
   * own SubjectAccessReview). The answer holds the new token; nothing here logs it.
   */
  private async serveSessions(exchange: Exchange, action: SessionsAction): Promise<void> {
    const user = this.user(exchange.request);
    const sessions = this.options.sessions;
    if (sessions === undefined) {
      throw new ApiError(
        'not_found',
        'this control plane does not serve sessions (it was started without a records link); mint tokens through the records',
      );
    }
    const { response, signal } = exchange;
    if (action.kind === 'revoke') {
      sendJson(response, 200, await sessions.revoke(user, action.id, signal));
      return;
    }
    const body = await readJsonBody(exchange.request, this.maxBodyBytes);
    if (action.kind === 'set-roles') {
      sendJson(response, 200, await sessions.setRoles(user, body, signal));
      return;
    }
    sendJson(response, 201, await sessions.mint(user, body, signal));
  }

  /**
   * The forensics UI's files (docs/ui.md): the front proxy's user, the SubjectAccessReview
   * for `get` on `ui` in the namespace, then the file from memory (operator/ui).
   */
  private async serveUi(
    exchange: Exchange,
    target: { readonly namespace: string; readonly file: string },
  ): Promise<void> {
    const user = this.user(exchange.request);
    await this.options.door.admitNamespaced(
      user,
      {
        namespace: target.namespace,
        resource: KUBE_UI.resource,
        verb: KUBE_UI.verb,
        name: target.file,
      },
      exchange.signal,
    );
    const ui = this.options.ui;
    if (ui === undefined) {
      throw new ApiError('not_found', 'this control plane serves no forensics UI (docs/ui.md)');
    }
    const answer = ui.serve(target.file, headerOf(exchange.request, 'if-none-match'));
    exchange.response.writeHead(answer.status, {
      ...answer.headers,
      'content-length': answer.body.length,
    });
    exchange.response.end(answer.body);
  }
}

/**
 * A Kubernetes door request's route template for its span name: the subresource's
 * template or the discovery path, never a path holding a namespace or a name.
 */
function kubeRouteTemplate(method: string, path: string): string | undefined {
  const match = matchKubeRoute(method, path);
  if (match.kind === 'discovery') return path;
  return match.kind === 'subresource'
    ? kubeSubresourceTemplate(match.subresource.name, match.subresource.perRequest === true)
    : undefined;
}

/** A Conversation subresource runs its public API operation, with the door's parameters. */
function subresourceOperation(match: Extract<KubeRouteMatch, { kind: 'subresource' }>): DoorMatch {
  const template = kubeSubresourceTemplate(
    match.subresource.name,
    match.subresource.perRequest === true,
  );
  return {
    kind: 'operation',
    template,
    route: {
      method: match.subresource.method,
      template,
      operation: match.subresource.operation,
      authenticated: true,
    },
    params: {
      namespace: match.namespace,
      name: match.name,
      subresource: match.subresource.name,
      ...(match.requestId === undefined
        ? {}
        : { [match.subresource.itemParam ?? 'requestId']: match.requestId }),
    },
  };
}
