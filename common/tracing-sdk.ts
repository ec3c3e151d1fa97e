import { context, diag, DiagConsoleLogger, propagation, trace } from '@opentelemetry/api';
import type { TextMapPropagator, TracerProvider } from '@opentelemetry/api';
import type { SpanExporter, SpanProcessor } from '@opentelemetry/sdk-trace-base';

/**
 * The trace SDK as the OTEL_* variables describe it (docs/observability.md#traces): the
 * part of `@opentelemetry/sdk-node` that traces need, without its metrics and logs
 * pipelines. Only the exporters and propagators the environment names are loaded, so a
 * plane that traces over OTLP/HTTP loads about half of what sdk-node would.
 *
 * {@link traceSdkPlan} is the pure part: it reads the variables sdk-node reads for traces
 * (`OTEL_TRACES_EXPORTER`, `OTEL_EXPORTER_OTLP[_TRACES]_PROTOCOL`, `OTEL_PROPAGATORS`,
 * `OTEL_NODE_RESOURCE_DETECTORS`) with the same defaults and the same answers to odd
 * values, and says what to build. The rest are read where sdk-node leaves them too: the
 * sampler and span limits by the tracer provider, `OTEL_BSP_*` by the batch processor,
 * the endpoint, headers, timeout and TLS by the OTLP exporter, `OTEL_SERVICE_NAME` and
 * `OTEL_RESOURCE_ATTRIBUTES` by the env resource detector.
 */

/** An exporter {@link traceSdkPlan} can build. */
export type TraceExporterKind =
  'otlp-http/protobuf' | 'otlp-http/json' | 'otlp-grpc' | 'console' | 'zipkin';

/** A propagator of `OTEL_PROPAGATORS` that {@link traceSdkPlan} can build. */
export type PropagatorKind = 'tracecontext' | 'baggage' | 'b3' | 'b3multi' | 'jaeger';

/** A resource detector of `OTEL_NODE_RESOURCE_DETECTORS`. */
export type DetectorKind = 'host' | 'os' | 'serviceinstance' | 'process' | 'env';

/** What {@link startTraceSdk} builds, and what it warns about. */
export interface TraceSdkPlan {
  /** Empty: nothing to export, so no SDK. */
  readonly exporters: readonly TraceExporterKind[];
  /** Empty: register no propagator (`OTEL_PROPAGATORS=none`, or only unknown names). */
  readonly propagators: readonly PropagatorKind[];
  /** In the order their resources are merged: a later one wins. */
  readonly detectors: readonly DetectorKind[];
  /** One line for each value the plan ignored, naming the variable and what it takes. */
  readonly warnings: readonly string[];
}

const PROPAGATORS: readonly PropagatorKind[] = [
  'tracecontext',
  'baggage',
  'b3',
  'b3multi',
  'jaeger',
];
// sdk-node's order for `all`: env last, so OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES win.
const DETECTORS: readonly DetectorKind[] = ['host', 'os', 'serviceinstance', 'process', 'env'];

/** A comma-separated variable as the spec reads it: trimmed, empty items dropped; unset or blank is undefined. */
function listOf(value: string | undefined): string[] | undefined {
  const items = (value ?? '')
    .split(',')
    .map((item) => item.trim())
    .filter((item) => item !== '');
  return items.length === 0 ? undefined : items;
}

function stringOf(value: string | undefined): string | undefined {
  const trimmed = value?.trim();
  return trimmed === undefined || trimmed === '' ? undefined : trimmed;
}

/**
 * The names in `names` that are among `known`, in their order; each other one is dropped
 * with a warning that names `variable` and what it `takes`.
 */
function knownNames<K extends string>(
  names: Iterable<string>,
  known: readonly K[],
  variable: string,
  takes: string,
  warnings: string[],
): K[] {
  const kept: K[] = [];
  for (const name of names) {
    const kind = known.find((candidate) => candidate === name);
    if (kind === undefined)
      warnings.push(`${variable} value "${name}" is not supported (it takes ${takes}); ignored`);
    else kept.push(kind);
  }
  return kept;
}

