import type { Metadata } from '@grpc/grpc-js';
import {
  context,
  diag,
  propagation,
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace,
  type Attributes,
  type Context,
  type Link,
  type Span,
  type SpanOptions,
  type TextMapGetter,
  type TextMapSetter,
} from '@opentelemetry/api';
import { isAppError } from './errors';
// Loads no SDK package itself: startTraceSdk imports them when tracing starts.
import { startTraceSdk } from './tracing-sdk';

/**
 * OpenTelemetry traces (docs/observability.md#traces). Our code makes its spans through
 * the API package only; the SDK is loaded by {@link startTracing}, from each plane's
 * `main.ts`, and only when the environment asks for an exporter. Without it the API's
 * no-op tracer is all that runs, and the wrappers below skip even that
 * ({@link isTracing}).
 */

/** The instrumentation scope of every span Polychrome makes. */
export const TRACER_NAME = 'polychrome';

// The API's proxy until the SDK starts; then the SDK's own tracer, so each span skips the
// proxy's delegation.
let tracer = trace.getTracer(TRACER_NAME);
let active = false;

/** True once {@link startTracing} started the SDK in this process. */
export function isTracing(): boolean {
  return active;
}

function nonEmpty(value: string | undefined): boolean {
  return value !== undefined && value.trim() !== '';
}

/**
 * True when `env` asks for trace export: an OTLP endpoint (`OTEL_EXPORTER_OTLP_ENDPOINT` or
 * `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) or an `OTEL_TRACES_EXPORTER` other than `none`,
 * and `OTEL_SDK_DISABLED` is not `true`. Everything else (sampler, propagators, service
 * name, protocol) is the SDK's to read.
 */
export function tracingRequested(env: NodeJS.ProcessEnv = process.env): boolean {
  if (env.OTEL_SDK_DISABLED?.trim().toLowerCase() === 'true') return false;
  const exporters = (env.OTEL_TRACES_EXPORTER ?? '')
    .split(',')
    .map((name) => name.trim())
    .filter((name) => name !== '');
  if (exporters.length > 0) return exporters.some((name) => name !== 'none');
  return (
    nonEmpty(env.OTEL_EXPORTER_OTLP_ENDPOINT) || nonEmpty(env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT)
  );
}

/** A started SDK: {@link shutdown} flushes the spans not yet exported. */
export interface Tracing {
  shutdown(): Promise<void>;
}

/**
 * Starts the OpenTelemetry SDK when {@link tracingRequested}, else does nothing and loads
 * nothing. `service` is the `service.name` unless `OTEL_SERVICE_NAME` or
 * `OTEL_RESOURCE_ATTRIBUTES` names one (the SDK's resource detection wins over it).
 * Traces only: metrics stay on Prometheus and logs on stdout, whatever
 * `OTEL_METRICS_EXPORTER` and `OTEL_LOGS_EXPORTER` say. The SDK is built from its parts
 * (`common/tracing-sdk.ts`), not sdk-node.
 *
 * @param warn where a variable's value that cannot be honoured is reported (the plane's
 *   log); @default the API's `diag`, silent unless `OTEL_LOG_LEVEL` is set
 * @returns the SDK to shut down on exit, or undefined when tracing is off.
 */
export async function startTracing(
  service: string,
  warn: (message: string) => void = (message) => diag.warn(message),
): Promise<Tracing | undefined> {
  if (!tracingRequested(process.env)) return undefined;
  const sdk = await startTraceSdk(service, process.env, warn);
  if (sdk === undefined) return undefined;
  tracer = sdk.provider.getTracer(TRACER_NAME);
  active = true;
  return {
    shutdown: async () => {
      active = false;
      await sdk.shutdown();
    },
  };
}

/**
 * The active span's ids for a log line, or nothing when there is no valid span. A new
 * object every time: pino merges the line's own fields into what a mixin returns.
 */
export function traceLogFields(): { trace_id?: string; span_id?: string } {
  if (!active) return {};
  const span = trace.getActiveSpan();
  if (span === undefined) return {};
  const { traceId, spanId } = span.spanContext();
  return trace.isSpanContextValid(span.spanContext()) ? { trace_id: traceId, span_id: spanId } : {};
}

/**
 * Marks `span` failed: status ERROR with the error's message, `error.type` (the AppError
 * code, else the error's class), and an exception event.
 */
export function recordSpanError(span: Span, error: unknown): void {
  const message = error instanceof Error ? error.message : String(error);
  span.setStatus({ code: SpanStatusCode.ERROR, message });
  span.setAttribute(
    'error.type',
    isAppError(error) ? error.code : error instanceof Error ? error.name : '_OTHER',
  );
  span.recordException(error instanceof Error ? error : message);
}

/** Options of {@link inSpan}. */
export interface InSpanOptions {
  readonly kind?: SpanKind;
  readonly attributes?: Attributes;
  /** The parent; @default the active context */
  readonly parent?: Context;
  /** Spans this one follows from without being their child. */
  readonly links?: readonly Link[];
}

function spanOptionsOf(options: InSpanOptions): SpanOptions {
  return {
    kind: options.kind ?? SpanKind.INTERNAL,
    ...(options.attributes === undefined ? {} : { attributes: options.attributes }),
    ...(options.links === undefined ? {} : { links: [...options.links] }),
  };
}

/**
 * Runs `run` in a new active span that ends when it settles; a rejection is recorded on
 * the span ({@link recordSpanError}) and rethrown. With tracing off, `run` is called with
 * undefined and nothing else happens.
 */
