/**
 * The Kubernetes door's two questions (docs/kube-api.md), for its listener
 * (kube-listener.ts): which operation a path asks for (kube-routes.ts: a Conversation
 * subresource or a persona's payment policy runs its public API operation), and who is
 * calling (the front proxy's user, allowed by a SubjectAccessReview: kube-door.ts for a
 * Conversation, kube-persona-policies.ts for a persona). Discovery, the `sessions` and
 * `personaroles` resources and the forensics UI it answers itself. Errors are Kubernetes
 * Status objects.
 */
import type { IncomingMessage } from 'node:http';
import type { TLSSocket } from 'node:tls';
import { ApiError, errorAnswer, type ErrorAnswer } from '../public-api/api-error';
import type { CallerLimits } from '../public-api/caller-limits';
import { Listener, type Asked, type Door, type DoorMatch, type Exchange } from '../public-api/door';
import { headerOf, sendJson } from '../public-api/http-io';
import { discardBody, hasNoBody, readJsonBody } from '../public-api/request-body';
import { Operation, type Route } from '../public-api/routes';
import type { UiAssets } from '../ui/ui-assets';
import type { KubeUser } from './front-proxy';
import type { KubeAdmission, KubeDoor } from './kube-door';
import type { KubePersonaPolicies } from './kube-persona-policies';
import { KUBE_SUBRESOURCES } from './kube-subresources';
import {
  KUBE_UI,
  kubePersonaPolicyTemplate,
  kubeSessionsTemplate,
  kubeSubresourceTemplate,
  kubeUiTemplate,
  matchKubeRoute,
  PERSONA_POLICY_METHODS,
  type KubeRouteMatch,
  type SessionsAction,
} from './kube-routes';
import type { KubeSessions } from './kube-sessions';
import { kubeStatusBody } from './kube-status';

/** What the door answers with besides the operations. */
export interface KubeApiDoorOptions {
  /** Who is calling and may they: the front proxy, SubjectAccessReviews, names to uids. */
  readonly door: KubeDoor;
  /** The `sessions` and `personaroles` resources (kube-sessions.ts). None: answered NotFound. */
  readonly sessions?: KubeSessions;
  /**
   * Who asks for a persona's payment policy (kube-persona-policies.ts). None: the
   * `personapaymentpolicies` resource is answered NotFound.
   */
  readonly personaPolicies?: KubePersonaPolicies;
  /** The forensics UI's files (operator/ui). None: answered NotFound. */
  readonly ui?: UiAssets;
}

/** The door's two questions, and its Status answers. */
export class KubeApiDoor implements Door {
  readonly listener = Listener.Kube;

  constructor(
    private readonly options: KubeApiDoorOptions,
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
      case 'persona_policy':
        return personaPolicyOperation(match);
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
    if (isPersonaPolicy(route)) return this.askPersona(exchange, route, params);
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

  /**
   * A persona's payment policy: the caller kube-persona-policies.ts makes of the user once
   * RBAC allowed the verb on that persona's name. It names no conversation and is no stream.
   */
  private async askPersona(
    exchange: Exchange,
    route: Route,
    params: Readonly<Record<string, string>>,
  ): Promise<Asked> {
    const user = this.user(exchange.request);
    const policies = this.options.personaPolicies;
    if (policies === undefined) {
      throw new ApiError(
        'not_found',
        'this control plane does not serve persona payment policies on this door (it was started without a records link); set them on the public API',
      );
    }
    // The verb of the operation that runs, so a write is never admitted as a read.
    const verb = Object.values(PERSONA_POLICY_METHODS).find(
      (m) => m.operation === route.operation,
    )?.verb;
    if (verb === undefined) throw new Error(`${route.operation} is no persona policy operation`);
    const personaId = params.personaId ?? '';
    const caller = await policies.caller(user, { personaId, verb }, exchange.signal);
    this.limits.admitRequest(caller);
    return {
      caller,
      conversationId: () => {
        throw new Error('a persona payment policy request names no conversation');
      },
      body: () => readJsonBody(exchange.request, this.maxBodyBytes),
      recheck: () => () => Promise.reject(new Error('a persona payment policy is no stream')),
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
 * A Kubernetes door request's route template for its span name: the subresource's or the
 * persona policy's template or the discovery path, never a path holding a namespace, a
 * name or a persona id.
 */
export function kubeRouteTemplate(method: string, path: string): string | undefined {
  const match = matchKubeRoute(method, path);
  if (match.kind === 'discovery') return path;
  if (match.kind === 'persona_policy') return kubePersonaPolicyTemplate();
  return match.kind === 'subresource'
    ? kubeSubresourceTemplate(match.subresource.name, match.subresource.perRequest === true)
    : undefined;
}

/** Whether `route` is a persona's payment policy (the door's `personapaymentpolicies`). */
function isPersonaPolicy(route: Route): boolean {
  return (
    route.operation === Operation.SetPersonaPaymentPolicy ||
    route.operation === Operation.GetPersonaPaymentPolicy
  );
}

/** `personapaymentpolicies/{personaId}` runs the public API's persona policy operation. */
function personaPolicyOperation(
  match: Extract<KubeRouteMatch, { kind: 'persona_policy' }>,
): DoorMatch {
  const template = kubePersonaPolicyTemplate();
  return {
    kind: 'operation',
    template,
    route: {
      method: match.method,
      template,
      operation: PERSONA_POLICY_METHODS[match.method].operation,
      authenticated: true,
    },
    params: { personaId: match.personaId },
  };
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
