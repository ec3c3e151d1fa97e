import { describe, expect, it } from '@jest/globals';
import { SANDBOX_BUNDLE } from '../operator/onboarding/sandbox-bundle';
import { buildSandboxObjects } from './gen-sandbox-bundle';

// Onboarding installs config/sandbox from a module generated from it: one source, and this
// fails when someone edits config/sandbox without regenerating (or edits the module).
describe('gen-sandbox-bundle', () => {
  it('matches config/sandbox as the pinned kubectl builds it (run `make manifests` when this fails)', () => {
    expect(SANDBOX_BUNDLE).toEqual(buildSandboxObjects());
  });

  it('holds the template, the warm pool and the NetworkPolicy, with octal modes as kubectl reads them', () => {
    expect(SANDBOX_BUNDLE.map((o) => o.kind).sort()).toEqual([
      'NetworkPolicy',
      'SandboxTemplate',
      'SandboxWarmPool',
    ]);
    // `defaultMode: 0440` in the YAML is 288, as kubectl (YAML 1.1) reads it, not 440.
    expect(JSON.stringify(SANDBOX_BUNDLE)).toContain('"defaultMode":288');
  });
});