function otlpExporter(env: NodeJS.ProcessEnv, warnings: string[]): TraceExporterKind {
  const protocol =
    stringOf(env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL) ??
    stringOf(env.OTEL_EXPORTER_OTLP_PROTOCOL) ??
    'http/protobuf';
  switch (protocol) {
    case 'grpc':
      return 'otlp-grpc';
    case 'http/json':
      return 'otlp-http/json';
    case 'http/protobuf':
      return 'otlp-http/protobuf';
    default:
      warnings.push(
        `OTLP traces protocol "${protocol}" is not supported (OTEL_EXPORTER_OTLP_TRACES_PROTOCOL or OTEL_EXPORTER_OTLP_PROTOCOL take grpc, http/protobuf or http/json); using http/protobuf`,
      );
      return 'otlp-http/protobuf';
  }
}

/**
 * What the trace SDK is made of under `env`, as sdk-node 0.223 decides it for traces.
 * `OTEL_TRACES_EXPORTER`: unset means `otlp`; `none` first means nothing; `none` with
 * others means `otlp`; unknown names are dropped with a warning. `OTEL_PROPAGATORS`:
 * unset means `tracecontext,baggage`; any `none` means none; duplicates count once.
 */
export function traceSdkPlan(env: NodeJS.ProcessEnv): TraceSdkPlan {
  const warnings: string[] = [];

  let exporterNames = [...new Set(listOf(env.OTEL_TRACES_EXPORTER) ?? [])].filter(
    (name) => name !== 'null',
  );
  const exporters: TraceExporterKind[] = [];
  if (exporterNames[0] !== 'none') {
    if (exporterNames.length === 0) exporterNames = ['otlp'];
    else if (exporterNames.includes('none')) {
      warnings.push('OTEL_TRACES_EXPORTER names "none" along with other exporters; using otlp');
      exporterNames = ['otlp'];
    }
    for (const name of exporterNames) {
      if (name === 'otlp') exporters.push(otlpExporter(env, warnings));
      else if (name === 'console' || name === 'zipkin') exporters.push(name);
      else
        warnings.push(
          `OTEL_TRACES_EXPORTER value "${name}" is not supported (it takes otlp, console, zipkin or none); ignored`,
        );
    }
  }

  const propagatorNames = listOf(env.OTEL_PROPAGATORS);
  let propagators: PropagatorKind[];
  if (propagatorNames === undefined) propagators = ['tracecontext', 'baggage'];
  else if (propagatorNames.includes('none')) propagators = [];
  else {
    propagators = knownNames(
      new Set(propagatorNames),
      PROPAGATORS,
      'OTEL_PROPAGATORS',
      `${PROPAGATORS.join(', ')} or none`,
      warnings,
    );
  }

  const detectorNames = listOf(env.OTEL_NODE_RESOURCE_DETECTORS) ?? ['all'];
  let detectors: DetectorKind[];
  if (detectorNames.includes('all')) detectors = [...DETECTORS];
  else if (detectorNames.includes('none')) detectors = [];
  else {
    detectors = knownNames(
      detectorNames,
      DETECTORS,
      'OTEL_NODE_RESOURCE_DETECTORS',
      `${DETECTORS.join(', ')}, all or none`,
      warnings,
    );
  }

  return { exporters, propagators, detectors, warnings };
}

async function exporterOf(kind: TraceExporterKind): Promise<SpanExporter> {
  switch (kind) {
    case 'otlp-http/protobuf':
      return new (await import('@opentelemetry/exporter-trace-otlp-proto')).OTLPTraceExporter();
    case 'otlp-http/json':
      return new (await import('@opentelemetry/exporter-trace-otlp-http')).OTLPTraceExporter();
    case 'otlp-grpc':
      return new (await import('@opentelemetry/exporter-trace-otlp-grpc')).OTLPTraceExporter();
    case 'zipkin':
      return new (await import('@opentelemetry/exporter-zipkin')).ZipkinExporter();
    case 'console':
      return new (await import('@opentelemetry/sdk-trace-base')).ConsoleSpanExporter();
  }
}

