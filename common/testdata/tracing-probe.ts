/*
 * Run by common/tracing.test.ts as `node --import tsx` with the environment under test:
 * starts tracing as a plane's main.ts does, exercises the gRPC propagation helpers and the
 * logger inside a span, and prints one JSON line of what it saw.
 */
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

async function probe(): Promise<void> {
  const tracing = await startTracing('probe');
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
      extracted: trace.getSpanContext(extractTraceMetadata(metadata)),
    });
  });
  const nesting = await spans();
  const malformed = new Metadata();
  malformed.set('traceparent', '00-not-a-trace-01');
  log.info({ field: 1 }, 'outside');
  const sdkModules = Object.keys(require.cache).filter((path) =>
    /@opentelemetry[\\/](sdk-|exporter-|resources)/u.test(path),
  );
  await tracing?.shutdown();
  process.stdout.write(
    `${JSON.stringify({
      started: tracing !== undefined,
      sdkModules: sdkModules.length,
      inside,
      spans: nesting,
      malformed: trace.getSpanContext(extractTraceMetadata(malformed)) ?? null,
      lines: lines.map((line) => JSON.parse(line) as unknown),
    })}\n`,
  );
}

void probe();
