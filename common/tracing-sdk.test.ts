import { describe, expect, it } from '@jest/globals';
import { traceSdkPlan, type TraceSdkPlan } from './tracing-sdk';

/** The plan's parts other than warnings, for the cases that expect none. */
function quiet(env: NodeJS.ProcessEnv): Omit<TraceSdkPlan, 'warnings'> {
  const { warnings, ...plan } = traceSdkPlan(env);
  expect(warnings).toEqual([]);
  return plan;
}

const ALL_DETECTORS = ['host', 'os', 'serviceinstance', 'process', 'env'];

describe('traceSdkPlan: OTEL_TRACES_EXPORTER and the OTLP protocol', () => {
  it.each([
    ['unset: OTLP over http/protobuf', {}, ['otlp-http/protobuf']],
    ['otlp', { OTEL_TRACES_EXPORTER: 'otlp' }, ['otlp-http/protobuf']],
    ['the general protocol', { OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' }, ['otlp-grpc']],
    [
      'the traces protocol wins over the general one',
      { OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc', OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/json' },
      ['otlp-http/json'],
    ],
    [
      'a blank traces protocol falls back',
      { OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: ' ', OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' },
      ['otlp-grpc'],
    ],
    [
      'several, trimmed, duplicates once',
      { OTEL_TRACES_EXPORTER: ' console , otlp,console,zipkin' },
      ['console', 'otlp-http/protobuf', 'zipkin'],
    ],
    ['none', { OTEL_TRACES_EXPORTER: 'none' }, []],
    ['none first, then others: nothing', { OTEL_TRACES_EXPORTER: 'none,console' }, []],
    ['blank is unset', { OTEL_TRACES_EXPORTER: ' , ' }, ['otlp-http/protobuf']],
    ['"null" is dropped', { OTEL_TRACES_EXPORTER: 'null,console' }, ['console']],
  ])('%s', (_label, env, exporters) => {
    expect(quiet(env).exporters).toEqual(exporters);
  });

  it('uses otlp, and says so, when none comes after another exporter', () => {
    const plan = traceSdkPlan({ OTEL_TRACES_EXPORTER: 'console,none' });
    expect(plan.exporters).toEqual(['otlp-http/protobuf']);
    expect(plan.warnings).toEqual([
      'OTEL_TRACES_EXPORTER names "none" along with other exporters; using otlp',
    ]);
  });

  it('drops an unknown exporter with a warning that names the values it takes', () => {
    const plan = traceSdkPlan({ OTEL_TRACES_EXPORTER: 'jaeger,console' });
    expect(plan.exporters).toEqual(['console']);
    expect(plan.warnings).toEqual([
      'OTEL_TRACES_EXPORTER value "jaeger" is not supported (it takes otlp, console, zipkin or none); ignored',
    ]);
  });

  it('has no exporter, so no SDK, when every name is unknown', () => {
    const plan = traceSdkPlan({ OTEL_TRACES_EXPORTER: 'prometheus' });
    expect(plan.exporters).toEqual([]);
    expect(plan.warnings).toHaveLength(1);
  });

  it('falls back to http/protobuf on an unknown protocol, and says which variables take what', () => {
    const plan = traceSdkPlan({ OTEL_EXPORTER_OTLP_PROTOCOL: 'http' });
    expect(plan.exporters).toEqual(['otlp-http/protobuf']);
    expect(plan.warnings).toEqual([
      'OTLP traces protocol "http" is not supported (OTEL_EXPORTER_OTLP_TRACES_PROTOCOL or OTEL_EXPORTER_OTLP_PROTOCOL take grpc, http/protobuf or http/json); using http/protobuf',
    ]);
  });
});

describe('traceSdkPlan: OTEL_PROPAGATORS', () => {
  it.each([
    ['unset: W3C trace context and baggage', {}, ['tracecontext', 'baggage']],
    ['blank is unset', { OTEL_PROPAGATORS: '  ' }, ['tracecontext', 'baggage']],
    ['one', { OTEL_PROPAGATORS: 'tracecontext' }, ['tracecontext']],
    [
      'in the order given, duplicates once',
      { OTEL_PROPAGATORS: 'b3multi, tracecontext,b3multi,jaeger,b3,baggage' },
      ['b3multi', 'tracecontext', 'jaeger', 'b3', 'baggage'],
    ],
    ['none', { OTEL_PROPAGATORS: 'none' }, []],
    ['none anywhere wins', { OTEL_PROPAGATORS: 'tracecontext,none' }, []],
  ])('%s', (_label, env, propagators) => {
    expect(quiet(env).propagators).toEqual(propagators);
  });

  it('drops an unknown propagator with a warning, and registers none when all are unknown', () => {
    expect(traceSdkPlan({ OTEL_PROPAGATORS: 'xray,baggage' })).toMatchObject({
      propagators: ['baggage'],
      warnings: [
        'OTEL_PROPAGATORS value "xray" is not supported (it takes tracecontext, baggage, b3, b3multi, jaeger or none); ignored',
      ],
    });
    // Not the default in its place: what the operator asked for cannot be honoured.
    expect(traceSdkPlan({ OTEL_PROPAGATORS: 'xray' }).propagators).toEqual([]);
  });
});

describe('traceSdkPlan: OTEL_NODE_RESOURCE_DETECTORS', () => {
  it.each([
    ['unset: all, env last so that it wins', {}, ALL_DETECTORS],
    ['all among others', { OTEL_NODE_RESOURCE_DETECTORS: 'env,all' }, ALL_DETECTORS],
    ['none', { OTEL_NODE_RESOURCE_DETECTORS: 'none' }, []],
    ['a choice, in its order', { OTEL_NODE_RESOURCE_DETECTORS: 'process,env' }, ['process', 'env']],
  ])('%s', (_label, env, detectors) => {
    expect(quiet(env).detectors).toEqual(detectors);
  });

  it('drops an unknown detector with a warning', () => {
    expect(traceSdkPlan({ OTEL_NODE_RESOURCE_DETECTORS: 'container,env' })).toMatchObject({
      detectors: ['env'],
      warnings: [
        'OTEL_NODE_RESOURCE_DETECTORS value "container" is not supported (it takes host, os, serviceinstance, process, env, all or none); ignored',
      ],
    });
  });
});