async function propagatorOf(kind: PropagatorKind): Promise<TextMapPropagator> {
  switch (kind) {
    case 'tracecontext':
      return new (await import('@opentelemetry/core')).W3CTraceContextPropagator();
    case 'baggage':
      return new (await import('@opentelemetry/core')).W3CBaggagePropagator();
    case 'b3':
      return new (await import('@opentelemetry/propagator-b3')).B3Propagator();
    case 'b3multi': {
      const { B3Propagator, B3InjectEncoding } = await import('@opentelemetry/propagator-b3');
      return new B3Propagator({ injectEncoding: B3InjectEncoding.MULTI_HEADER });
    }
    case 'jaeger':
      return new (await import('@opentelemetry/propagator-jaeger')).JaegerPropagator();
  }
}

/** A started trace SDK: its provider, and {@link shutdown} to flush what is not yet exported. */
export interface TraceSdk {
  readonly provider: TracerProvider;
  shutdown(): Promise<void>;
}

/**
 * Builds and registers the trace SDK of {@link traceSdkPlan}`(env)`: the tracer provider
 * (sampler and limits from env), a batch processor for each exporter (a simple one for the
 * console), the AsyncLocalStorage context manager, and the propagators. `service` is the
 * `service.name` unless the env detector finds one. Undefined, with nothing registered,
 * when the plan has no exporter. `OTEL_LOG_LEVEL` sends the SDK's own diagnostics to the
 * console, as sdk-node does; the plan's warnings go to `warn`, which is the plane's log.
 */
export async function startTraceSdk(
  service: string,
  env: NodeJS.ProcessEnv,
  warn: (message: string) => void,
): Promise<TraceSdk | undefined> {
  const [core, resources, base, { AsyncLocalStorageContextManager }] = await Promise.all([
    import('@opentelemetry/core'),
    import('@opentelemetry/resources'),
    import('@opentelemetry/sdk-trace-base'),
    import('@opentelemetry/context-async-hooks'),
  ]);
  const logLevel = stringOf(env.OTEL_LOG_LEVEL);
  if (logLevel !== undefined)
    diag.setLogger(new DiagConsoleLogger(), { logLevel: core.diagLogLevelFromString(logLevel) });

  const plan = traceSdkPlan(env);
  for (const warning of plan.warnings) warn(warning);
  if (plan.exporters.length === 0) return undefined;

  const detectors = {
    host: resources.hostDetector,
    os: resources.osDetector,
    serviceinstance: resources.serviceInstanceIdDetector,
    process: resources.processDetector,
    env: resources.envDetector,
  } as const;
  const resource = resources
    .defaultResource()
    .merge(resources.resourceFromAttributes({ 'service.name': service }))
    .merge(resources.detectResources({ detectors: plan.detectors.map((kind) => detectors[kind]) }));

  const spanProcessors: SpanProcessor[] = [];
  for (const kind of plan.exporters) {
    const exporter = await exporterOf(kind);
    spanProcessors.push(
      kind === 'console'
        ? new base.SimpleSpanProcessor(exporter)
        : new base.BatchSpanProcessor(exporter),
    );
  }
  const provider = new base.BasicTracerProvider({ resource, spanProcessors });

  const contextManager = new AsyncLocalStorageContextManager().enable();
  context.setGlobalContextManager(contextManager);
  if (plan.propagators.length > 0) {
    const propagators = await Promise.all(plan.propagators.map(propagatorOf));
    propagation.setGlobalPropagator(
      propagators.length === 1 ? propagators[0]! : new core.CompositePropagator({ propagators }),
    );
  }
  trace.setGlobalTracerProvider(provider);

  return {
    provider,
    shutdown: () => provider.shutdown(),
  };
}
