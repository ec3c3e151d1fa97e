import { describe, expect, it } from '@jest/globals';
import { Metadata } from '@grpc/grpc-js';
import { traceContextFrom } from './call-metadata';

function metadata(entries: [string, string][]): Metadata {
  const m = new Metadata();
  for (const [key, value] of entries) m.add(key, value);
  return m;
}

describe('traceContextFrom', () => {
  it('parses a valid traceparent', () => {
    expect(
      traceContextFrom(
        metadata([['traceparent', '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01']]),
      ),
    ).toEqual({
      traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01',
      traceId: '4bf92f3577b34da6a3ce929d0e0e4736',
      parentSpanId: '00f067aa0ba902b7',
      sampled: true,
    });
  });

  it.each([
    ['absent', undefined],
    ['malformed', 'not-a-trace'],
    ['version ff', 'ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01'],
    ['zero trace id', '00-00000000000000000000000000000000-00f067aa0ba902b7-01'],
    ['zero span id', '00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01'],
  ])('ignores a traceparent that is %s', (_label, value) => {
    expect(traceContextFrom(metadata(value === undefined ? [] : [['traceparent', value]]))).toBe(
      undefined,
    );
  });
});
