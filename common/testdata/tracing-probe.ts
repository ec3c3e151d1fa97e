/*
 * Run by common/tracing.test.ts as `node --import tsx` with the environment under test:
 * starts tracing as a plane's main.ts does, exercises the gRPC propagation helpers and the
 * logger inside a span, and prints one JSON line of what it saw.
 */
import { createServer, get } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { Metadata } from '@grpc/grpc-js';
import { trace, type Span } from '@opentelemetry/api';
import { setTimeout as delay } from 'node:timers/promises';
import { AppError } from '../errors';
import { createRootLogger } from '../log';
import { extractTraceMetadata, injectTraceMetadata, inSpan, startTracing } from '../tracing';

/** The fields of the SDK's span (its ReadableSpan) that the probe reports. */
interface Recorded {
  readonly parentSpanContext?: { spanId: string };
  readonly ended: boolean;
  readonly status: unknown;
  readonly attributes: Record<string, unknown>;
  readonly resource?: { attributes: Record<string, unknown> };
}

/** What a span recorded (null with tracing off, `recording: false` when not sampled). */
function recorded(span: Span | undefined): Record<string, unknown> | null {
  if (span === undefined) return null;
  if (!('attributes' in span)) return { recording: false };
  const readable = span as unknown as Recorded;
  return {
    spanId: span.spanContext().spanId,
    parent: readable.parentSpanContext?.spanId ?? null,
    ended: readable.ended,
    status: readable.status,
    errorType: readable.attributes['error.type'] ?? null,
  };
}

/** inSpan's nesting across awaits, a rejection, and a throw before the first await. */
async function spans(): Promise<Record<string, unknown>> {
  const seen: Record<string, Span | undefined> = {};
  await inSpan('outer', {}, async (outer) => {
    seen.outer = outer;
    await delay(1);
    await inSpan('inner', {}, async (inner) => {
      seen.inner = inner;
      await delay(1);
    });
  });
  const rejected = await inSpan('rejecting', {}, async (span) => {
    seen.rejecting = span;
    await delay(1);
    throw new AppError('unavailable', 'the probe failed');
  }).then(
    () => 'resolved',
    (error: unknown) => (error instanceof Error ? error.message : String(error)),
  );
  let thrown = 'nothing';
  try {
    void inSpan('throwing', {}, (span) => {
      seen.throwing = span;
      throw new TypeError('at once');
    });
  } catch (error) {
    thrown = error instanceof Error ? error.message : String(error);
  }
  return {
    rejected,
    thrown,
    ...Object.fromEntries(Object.entries(seen).map(([name, span]) => [name, recorded(span)])),
  };
}

/** The id of the span active here, or null. */
function activeSpanId(): string | null {
  return trace.getActiveSpan()?.spanContext().spanId ?? null;
}

/** Resolves with what `read` returns inside the callback that `schedule` is handed. */
function inCallback<T>(schedule: (callback: () => void) => void, read: () => T): Promise<T> {
  return new Promise((resolve) => schedule(() => resolve(read())));
}

/**
 * The span active on each side of the async boundaries the planes cross (promises, timers,
 * the tick and microtask queues, an HTTP round trip's callbacks), and in two spans whose
 * awaits interleave: each must see its own span. The images run Node with
 * --experimental-async-context-frame, which changes how the active context is carried.
 */
async function boundaries(): Promise<Record<string, unknown>> {
  const server = createServer((_request, response) => response.end('ok'));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  try {
    const seen = await inSpan('boundaries', {}, async (span) => ({
      span: span?.spanContext().spanId ?? null,
      setTimeout: await inCallback((done) => setTimeout(done, 1), activeSpanId),
      setImmediate: await inCallback((done) => setImmediate(done), activeSpanId),
      nextTick: await inCallback((done) => process.nextTick(done), activeSpanId),
      queueMicrotask: await inCallback((done) => queueMicrotask(done), activeSpanId),
      httpResponse: await inCallback(
        (done) => get(`http://127.0.0.1:${port}/`, (response) => response.resume().on('end', done)),
        activeSpanId,
      ),
      afterAwaits: activeSpanId(),
    }));
    const interleaved = await Promise.all(
      ['first', 'second'].map((name, index) =>
        inSpan(name, {}, async (span) => {
          await delay(2 - index);
          const afterOne = activeSpanId();
          await delay(1 + index);
          return { span: span?.spanContext().spanId ?? null, afterOne, afterTwo: activeSpanId() };
        }),
      ),
    );
    return { ...seen, interleaved, outside: activeSpanId() };
  } finally {
    await new Promise((resolve) => server.close(resolve));
  }
}

async function probe(): Promise<void> {
  const warnings: string[] = [];
  const tracing = await startTracing('probe', (message) => warnings.push(message));
  const lines: string[] = [];
  const log = createRootLogger({
    service: 'probe',
    destination: new Writable({
      write(chunk: Buffer, _encoding, done) {
        lines.push(chunk.toString('utf8'));
        done();
      },
    }),
  });
  const inside = await inSpan('probe', {}, (span) => {
    const metadata = new Metadata();
    injectTraceMetadata(metadata);
    log.info({ field: 1 }, 'inside');
    return Promise.resolve({
      spanId: span?.spanContext().spanId,
      traceId: span?.spanContext().traceId,
      traceparent: metadata.get('traceparent').map(String),
      headers: Object.keys(metadata.getMap()).sort(),
      serviceName:
        span === undefined || !('attributes' in span)
          ? null
          : ((span as unknown as Recorded).resource?.attributes['service.name'] ?? null),
      extracted: trace.getSpanContext(extractTraceMetadata(metadata)),
    });
  });
  const nesting = await spans();
  const crossings = await boundaries();
  const malformed = new Metadata();
  malformed.set('traceparent', '00-not-a-trace-01');
  log.info({ field: 1 }, 'outside');
  const sdkModules = Object.keys(require.cache).filter((path) =>
    /@opentelemetry[\\/](sdk-|exporter-|resources)/u.test(path),
  );
  // The OpenTelemetry packages loaded: only those the environment named should be.
  const packages = [
    ...new Set(
      Object.keys(require.cache).flatMap(
        (path) => /@opentelemetry[\\/]([^\\/]+)[\\/]/u.exec(path)?.[1] ?? [],
      ),
    ),
  ].sort();
  await tracing?.shutdown();
  process.stdout.write(
    `${JSON.stringify({
      started: tracing !== undefined,
      warnings,
      sdkModules: sdkModules.length,
      packages,
      inside,
      spans: nesting,
      boundaries: crossings,
      malformed: trace.getSpanContext(extractTraceMetadata(malformed)) ?? null,
      lines: lines.map((line) => JSON.parse(line) as unknown),
    })}\n`,
  );
}

void probe();
