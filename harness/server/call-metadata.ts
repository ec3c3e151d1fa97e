import type { Metadata } from '@grpc/grpc-js';

/** What the harness reads from a call's metadata besides its credential: the W3C trace context. */

/** A parsed W3C `traceparent` (https://www.w3.org/TR/trace-context/#traceparent-header). */
export interface TraceContext {
  /** The header as received, for the log. */
  readonly traceparent: string;
  readonly traceId: string;
  /** The caller's span, this call's parent. */
  readonly parentSpanId: string;
  readonly sampled: boolean;
}

const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/u;

/**
 * The call's trace context, or undefined when there is none or it is malformed (a bad
 * header must not fail a turn: tracing is advisory). Version `ff` and all-zero ids are
 * invalid per the spec.
 */
export function traceContextFrom(metadata: Metadata): TraceContext | undefined {
  const [value] = metadata.get('traceparent');
  if (typeof value !== 'string') return undefined;
  const header = value.trim().toLowerCase();
  const match = TRACEPARENT.exec(header);
  if (match === null) return undefined;
  const [, version, traceId, parentSpanId, flags] = match;
  if (
    version === undefined ||
    traceId === undefined ||
    parentSpanId === undefined ||
    flags === undefined ||
    version === 'ff' ||
    /^0+$/u.test(traceId) ||
    /^0+$/u.test(parentSpanId)
  ) {
    return undefined;
  }
  return {
    traceparent: header,
    traceId,
    parentSpanId,
    sampled: (Number.parseInt(flags, 16) & 1) === 1,
  };
}
