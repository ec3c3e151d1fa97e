import { describe, expect, it } from '@jest/globals';

import { BUNDLE_OBJECTS } from './catalog';
import { desiredBundleObject, harnessSecret } from './desired';
import { toClientModel, toWire } from './wire';

// Every object onboarding writes goes through the client's model and back unchanged; the
// NetworkPolicy's `from` is the key that model renames (namespace-onboarding.test.ts reads
// the policy as the API server holds it).

const placement = { controlPlaneNamespace: 'pc-ops' };
const written = [
  ...BUNDLE_OBJECTS.map((o) => desiredBundleObject(o, 'team-a', placement)),
  harnessSecret('team-a', 'ab'.repeat(32)),
];

describe('wire JSON and the client model', () => {
  it.each(written.map((o) => [`${o.kind} ${o.metadata.name}`, o] as const))(
    '%s goes to the model and back unchanged',
    (_name, object) => {
      expect(toWire(toClientModel(object))).toEqual(object);
    },
  );

  it("the NetworkPolicy's ingress sources are `_from` in the model, `from` on the wire", () => {
    const policy = written.find((o) => o.kind === 'NetworkPolicy');
    const model = JSON.stringify(toClientModel(policy as (typeof written)[number]));
    expect(model).toContain('"_from":[{"namespaceSelector"');
    expect(JSON.stringify(toWire(JSON.parse(model) as never))).not.toContain('_from');
  });
});
