import type { IncomingMessage, ServerResponse } from 'node:http';
import { context } from '@opentelemetry/api';
import {
  extractTraceHeaders,
  isTracing,
  SpanKind,
  SpanStatusCode,
  startSpan,
} from '../../common/tracing';
import { matchRoute } from './routes';

/** The public API route table's template of a request, if any (routes.ts). */
function publicRouteTemplate(method: string, path: string): string | undefined {
  const match = matchRoute(method, path);
  return match.kind === 'matched'
    ? match.route.template
    : match.kind === 'method_not_allowed'
      ? match.template
      : undefined;
}

/**
 * Runs `handle` in the request's SERVER span, after the HTTP semantic conventions: named
 * `<method> <route template>` (the route table's, so ids never reach a span name; an
 * unmatched path is just `<method>`), with `http.request.method`, `http.route`, `url.path`
 * and, when the response closes, `http.response.status_code`. Its parent is the caller's
 * `traceparent` (the propagators of `OTEL_PROPAGATORS`); a missing or malformed one
 * starts a new trace. A 5xx is status ERROR; a 4xx is the caller's and is not. With
 * tracing off, `handle()` and nothing else.
 *
 * @param routeOf the route template of a method and path, or undefined for an unknown
 *   one; @default the public API's route table (the Kubernetes door passes its own)
 */
export function tracedRequest(
  request: IncomingMessage,
  response: ServerResponse,
  handle: () => Promise<void>,
  routeOf: (method: string, path: string) => string | undefined = publicRouteTemplate,
): Promise<void> {
  if (!isTracing()) return handle();
  const method = request.method ?? 'GET';
  const rawUrl = request.url ?? '/';
  const queryAt = rawUrl.indexOf('?');
  const path = queryAt < 0 ? rawUrl : rawUrl.slice(0, queryAt);
  const route = routeOf(method, path);
  const traced = startSpan(route === undefined ? method : `${method} ${route}`, {
    kind: SpanKind.SERVER,
    parent: extractTraceHeaders(request.headers),
    attributes: {
      'http.request.method': method,
      'url.path': path.slice(0, 200),
      ...(route === undefined ? {} : { 'http.route': route }),
    },
  });
  if (traced === undefined) return handle();
  const { span } = traced;
  response.once('close', () => {
    span.setAttribute('http.response.status_code', response.statusCode);
    if (response.statusCode >= 500) {
      span.setStatus({ code: SpanStatusCode.ERROR });
      span.setAttribute('error.type', String(response.statusCode));
    }
    span.end();
  });
  return context.with(traced.context, handle);
}
