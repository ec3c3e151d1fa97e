import { describe, expect, it } from '@jest/globals';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse, parseAllDocuments } from 'yaml';
import { isAppError } from '../common/errors';
import { repoRoot } from './lib/paths';
import { PROMETHEUS_RULE_PATH, rulesFileOf } from './monitoring-rules';

const committed = readFileSync(join(repoRoot, PROMETHEUS_RULE_PATH), 'utf8');

describe('rulesFileOf', () => {
  it("gives the committed PrometheusRule's .spec as a plain rules file: groups and nothing else", () => {
    const rulesFile: unknown = parse(rulesFileOf(committed, PROMETHEUS_RULE_PATH));
    const rule = parseAllDocuments(committed)
      .map((d) => d.toJS() as { kind?: string; spec?: unknown })
      .find((o) => o.kind === 'PrometheusRule');
    expect(rulesFile).toEqual(rule?.spec);
    expect(Object.keys(rulesFile as object)).toEqual(['groups']);
  });

  it('refuses text with no PrometheusRule, naming the file and what to do', () => {
    let caught: unknown;
    try {
      rulesFileOf('kind: ServiceMonitor\nspec: {}\n', 'x.yaml');
    } catch (err: unknown) {
      caught = err;
    }
    expect(isAppError(caught) && caught.code).toBe('invalid_argument');
    expect((caught as Error).message).toBe(
      'x.yaml holds 0 PrometheusRule objects; keep exactly one there (the rules promtool checks)',
    );
  });

  it('refuses two PrometheusRules, which would leave one unchecked', () => {
    const two = `${committed}\n---\n${committed.replace('name: polychrome', 'name: other')}`;
    expect(() => rulesFileOf(two, 'two.yaml')).toThrow(/two\.yaml holds 2 PrometheusRule objects/);
  });

  it('refuses a PrometheusRule without rule groups', () => {
    expect(() =>
      rulesFileOf('kind: PrometheusRule\nmetadata: {name: r}\nspec: {groups: []}\n', 'r.yaml'),
    ).toThrow(
      'the PrometheusRule in r.yaml has no spec.groups list; give it at least one rule group',
    );
  });
});
