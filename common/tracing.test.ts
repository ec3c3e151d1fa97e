import { describe, expect, it } from '@jest/globals';
import { execFile } from 'node:child_process';
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { tracingRequested } from './tracing';

const run = promisify(execFile);

describe('tracingRequested', () => {
  it.each([
    ['nothing set', {}, false],
    ['an OTLP endpoint', { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318' }, true],
    [
      'a traces endpoint',
      { OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://127.0.0.1:4318/v1/traces' },
      true,
    ],
    ['an empty endpoint', { OTEL_EXPORTER_OTLP_ENDPOINT: ' ' }, false],
    ['the console exporter', { OTEL_TRACES_EXPORTER: 'console' }, true],
    [
      'exporter none, endpoint set',
      { OTEL_TRACES_EXPORTER: 'none', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318' },
      false,
    ],
    [
      'the SDK disabled',
      { OTEL_SDK_DISABLED: 'true', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318' },
      false,
    ],
  ])('%s: %s', (_label, env, expected) => {
    expect(tracingRequested(env)).toBe(expected);
  });
});

interface ProbeResult {
  started: boolean;
  warnings: string[];
  sdkModules: number;
  packages: string[];
  inside: {
    spanId?: string;
    traceId?: string;
    traceparent: string[];
    headers: string[];
    serviceName: string | null;
    extracted?: { traceId: string; spanId: string };
  };
  spans: Record<string, unknown>;
  boundaries: Record<string, unknown> & {
    span: string | null;
    interleaved: { span: string | null; afterOne: string | null; afterTwo: string | null }[];
  };
  malformed: unknown;
  lines: Record<string, unknown>[];
}

/** Runs common/testdata/tracing-probe.ts with only `env` of OTEL_* set, and `nodeFlags`. */
async function probe(
  env: Record<string, string>,
  nodeFlags: readonly string[] = [],
): Promise<ProbeResult> {
  const clean = Object.fromEntries(
    Object.entries(process.env).filter(([name]) => !name.startsWith('OTEL_')),
  );
  const { stdout } = await run(
    process.execPath,
    [...nodeFlags, '--import', 'tsx', join(__dirname, 'testdata', 'tracing-probe.ts')],
    { env: { ...clean, ...env }, timeout: 60_000 },
  );
  return JSON.parse(stdout.trim().split('\n').at(-1) ?? '') as ProbeResult;
}

/** An OTLP/HTTP endpoint that records the paths it is sent and discards the bodies. */
async function otlpSink(): Promise<{ url: string; paths: string[]; close: () => Promise<void> }> {
  const paths: string[] = [];
  const server = createServer((request: IncomingMessage, response) => {
    paths.push(
      `${request.method ?? ''} ${request.url ?? ''} ${request.headers['content-type'] ?? ''}`,
    );
    request.resume();
    request.on('end', () =>
      response.writeHead(200, { 'content-type': 'application/x-protobuf' }).end(),
    );
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    paths,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

/**
 * The images run Node with --experimental-async-context-frame (docs/images.md): the
 * active span is carried in V8's continuation data instead of by an async hook. Node 22.7
 * and later take the flag (Node 24 made it the default); Node 20 refuses it.
 */
const FRAME_FLAG = '--experimental-async-context-frame';
const frameSupported = process.allowedNodeEnvironmentFlags.has(FRAME_FLAG);

/** What the probe's boundary crossings must show: the span of each side, and none outside. */
function expectSpanCarried(boundaries: ProbeResult['boundaries']): void {
  const { span, interleaved, outside, ...crossings } = boundaries;
  expect(span).toMatch(/^[0-9a-f]{16}$/u);
  expect(crossings).toEqual({
    setTimeout: span,
    setImmediate: span,
    nextTick: span,
    queueMicrotask: span,
    httpResponse: span,
    afterAwaits: span,
  });
  expect(interleaved).toHaveLength(2);
  for (const each of interleaved) {
    expect(each.span).toMatch(/^[0-9a-f]{16}$/u);
    expect(each).toEqual({ span: each.span, afterOne: each.span, afterTwo: each.span });
  }
  expect(interleaved[0]?.span).not.toBe(interleaved[1]?.span);
  expect(outside).toBeNull();
}

describe('startTracing', () => {
  it('loads no SDK, exports nothing and adds no trace fields to log lines when OTEL_* is unset', async () => {
    const sink = await otlpSink();
    try {
      const result = await probe({});
      expect(result.started).toBe(false);
      expect(result.sdkModules).toBe(0);
      expect(result.inside.traceparent).toEqual([]);
      // inSpan still runs its function, and passes a failure on untouched.
      expect(result.spans).toEqual({
        rejected: 'the probe failed',
        thrown: 'at once',
        outer: null,
        inner: null,
        rejecting: null,
        throwing: null,
      });
      expect(result.lines).toHaveLength(2);
      for (const line of result.lines) {
        expect(line).toMatchObject({ field: 1 });
        expect(line).not.toHaveProperty('trace_id');
        expect(line).not.toHaveProperty('span_id');
      }
      expect(sink.paths).toEqual([]);
    } finally {
      await sink.close();
    }
  }, 60_000);

  it('propagates the span over gRPC metadata, logs its ids, and exports to the endpoint', async () => {
    const sink = await otlpSink();
    try {
      const result = await probe({ OTEL_EXPORTER_OTLP_ENDPOINT: sink.url });
      expectSpanCarried(result.boundaries);
      expect(result.started).toBe(true);
      expect(result.sdkModules).toBeGreaterThan(0);
      const { traceId, spanId } = result.inside;
      expect(traceId).toMatch(/^[0-9a-f]{32}$/u);
      expect(result.inside.traceparent).toEqual([`00-${traceId}-${spanId}-01`]);
      expect(result.inside.extracted).toMatchObject({ traceId, spanId });
      // A malformed header is no context: the server's span starts a new trace.
      expect(result.malformed).toBeNull();
      const inside = result.lines.find((line) => line.msg === 'inside');
      const outside = result.lines.find((line) => line.msg === 'outside');
      expect(inside).toMatchObject({ field: 1, trace_id: traceId, span_id: spanId });
      expect(outside).not.toHaveProperty('trace_id');
      // A span started after an await is the child of the one active there; each ends.
      const { outer, inner, rejecting, throwing } = result.spans as Record<
        string,
        { spanId: string; parent: string | null; ended: boolean; status: unknown }
      >;
      expect(outer).toMatchObject({ parent: null, ended: true, status: { code: 0 } });
      expect(inner).toMatchObject({ parent: outer?.spanId, ended: true, status: { code: 0 } });
      // A rejection or a synchronous throw is recorded and reaches the caller unchanged.
      expect(result.spans.rejected).toBe('the probe failed');
      expect(rejecting).toMatchObject({
        parent: null,
        ended: true,
        status: { code: 2, message: 'the probe failed' },
        errorType: 'unavailable',
      });
      expect(result.spans.thrown).toBe('at once');
      expect(throwing).toMatchObject({
        ended: true,
        status: { code: 2, message: 'at once' },
        errorType: 'TypeError',
      });
      // http/protobuf to <endpoint>/v1/traces, as the spec says.
      expect(sink.paths).toEqual(['POST /v1/traces application/x-protobuf']);
      // The default propagators: W3C trace context and baggage (none set, so no header).
      expect(result.inside.headers).toEqual(['traceparent']);
      expect(result.inside.serviceName).toBe('probe');
      expect(result.warnings).toEqual([]);
      // Only the pieces traces need: no metrics or logs SDK pipelines, no other exporter.
      expect(result.packages).toContain('exporter-trace-otlp-proto');
      for (const absent of [
        'sdk-node',
        'sdk-logs',
        'exporter-trace-otlp-http',
        'exporter-trace-otlp-grpc',
        'exporter-zipkin',
        'propagator-b3',
        'propagator-jaeger',
      ])
        expect(result.packages).not.toContain(absent);
    } finally {
      await sink.close();
    }
  }, 60_000);

  (frameSupported ? it : it.skip)(
    `carries the active span across every async boundary under ${FRAME_FLAG}, as in the images (Node 22.7+)`,
    async () => {
      const sink = await otlpSink();
      try {
        const result = await probe({ OTEL_EXPORTER_OTLP_ENDPOINT: sink.url }, [FRAME_FLAG]);
        expect(result.started).toBe(true);
        expectSpanCarried(result.boundaries);
        const { outer, inner } = result.spans as Record<
          string,
          { spanId: string; parent: string | null }
        >;
        expect(inner?.parent).toBe(outer?.spanId);
        const inside = result.lines.find((line) => line.msg === 'inside');
        expect(inside).toMatchObject({
          trace_id: result.inside.traceId,
          span_id: result.inside.spanId,
        });
        expect(result.inside.traceparent).toEqual([
          `00-${result.inside.traceId}-${result.inside.spanId}-01`,
        ]);
      } finally {
        await sink.close();
      }
    },
    60_000,
  );

  it('honours OTEL_EXPORTER_OTLP_PROTOCOL, OTEL_PROPAGATORS and OTEL_SERVICE_NAME', async () => {
    const sink = await otlpSink();
    try {
      const result = await probe({
        OTEL_EXPORTER_OTLP_ENDPOINT: sink.url,
        OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
        OTEL_PROPAGATORS: 'b3multi',
        OTEL_SERVICE_NAME: 'renamed',
      });
      expect(result.started).toBe(true);
      const { traceId, spanId } = result.inside;
      // B3 in its multi-header form instead of W3C: no traceparent goes out.
      expect(result.inside.headers).toEqual(['x-b3-sampled', 'x-b3-spanid', 'x-b3-traceid']);
      expect(result.inside.traceparent).toEqual([]);
      // ...and the same propagator reads the context back.
      expect(result.inside.extracted).toMatchObject({ traceId, spanId });
      expect(result.inside.serviceName).toBe('renamed');
      expect(sink.paths).toEqual(['POST /v1/traces application/json']);
      expect(result.packages).toEqual(
        expect.arrayContaining(['exporter-trace-otlp-http', 'propagator-b3']),
      );
      expect(result.packages).not.toContain('exporter-trace-otlp-proto');
    } finally {
      await sink.close();
    }
  }, 60_000);

  it('warns through the plane’s log about the values it cannot honour, and uses the rest', async () => {
    const sink = await otlpSink();
    try {
      const result = await probe({
        OTEL_EXPORTER_OTLP_ENDPOINT: sink.url,
        OTEL_TRACES_EXPORTER: 'otlp,prometheus',
        OTEL_PROPAGATORS: 'xray,tracecontext',
      });
      expect(result.started).toBe(true);
      expect(result.warnings).toEqual([
        'OTEL_TRACES_EXPORTER value "prometheus" is not supported (it takes otlp, console, zipkin or none); ignored',
        'OTEL_PROPAGATORS value "xray" is not supported (it takes tracecontext, baggage, b3, b3multi, jaeger or none); ignored',
      ]);
      expect(result.inside.headers).toEqual(['traceparent']);
      expect(sink.paths).toEqual(['POST /v1/traces application/x-protobuf']);
    } finally {
      await sink.close();
    }
  }, 60_000);

  it('registers no propagator under OTEL_PROPAGATORS=none, and still exports', async () => {
    const sink = await otlpSink();
    try {
      const result = await probe({
        OTEL_EXPORTER_OTLP_ENDPOINT: sink.url,
        OTEL_PROPAGATORS: 'none',
      });
      expect(result.started).toBe(true);
      expect(result.inside.spanId).toMatch(/^[0-9a-f]{16}$/u);
      // Nothing is written to a call, and nothing is read from one: each side starts its own trace.
      expect(result.inside.headers).toEqual([]);
      expect(result.inside.extracted).toBeUndefined();
      expect(sink.paths).toEqual(['POST /v1/traces application/x-protobuf']);
    } finally {
      await sink.close();
    }
  }, 60_000);

  it('honours OTEL_TRACES_SAMPLER: always_off records nothing and exports nothing', async () => {
    const sink = await otlpSink();
    try {
      const result = await probe({
        OTEL_EXPORTER_OTLP_ENDPOINT: sink.url,
        OTEL_TRACES_SAMPLER: 'always_off',
      });
      expect(result.started).toBe(true);
      // The context still propagates, marked not sampled.
      expect(result.inside.traceparent[0]).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-00$/u);
      expect(result.spans).toMatchObject({
        rejected: 'the probe failed',
        thrown: 'at once',
        inner: { recording: false },
      });
      expect(sink.paths).toEqual([]);
    } finally {
      await sink.close();
    }
  }, 60_000);
});
