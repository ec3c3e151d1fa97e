/**
 * The public API's route table (v1). One row per (method, path template); the OpenAPI
 * document (docs/api/openapi.json) lists exactly these, with the same `operationId`s, and
 * `openapi.test.ts` fails when the two drift apart. Templates are also the `route` label of
 * the request metrics and logs, so a label never carries an id.
 */

/** The operations the API serves. */
export const Operation = {
  CreateConversation: 'createConversation',
  GetConversation: 'getConversation',
  PostMessage: 'postMessage',
  GetTranscript: 'getTranscript',
  GetMemory: 'getMemory',
  ClearMemory: 'clearMemory',
  AnswerApproval: 'answerApproval',
  AnswerQuestion: 'answerQuestion',
  StreamEvents: 'streamEvents',
  ExportConversation: 'exportConversation',
  RepairConversation: 'repairConversation',
  EraseConversation: 'eraseConversation',
  ResolveTurn: 'resolveTurn',
  AcceptRollback: 'acceptRollback',
  SetPaymentPolicy: 'setPaymentPolicy',
  GetPaymentPolicy: 'getPaymentPolicy',
  SetPersonaPaymentPolicy: 'setPersonaPaymentPolicy',
  GetPersonaPaymentPolicy: 'getPersonaPaymentPolicy',
  GetOpenApi: 'getOpenApi',
} as const;
export type Operation = (typeof Operation)[keyof typeof Operation];

/** One route: the method, the path template with `{param}` segments, its operation. */
export interface Route {
  readonly method: 'GET' | 'POST' | 'PUT' | 'DELETE';
  readonly template: string;
  readonly operation: Operation;
  /** False only for the OpenAPI document, which anyone may read. */
  readonly authenticated: boolean;
}

export const ROUTES: readonly Route[] = [
  {
    method: 'POST',
    template: '/v1/conversations',
    operation: Operation.CreateConversation,
    authenticated: true,
  },
  {
    method: 'GET',
    template: '/v1/conversations/{conversationId}',
    operation: Operation.GetConversation,
    authenticated: true,
  },
  {
    method: 'POST',
    template: '/v1/conversations/{conversationId}/messages',
    operation: Operation.PostMessage,
    authenticated: true,
  },
  {
    method: 'GET',
    template: '/v1/conversations/{conversationId}/transcript',
    operation: Operation.GetTranscript,
    authenticated: true,
  },
  {
    method: 'GET',
    template: '/v1/conversations/{conversationId}/memory',
    operation: Operation.GetMemory,
    authenticated: true,
  },
  {
    method: 'DELETE',
    template: '/v1/conversations/{conversationId}/memory',
    operation: Operation.ClearMemory,
    authenticated: true,
  },
  {
    method: 'DELETE',
    template: '/v1/conversations/{conversationId}/memory/{key}',
    operation: Operation.ClearMemory,
    authenticated: true,
  },
  {
    method: 'POST',
    template: '/v1/conversations/{conversationId}/approvals/{requestId}',
    operation: Operation.AnswerApproval,
    authenticated: true,
  },
  {
    method: 'POST',
    template: '/v1/conversations/{conversationId}/questions/{requestId}',
    operation: Operation.AnswerQuestion,
    authenticated: true,
  },
  {
    method: 'GET',
    template: '/v1/conversations/{conversationId}/stream',
    operation: Operation.StreamEvents,
    authenticated: true,
  },
  {
    method: 'GET',
    template: '/v1/conversations/{conversationId}/export',
    operation: Operation.ExportConversation,
    authenticated: true,
  },
  {
    method: 'POST',
    template: '/v1/conversations/{conversationId}/repair',
    operation: Operation.RepairConversation,
    authenticated: true,
  },
  {
    method: 'POST',
    template: '/v1/conversations/{conversationId}/erase',
    operation: Operation.EraseConversation,
    authenticated: true,
  },
  {
    method: 'POST',
    template: '/v1/conversations/{conversationId}/turns/{turnId}/resolve',
    operation: Operation.ResolveTurn,
    authenticated: true,
  },
  {
    method: 'POST',
    template: '/v1/conversations/{conversationId}/accept-rollback',
    operation: Operation.AcceptRollback,
    authenticated: true,
  },
  {
    method: 'PUT',
    template: '/v1/conversations/{conversationId}/payment-policy',
    operation: Operation.SetPaymentPolicy,
    authenticated: true,
  },
  {
    method: 'GET',
    template: '/v1/conversations/{conversationId}/payment-policy',
    operation: Operation.GetPaymentPolicy,
    authenticated: true,
  },
  {
    method: 'PUT',
    template: '/v1/personas/{personaId}/payment-policy',
    operation: Operation.SetPersonaPaymentPolicy,
    authenticated: true,
  },
  {
    method: 'GET',
    template: '/v1/personas/{personaId}/payment-policy',
    operation: Operation.GetPersonaPaymentPolicy,
    authenticated: true,
  },
  {
    method: 'GET',
    template: '/v1/openapi.json',
    operation: Operation.GetOpenApi,
    authenticated: false,
  },
];

/** The `route` label of a request that matched no template. */
export const UNMATCHED_ROUTE = 'unmatched';

/** What a request's method and path matched. */
export type RouteMatch =
  | {
      readonly kind: 'matched';
      readonly route: Route;
      /** Path parameters, percent-decoded; a segment that does not decode is kept as sent. */
      readonly params: Readonly<Record<string, string>>;
    }
  /** A template matched the path but not the method; `allow` lists the methods it has. */
  | { readonly kind: 'method_not_allowed'; readonly template: string; readonly allow: string[] }
  | { readonly kind: 'not_found' };

function splitPath(path: string): string[] {
  return path.split('/').slice(1);
}

const compiled = ROUTES.map((route) => ({ route, segments: splitPath(route.template) }));

function decodeSegment(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    return segment;
  }
}

function matchTemplate(
  segments: readonly string[],
  path: readonly string[],
): Record<string, string> | undefined {
  if (segments.length !== path.length) return undefined;
  const params: Record<string, string> = {};
  for (const [index, segment] of segments.entries()) {
    const actual = path[index] ?? '';
    if (segment.startsWith('{') && segment.endsWith('}')) {
      if (actual === '') return undefined;
      params[segment.slice(1, -1)] = decodeSegment(actual);
    } else if (segment !== actual) {
      return undefined;
    }
  }
  return params;
}

/**
 * Matches a request. Paths are exact: no trailing slash, no empty segment. Parameter shape
 * (a conversation id must be a uid) is the handler's check, so a malformed id answers 400
 * rather than 404.
 *
 * @param path the URL path without its query.
 */
export function matchRoute(method: string, path: string): RouteMatch {
  const parts = splitPath(path);
  let template: string | undefined;
  const allow: string[] = [];
  for (const { route, segments } of compiled) {
    const params = matchTemplate(segments, parts);
    if (params === undefined) continue;
    if (route.method === method) return { kind: 'matched', route, params };
    template ??= route.template;
    allow.push(route.method);
  }
  return template === undefined
    ? { kind: 'not_found' }
    : { kind: 'method_not_allowed', template, allow };
}
