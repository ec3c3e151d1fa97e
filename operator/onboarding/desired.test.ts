import { describe, expect, it } from '@jest/globals';

import { BUNDLE_OBJECTS } from './catalog';
import { desiredBundleObject, droppedFields, holds, keptBy, type Manifest } from './desired';

// What onboarding writes back over a stored object when the API server drops a field of
// ours (a CRD that does not declare it): the dry-run merge patch's answer decides what the
// server keeps, and only that is compared and written. test/integration/onboarding-dropped-field.test.ts
// runs it against a real API server.

const NS = 'team-a';
const placement = { controlPlaneNamespace: 'polychrome-system' };
const bundle = (kind: string): Manifest =>
  desiredBundleObject(
    BUNDLE_OBJECTS.find((o) => o.kind === kind) as (typeof BUNDLE_OBJECTS)[number],
    NS,
    placement,
  );
const warmPool = bundle('SandboxWarmPool');
const specOf = (m: unknown): Record<string, unknown> =>
  (m as { spec: Record<string, unknown> }).spec;

/** `object` as a server whose CRD lacks `spec.updateStrategy` keeps it, with what it adds. */
function withoutUpdateStrategy(object: Manifest): Record<string, unknown> {
  const { updateStrategy: _dropped, ...spec } = specOf(object);
  return {
    ...object,
    metadata: { ...object.metadata, uid: 'u-1', resourceVersion: '7', generation: 1 },
    spec,
    status: { replicas: 2, readyReplicas: 2 },
  };
}

describe('the onboarded warm pool', () => {
  it('replaces stale unclaimed harnesses at once (Recreate), from config/sandbox', () => {
    expect(specOf(warmPool)['updateStrategy']).toEqual({ type: 'Recreate' });
  });
});

describe('keptBy: what the server keeps of ours', () => {
  it('a field the server dropped is not compared: the stored object holds the rest, so nothing is written', () => {
    const stored = withoutUpdateStrategy(warmPool);
    // The plain comparison would put it back on every pass.
    expect(holds(stored, warmPool)).toBe(false);
    const servable = keptBy(warmPool, stored);
    expect(specOf(servable)).not.toHaveProperty('updateStrategy');
    expect(holds(stored, servable)).toBe(true);
    expect(droppedFields(warmPool, servable)).toEqual(['spec.updateStrategy']);
  });

  it('a change the server keeps is still written, without the dropped field', () => {
    const stored = withoutUpdateStrategy(warmPool);
    const changed = { ...stored, spec: { ...specOf(stored), replicas: 50 } };
    // The dry run's answer: ours merged over the stored object, less what the CRD lacks.
    const answer = withoutUpdateStrategy(warmPool);
    const servable = keptBy(warmPool, answer);
    expect(holds(changed, servable)).toBe(false);
    expect(specOf(servable)).toEqual({
      replicas: 2,
      sandboxTemplateRef: { name: 'polychrome-harness' },
    });
  });

  it('once the server keeps the field (its CRD upgraded), it is written', () => {
    const stored = withoutUpdateStrategy(warmPool);
    const answer = { ...stored, spec: { ...specOf(stored), updateStrategy: { type: 'Recreate' } } };
    const servable = keptBy(warmPool, answer);
    expect(servable).toEqual(warmPool);
    expect(holds(stored, servable)).toBe(false);
    expect(droppedFields(warmPool, servable)).toEqual([]);
  });

  it('takes lists item by item: a field dropped inside one item leaves the others', () => {
    const template = bundle('SandboxTemplate');
    const answer = JSON.parse(JSON.stringify(template)) as {
      spec: { podTemplate: { spec: { containers: Record<string, unknown>[] } } };
    };
    const containers = answer.spec.podTemplate.spec.containers;
    const first = containers[0] as Record<string, unknown>;
    delete first['env'];
    first['terminationMessagePath'] = '/dev/termination-log';
    const servable = keptBy(template, answer);
    expect(droppedFields(template, servable)).toEqual(['spec.podTemplate.spec.containers[0].env']);
    const kept = (specOf(servable)['podTemplate'] as typeof answer.spec.podTemplate).spec
      .containers[0] as Record<string, unknown>;
    expect(kept['image']).toBe(first['image']);
    expect(kept).not.toHaveProperty('terminationMessagePath');
    expect(holds(answer, servable)).toBe(true);
  });
});
