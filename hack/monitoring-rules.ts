/**
 * Writes the PrometheusRule's `.spec` in config/monitoring as a plain Prometheus rules file,
 * for `promtool check rules` and `promtool test rules` (`make test-monitoring`). Nothing is
 * committed from it: the PrometheusRule is the one copy.
 *
 *   tsx hack/monitoring-rules.ts <out.yaml>
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseAllDocuments, stringify } from 'yaml';
import { AppError } from '../common/errors';
import { repoRoot } from './lib/paths';

/** The PrometheusRule file, relative to the repository root. */
export const PROMETHEUS_RULE_PATH = 'config/monitoring/prometheus-rule.yaml';

function isObj(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * The rules file of the one PrometheusRule in `yamlText`: its `.spec` (`groups:`), as YAML.
 *
 * @throws AppError `invalid_argument` when the text holds no PrometheusRule, more than one,
 *   or one whose `.spec.groups` is not a non-empty list.
 */
export function rulesFileOf(yamlText: string, source: string): string {
  const rules = parseAllDocuments(yamlText)
    .map((d) => d.toJS() as unknown)
    .filter(isObj)
    .filter((o) => o['kind'] === 'PrometheusRule');
  if (rules.length !== 1) {
    throw new AppError(
      'invalid_argument',
      `${source} holds ${String(rules.length)} PrometheusRule objects; keep exactly one there (the rules promtool checks)`,
    );
  }
  const spec = (rules[0] ?? {})['spec'];
  const groups = isObj(spec) ? spec['groups'] : undefined;
  if (!Array.isArray(groups) || groups.length === 0) {
    throw new AppError(
      'invalid_argument',
      `the PrometheusRule in ${source} has no spec.groups list; give it at least one rule group`,
    );
  }
  return stringify(spec, { lineWidth: 0 });
}

function main(out: string | undefined): void {
  if (out === undefined) {
    throw new AppError(
      'invalid_argument',
      'usage: tsx hack/monitoring-rules.ts <out.yaml>: name the rules file to write',
    );
  }
  const text = readFileSync(join(repoRoot, PROMETHEUS_RULE_PATH), 'utf8');
  writeFileSync(out, rulesFileOf(text, PROMETHEUS_RULE_PATH));
}

if (require.main === module) {
  try {
    main(process.argv[2]);
  } catch (err: unknown) {
    console.error(err instanceof Error ? err.message : err);
    process.exit(1);
  }
}
