/**
 * config/monitoring on real parts: prometheus-operator's CRDs (copied unchanged from its Go
 * module at the version the Makefile pins, `make binaries`) installed in the local API
 * server, the monitoring objects server-side dry-run against them; and what the three
 * running planes serve on /metrics, after a real turn, through `promtool check metrics`.
 * The alert rules themselves are tested by `make test-monitoring` (promtool test rules).
 */
import { Role } from '../../common/persona-roles';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { execFileSync, spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse, parseAllDocuments } from 'yaml';
import { installCrds, readCrds } from '../../hack/lib/crds';
import { defaultBinDir, repoRoot } from '../../hack/lib/paths';
import { rulesFileOf, PROMETHEUS_RULE_PATH } from '../../hack/monitoring-rules';
import { kubeConfig, sharedCluster } from './support/kube';
import { postUntilSettled } from './support/public-api';
import { startTurnStack, type TurnStack } from './support/turn-stack';

type Obj = Record<string, unknown>;

function isObj(value: unknown): value is Obj {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

const crdDir = join(defaultBinDir, 'prometheus-operator-crds');
const promtool = join(defaultBinDir, 'promtool');

function kubectl(kubeconfig: string, args: readonly string[], input?: string): string {
  return execFileSync(join(defaultBinDir, 'kubectl'), [`--kubeconfig=${kubeconfig}`, ...args], {
    encoding: 'utf8',
    ...(input === undefined ? {} : { input }),
    stdio: ['pipe', 'pipe', 'pipe'],
  });
}

/** kubectl's error output when it exits non-zero, else a failure. */
function kubectlError(kubeconfig: string, args: readonly string[], input: string): string {
  try {
    kubectl(kubeconfig, args, input);
  } catch (err: unknown) {
    const stderr: unknown = isObj(err) ? err['stderr'] : undefined;
    return typeof stderr === 'string' ? stderr : String(err);
  }
  throw new Error(`kubectl ${args.join(' ')} succeeded`);
}

const keyOf = (o: Obj): string =>
  `${String(o['kind'])}/${String(isObj(o['metadata']) ? o['metadata']['name'] : undefined)}`;

/** The objects `kubectl ... -o json` printed (one object, or a List of them). */
function printed(json: string): Obj[] {
  const out: unknown = JSON.parse(json);
  if (!isObj(out)) return [];
  return out['kind'] === 'List' && Array.isArray(out['items']) ? out['items'].filter(isObj) : [out];
}

/** `promtool check metrics` on `text`: its exit status and what it printed. */
function checkMetrics(text: string): { status: number | null; output: string } {
  const run = spawnSync(promtool, ['check', 'metrics'], { input: text, encoding: 'utf8' });
  return { status: run.status, output: `${run.stdout}${run.stderr}`.trim() };
}

async function scrape(url: string): Promise<string> {
  const response = await fetch(url);
  expect({ url, status: response.status }).toEqual({ url, status: 200 });
  return response.text();
}

/** Names of the metric families a scrape declares (`# TYPE name type`). */
function familiesOf(text: string): Set<string> {
  return new Set(
    text
      .split('\n')
      .filter((l) => l.startsWith('# TYPE '))
      .map((l) => l.split(' ')[2] ?? ''),
  );
}

describe('config/monitoring against prometheus-operator CRDs', () => {
  let kubeconfig: string;
  beforeAll(async () => {
    if (!existsSync(crdDir)) {
      throw new Error(`${crdDir} is missing: run 'make binaries' (it copies the pinned CRDs)`);
    }
    kubeconfig = (await sharedCluster()).kubeconfigPath;
    // The CRDs of the three kinds config/monitoring uses, as upstream ships them.
    const crds = await readCrds([crdDir]);
    expect(crds.map((c) => c.metadata?.name).sort()).toEqual([
      'podmonitors.monitoring.coreos.com',
      'prometheusrules.monitoring.coreos.com',
      'servicemonitors.monitoring.coreos.com',
    ]);
    await installCrds(await kubeConfig(), crds);
    kubectl(kubeconfig, [
      'apply',
      '--server-side',
      '-f',
      join(repoRoot, 'config', 'cluster', 'namespace.yaml'),
    ]);
  }, 60_000);

  it('accepts config/monitoring on a server-side dry run and drops none of its fields', () => {
    const built = parseAllDocuments(
      kubectl(kubeconfig, ['kustomize', join(repoRoot, 'config', 'monitoring')]),
    )
      .map((d) => d.toJS() as unknown)
      .filter(isObj);
    expect(built.map(keyOf).sort()).toEqual([
      'PodMonitor/polychrome-harness',
      'PrometheusRule/polychrome',
      'ServiceMonitor/polychrome-control-plane',
      'ServiceMonitor/polychrome-state',
    ]);
    const returned = printed(
      kubectl(kubeconfig, [
        'apply',
        '--server-side',
        '--dry-run=server',
        '-k',
        join(repoRoot, 'config', 'monitoring'),
        '-o',
        'json',
      ]),
    );
    for (const b of built) {
      const r = returned.find((o) => keyOf(o) === keyOf(b));
      expect({ key: keyOf(b), found: r !== undefined }).toEqual({ key: keyOf(b), found: true });
      expect(r).toMatchObject(b);
    }
  });

  it('is checked by the CRD schemas: an unknown field or a bad value is refused', () => {
    const monitor = (spec: Obj): string =>
      JSON.stringify({
        apiVersion: 'monitoring.coreos.com/v1',
        kind: 'ServiceMonitor',
        metadata: { name: 'broken', namespace: 'polychrome-system' },
        spec,
      });
    const apply = ['apply', '--server-side', '--dry-run=server', '-f', '-'];
    expect(
      kubectlError(kubeconfig, apply, monitor({ selector: {}, endpoints: [{ prot: 'metrics' }] })),
    ).toMatch(/\.spec\.endpoints\[0\]\.prot: field not declared in schema/);
    expect(
      kubectlError(
        kubeconfig,
        apply,
        monitor({ selector: {}, endpoints: [{ port: 'metrics', scheme: 'gopher' }] }),
      ),
    ).toMatch(/scheme/);
  });

  it('the rules file promtool tests is the spec the API server accepted', () => {
    const returned = printed(
      kubectl(kubeconfig, [
        'apply',
        '--server-side',
        '--dry-run=server',
        '-f',
        join(repoRoot, PROMETHEUS_RULE_PATH),
        '-o',
        'json',
      ]),
    );
    const rulesFile: unknown = parse(
      rulesFileOf(readFileSync(join(repoRoot, PROMETHEUS_RULE_PATH), 'utf8'), 'rules'),
    );
    expect(returned[0]?.['spec']).toEqual(rulesFile);
  });
});

describe("each plane's /metrics passes promtool check metrics", () => {
  let stack: TurnStack | undefined;
  const scrapes = new Map<string, string>();

  beforeAll(async () => {
    if (!existsSync(promtool)) {
      throw new Error(
        `${promtool} is missing: run 'make binaries' (it builds the pinned promtool)`,
      );
    }
    stack = await startTurnStack({ controlPlanes: 1, namespacePrefix: 'metrics' });
    const s = stack;
    await s.withDiagnostics(async () => {
      // One real turn, so labelled counters and histograms have samples on every plane.
      const uid = await s.createConversation('metrics');
      // An admin may post to a conversation it did not create.
      const token = await s.mintToken('test:metrics', [Role.Admin]);
      const answer = await postUntilSettled(s.apiUrl, token, uid, 'hello', randomUUID());
      expect(answer.status).toBe(200);
      const harness = await s.harness('metrics');
      const controlPlane = s.controlPlanes[0];
      if (controlPlane === undefined) throw new Error('no control plane');
      scrapes.set(
        'control plane',
        await scrape(`http://127.0.0.1:${controlPlane.healthPort}/metrics`),
      );
      scrapes.set('state plane', await scrape(`http://127.0.0.1:${s.state.healthPort}/metrics`));
      scrapes.set('harness', await scrape(`http://${harness.podIP}:9090/metrics`));
    });
  }, 180_000);

  afterAll(async () => {
    await stack?.stop();
  }, 60_000);

  it.each(['control plane', 'state plane', 'harness'])('%s', (plane) => {
    const text = scrapes.get(plane) ?? '';
    // The plane's own families are there (not an empty or foreign page).
    const prefix = {
      'control plane': 'polychrome_turns_total',
      'state plane': 'polychrome_state_appends_total',
      harness: 'polychrome_harness_turns_total',
    }[plane];
    expect(familiesOf(text)).toContain(prefix);
    expect({ plane, ...checkMetrics(text) }).toEqual({ plane, status: 0, output: '' });
  });

  it('promtool check metrics does fail on a bad exposition (so a pass means something)', () => {
    const bad = '# HELP polychrome_x Things.\n# TYPE polychrome_x counter\npolychrome_x 1\n';
    const result = checkMetrics(bad);
    expect(result.status).not.toBe(0);
    expect(result.output).toMatch(/counter metrics should have "_total" suffix/);
  });

  it('every metric the alert rules read is one a plane exports', () => {
    const families = new Set([...scrapes.values()].flatMap((t) => [...familiesOf(t)]));
    const spec: unknown = parse(
      rulesFileOf(readFileSync(join(repoRoot, PROMETHEUS_RULE_PATH), 'utf8'), 'rules'),
    );
    const groups =
      isObj(spec) && Array.isArray(spec['groups']) ? (spec['groups'] as unknown[]) : [];
    const exprs = groups
      .filter(isObj)
      .flatMap((g): unknown[] => (Array.isArray(g['rules']) ? (g['rules'] as unknown[]) : []))
      .filter(isObj)
      .map((r) => String(r['expr']));
    // Recording rules (with a colon) are the rules' own; `up` is Prometheus's.
    const used = new Set(
      exprs
        .flatMap((e) => e.match(/\bpolychrome_[a-z_]+/g) ?? [])
        .map((n) => n.replace(/_bucket$/, '')),
    );
    expect(used.size).toBeGreaterThan(5);
    for (const name of used) {
      expect({ name, exported: families.has(name) }).toEqual({ name, exported: true });
    }
  });
});
