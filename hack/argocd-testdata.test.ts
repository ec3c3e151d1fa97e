import { describe, expect, it } from '@jest/globals';
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';
import { ConditionType, DegradedReason } from '../operator/api/v1alpha1/conditions';
import type { Conversation } from '../operator/api/v1alpha1/conversation-types';
import {
  CONVERSATION_HEALTH_DIR,
  REPO_ROOT,
  TESTDATA_DIR,
  conversationCases,
  renderTestdata,
} from './gen-argocd-testdata';

// The health script itself runs in Go (hack/argocd-health, `make test-argocd-health`), on
// gopher-lua as Argo CD runs it. This side keeps its inputs honest: they are what the
// operator writes today, and every Degraded reason it can write has a case.
const dir = join(REPO_ROOT, CONVERSATION_HEALTH_DIR);
const read = (path: string): string => readFileSync(join(dir, path), 'utf8');

interface HealthTest {
  readonly healthStatus: { readonly status: string; readonly message?: string };
  readonly inputPath: string;
}
const healthTests = (parse(read('health_test.yaml')) as { tests: HealthTest[] }).tests;

describe('Argo CD health test data for Conversation', () => {
  it('is what the operator writes now (run `npx tsx hack/gen-argocd-testdata.ts` when this fails)', () => {
    const rendered = renderTestdata();
    const committed = readdirSync(join(dir, TESTDATA_DIR)).sort();
    expect(committed).toEqual(Object.keys(rendered).sort());
    for (const [name, text] of Object.entries(rendered)) {
      expect([name, read(join(TESTDATA_DIR, name))]).toEqual([name, text]);
    }
  });

  it('has a test in health_test.yaml for every file, and a file for every test', () => {
    const inputs = healthTests.map((t) => t.inputPath).sort();
    expect(inputs).toEqual(
      Object.keys(renderTestdata())
        .map((f) => `${TESTDATA_DIR}/${f}`)
        .sort(),
    );
  });

  it.each(Object.values(DegradedReason))(
    'has a case where Degraded is True with reason %s, which Argo CD shows as Degraded with it',
    (reason) => {
      const cases = Object.entries(conversationCases()).filter(([, c]: [string, Conversation]) =>
        (c.status?.conditions ?? []).some(
          (x) => x.type === ConditionType.Degraded && x.status === 'True' && x.reason === reason,
        ),
      );
      const shownDegraded = cases.filter(([name]) =>
        healthTests.some(
          (t) =>
            t.inputPath === `${TESTDATA_DIR}/${name}.yaml` &&
            t.healthStatus.status === 'Degraded' &&
            (t.healthStatus.message ?? '').startsWith(`${reason}: `),
        ),
      );
      expect(shownDegraded.map(([name]) => name)).not.toEqual([]);
    },
  );

  it('docs/argocd.md carries the script verbatim in its argocd-cm snippet', () => {
    const docs = readFileSync(join(REPO_ROOT, 'docs/argocd.md'), 'utf8');
    const script = read('health.lua');
    const indented = script
      .split('\n')
      .map((line) => (line === '' ? '' : `    ${line}`))
      .join('\n');
    expect(docs).toContain(
      `  resource.customizations.health.polychrome.dev_Conversation: |\n${indented}`,
    );
  });
});
