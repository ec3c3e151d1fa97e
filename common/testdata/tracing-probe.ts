/*
 * Run by common/tracing.test.ts as `node --import tsx` with the environment under test:
 * starts tracing as a plane's main.ts does, exercises the gRPC propagation helpers and the
 * logger inside a span, and prints one JSON line of what it saw.
 */
import { Writable } from 'node:stream';
import { Metadata } from '@grpc/grpc-js';
import { trace } from '@opentelemetry/api';
import { createRootLogger } from '../log';
import { extractTraceMetadata, injectTraceMetadata, inSpan, startTracing } from '../tracing';

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
      malformed: trace.getSpanContext(extractTraceMetadata(malformed)) ?? null,
      lines: lines.map((line) => JSON.parse(line) as unknown),
    })}\n`,
  );
}

void probe();