export function inSpan<T>(
  name: string,
  options: InSpanOptions,
  run: (span: Span | undefined) => Promise<T>,
): Promise<T> {
  if (!active) return run(undefined);
  const parent = options.parent ?? context.active();
  const span = tracer.startSpan(name, spanOptionsOf(options), parent);
  // `run` and what it awaits see the span active; ending it needs no context, so the
  // handlers below run outside it (no async wrapper: one promise less a span).
  let running: Promise<T>;
  try {
    running = context.with(trace.setSpan(parent, span), run, undefined, span);
  } catch (error) {
    // A `run` that throws before its first await throws here too, as it does untraced.
    recordSpanError(span, error);
    span.end();
    throw error;
  }
  return running.then(
    (result) => {
      span.end();
      return result;
    },
    (error: unknown) => {
      recordSpanError(span, error);
      span.end();
      throw error;
    },
  );
}

/**
 * Starts a span that the caller ends (a request whose end is an event, not a promise),
 * and the context it is active in. Undefined when tracing is off.
 */
export function startSpan(
  name: string,
  options: InSpanOptions,
): { span: Span; context: Context } | undefined {
  if (!active) return undefined;
  const parent = options.parent ?? context.active();
  const span = tracer.startSpan(name, spanOptionsOf(options), parent);
  return { span, context: trace.setSpan(parent, span) };
}

// ---- propagation (the propagators of OTEL_PROPAGATORS, registered by the SDK) ----

const metadataSetter: TextMapSetter<Metadata> = {
  set: (metadata, key, value) => metadata.set(key, value),
};

const metadataGetter: TextMapGetter<Metadata> = {
  get: (metadata, key) => {
    const values = metadata.get(key);
    return values.length === 0 ? undefined : values.map(String);
  },
  keys: (metadata) => Object.keys(metadata.getMap()),
};

/** Writes the active trace context into outgoing gRPC metadata (`traceparent`, ...). */
export function injectTraceMetadata(metadata: Metadata, from: Context = context.active()): void {
  if (active) propagation.inject(from, metadata, metadataSetter);
}

/**
 * The trace context a gRPC call carries, on top of the root context (a server span's
 * parent is the caller's span, never whatever this process had active). A missing or
 * malformed header gives the root context: a new trace.
 */
export function extractTraceMetadata(metadata: Metadata): Context {
  return active ? propagation.extract(ROOT_CONTEXT, metadata, metadataGetter) : ROOT_CONTEXT;
}

/** The trace context of HTTP request headers (`traceparent`, ...), on the root context. */
export function extractTraceHeaders(headers: Readonly<Record<string, unknown>>): Context {
  return active ? propagation.extract(ROOT_CONTEXT, headers) : ROOT_CONTEXT;
}

/** Headers that carry the active trace context to an HTTP peer; empty when tracing is off. */
export function traceHeaders(from: Context = context.active()): Record<string, string> {
  const headers: Record<string, string> = {};
  if (active) propagation.inject(from, headers);
  return headers;
}

/**
 * The W3C trace context of `from` for an MCP request's `params._meta`: `traceparent`, and
 * `tracestate` when there is one, as the propagators of `OTEL_PROPAGATORS` write them
 * (none without `tracecontext`); never baggage, which is not the tool server's. Empty when
 * tracing is off.
 */
export function traceMeta(from: Context = context.active()): {
  traceparent?: string;
  tracestate?: string;
} {
  const { traceparent, tracestate } = traceHeaders(from);
  return {
    ...(traceparent === undefined ? {} : { traceparent }),
    ...(tracestate === undefined ? {} : { tracestate }),
  };
}

/** The active context, to parent spans on later, after it stopped being active. */
export function activeTraceContext(): Context {
  return context.active();
}

export { SpanKind, SpanStatusCode };
export type { Context, Span };

/** Records `error` on the active span ({@link recordSpanError}), for a caught failure. */
export function recordActiveSpanError(error: unknown): void {
  if (!active) return;
  const span = trace.getActiveSpan();
  if (span !== undefined) recordSpanError(span, error);
}

/**
 * Adds an exception event for `error` to the active span and leaves its status to the
 * span's owner: a request span is status ERROR only for a 5xx (`tracedRequest`), so a
 * caller's mistake that its wrapper sees fail is recorded but is not a server fault.
 */
export function recordActiveSpanException(error: unknown): void {
  if (!active) return;
  trace.getActiveSpan()?.recordException(error instanceof Error ? error : String(error));
}

/** Sets attributes on the active span, when tracing is on. */
export function setActiveSpanAttributes(attributes: Attributes): void {
  if (active) trace.getActiveSpan()?.setAttributes(attributes);
}

/**
 * A link to the span a W3C `traceparent` value names (an annotation a caller set), or
 * undefined when tracing is off or the value is missing or malformed.
 */
export function linkFromTraceparent(value: string | undefined): Link | undefined {
  if (!active || value === undefined) return undefined;
  const spanContext = trace.getSpanContext(
    propagation.extract(ROOT_CONTEXT, { traceparent: value }),
  );
  return spanContext !== undefined && trace.isSpanContextValid(spanContext)
    ? { context: spanContext }
    : undefined;
}

/** The context with no span: the parent of a span that starts a trace. */
export const ROOT_TRACE_CONTEXT = ROOT_CONTEXT;
