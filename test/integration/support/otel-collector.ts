import type { ChildProcess } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { defaultBinDir } from '../../../hack/lib/paths';
import { freePort, pollUntil, startProcess, stopPid } from '../../../hack/lib/processes';

/** One span as the collector's file exporter writes it (OTLP/JSON, ids in hex). */
export interface CollectedSpan {
  readonly service: string;
  readonly traceId: string;
  readonly spanId: string;
  readonly parentSpanId: string;
  readonly name: string;
  /** OTLP SpanKind: 1 internal, 2 server, 3 client. */
  readonly kind: number;
  readonly attributes: Readonly<Record<string, string | number | boolean | readonly unknown[]>>;
  readonly status: { readonly code?: number; readonly message?: string };
  readonly links: readonly { readonly traceId: string; readonly spanId: string }[];
  /** Span events (an exception is `exception`, with `exception.type` and `.message`). */
  readonly events: readonly {
    readonly name: string;
    readonly attributes: Readonly<Record<string, string | number | boolean | readonly unknown[]>>;
  }[];
  /** Start and end, in nanoseconds since the epoch (the exporting process's clock). */
  readonly startNs: bigint;
  readonly endNs: bigint;
}

interface OtlpValue {
  stringValue?: string;
  intValue?: string | number;
  doubleValue?: number;
  boolValue?: boolean;
  arrayValue?: { values?: OtlpValue[] };
}
interface OtlpAttribute {
  key: string;
  value: OtlpValue;
}

function valueOf(value: OtlpValue): string | number | boolean | readonly unknown[] {
  if (value.stringValue !== undefined) return value.stringValue;
  if (value.intValue !== undefined) return Number(value.intValue);
  if (value.doubleValue !== undefined) return value.doubleValue;
  if (value.boolValue !== undefined) return value.boolValue;
  if (value.arrayValue !== undefined) return (value.arrayValue.values ?? []).map(valueOf);
  return '';
}

function attributesOf(list: readonly OtlpAttribute[] | undefined): CollectedSpan['attributes'] {
  return Object.fromEntries((list ?? []).map((a) => [a.key, valueOf(a.value)]));
}

/**
 * The OpenTelemetry Collector built by hack/otelcol: the OTLP receiver (HTTP) on a free
 * loopback port, and the file exporter writing OTLP/JSON lines into a temporary directory.
 */
export class OtelCollector {
  private constructor(
    private readonly child: ChildProcess,
    private readonly dir: string,
    /** `OTEL_EXPORTER_OTLP_ENDPOINT` for the planes. */
    readonly endpoint: string,
    /**
     * The OTLP/gRPC endpoint (`OTEL_EXPORTER_OTLP_PROTOCOL=grpc`), for an SDK inside jest:
     * the HTTP exporter imports `node:http` dynamically, which jest's loader refuses.
     */
    readonly grpcEndpoint: string,
  ) {}

  static async start(): Promise<OtelCollector> {
    const binary = join(defaultBinDir, 'otelcol');
    if (!existsSync(binary)) {
      throw new Error(`${binary} is missing: run 'make binaries' (it builds hack/otelcol)`);
    }
    const dir = await mkdtemp(join(tmpdir(), 'otelcol-'));
    const port = await freePort();
    const grpcPort = await freePort();
    const config = [
      'receivers:',
      '  otlp:',
      '    protocols:',
      '      http:',
      `        endpoint: 127.0.0.1:${port}`,
      '      grpc:',
      `        endpoint: 127.0.0.1:${grpcPort}`,
      'exporters:',
      '  file:',
      `    path: ${join(dir, 'traces.jsonl')}`,
      '    flush_interval: 100ms',
      'service:',
      '  telemetry:',
      '    metrics:',
      '      level: none',
      '  pipelines:',
      '    traces:',
      '      receivers: [otlp]',
      '      exporters: [file]',
      '',
    ].join('\n');
    await writeFile(join(dir, 'config.yaml'), config);
    const child = startProcess(binary, ['--config', join(dir, 'config.yaml')], {
      logPath: join(dir, 'collector.log'),
    });
    const endpoint = `http://127.0.0.1:${port}`;
    const collector = new OtelCollector(child, dir, endpoint, `http://127.0.0.1:${grpcPort}`);
    try {
      await pollUntil(
        'the collector accepting OTLP',
        async () => {
          if (child.exitCode !== null) {
            throw new Error(`the collector exited: ${collector.log()}`);
          }
          const answer = await fetch(`${endpoint}/v1/traces`, {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: '{}',
          }).catch(() => undefined);
          return answer?.ok === true ? true : undefined;
        },
        { timeoutMs: 30_000, intervalMs: 200 },
      );
    } catch (error) {
      await collector.stop();
      throw error;
    }
    return collector;
  }

  /** The collector's own log. */
  log(): string {
    const path = join(this.dir, 'collector.log');
    return existsSync(path) ? readFileSync(path, 'utf8') : '';
  }

  /**
   * The file exporter's output so far, as written (OTLP/JSON lines: every resource, scope,
   * span, attribute, event and link), for a search of all of it.
   */
  exported(): string {
    const path = join(this.dir, 'traces.jsonl');
    return existsSync(path) ? readFileSync(path, 'utf8') : '';
  }

  /** Every span the file exporter has written so far. */
  spans(): CollectedSpan[] {
    const spans: CollectedSpan[] = [];
    for (const line of this.exported().split('\n')) {
      if (line.trim() === '') continue;
      const batch = JSON.parse(line) as {
        resourceSpans?: {
          resource?: { attributes?: OtlpAttribute[] };
          scopeSpans?: {
            spans?: {
              traceId: string;
              spanId: string;
              parentSpanId?: string;
              name: string;
              kind?: number;
              attributes?: OtlpAttribute[];
              status?: { code?: number; message?: string };
              links?: { traceId: string; spanId: string }[];
              events?: { name: string; attributes?: OtlpAttribute[] }[];
              startTimeUnixNano?: string;
              endTimeUnixNano?: string;
            }[];
          }[];
        }[];
      };
      for (const resource of batch.resourceSpans ?? []) {
        const service = String(attributesOf(resource.resource?.attributes)['service.name'] ?? '');
        for (const scope of resource.scopeSpans ?? []) {
          for (const span of scope.spans ?? []) {
            spans.push({
              service,
              traceId: span.traceId,
              spanId: span.spanId,
              parentSpanId: span.parentSpanId ?? '',
              name: span.name,
              kind: span.kind ?? 0,
              attributes: attributesOf(span.attributes),
              status: span.status ?? {},
              links: span.links ?? [],
              events: (span.events ?? []).map((event) => ({
                name: event.name,
                attributes: attributesOf(event.attributes),
              })),
              startNs: BigInt(span.startTimeUnixNano ?? '0'),
              endNs: BigInt(span.endTimeUnixNano ?? '0'),
            });
          }
        }
      }
    }
    return spans;
  }

  async stop(): Promise<void> {
    if (this.child.pid !== undefined) await stopPid(this.child.pid);
    await rm(this.dir, { recursive: true, force: true });
  }
}
