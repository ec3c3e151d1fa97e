/**
 * What each make target builds (hack/build-binaries.sh through the Makefile, which pins the
 * versions): `make dev-binaries` only the five binaries `make dev` runs, `make binaries` those
 * and the tests' tools, each with its `[n/m]` line. The cache is a temporary
 * POLYCHROME_CACHE holding a file at every pinned path, so nothing is compiled: the script's
 * own cache check finds them, and the links go to a temporary POLYCHROME_BIN_DIR.
 */
import { afterAll, describe, expect, it } from '@jest/globals';
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readlinkSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { repoRoot } from './lib/paths';

const scratch = mkdtempSync(join(tmpdir(), 'polychrome-binaries-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** This environment without an outer make's flags (`make test` runs jest): each make here is its own. */
const env: NodeJS.ProcessEnv = Object.fromEntries(
  Object.entries(process.env).filter(([k]) => !['MAKEFLAGS', 'MFLAGS', 'MAKELEVEL'].includes(k)),
);

const pin = (name: string): string =>
  execFileSync('make', ['-s', `print-${name}`], { cwd: repoRoot, encoding: 'utf8', env }).trim();

const DEV = [
  ['etcd', 'ETCD_VERSION'],
  ['kubectl', 'KUBE_VERSION'],
  ['kube-apiserver', 'KUBE_VERSION'],
  ['kube-controller-manager', 'KUBE_VERSION'],
  ['agent-sandbox-controller', 'AGENT_SANDBOX_VERSION'],
] as const;
const TEST_BINARIES = [
  ['crane', 'CRANE_VERSION'],
  ['promtool', 'PROMTOOL_VERSION'],
  ['otelcol', 'OTELCOL_VERSION'],
  ['helm', 'HELM_VERSION'],
] as const;
/** The previous agent-sandbox release's controller: cached as the pinned one was, linked apart. */
const PREVIOUS_CONTROLLER = ['agent-sandbox-controller', 'AGENT_SANDBOX_PREVIOUS_VERSION'] as const;
const CRDS = [
  ['agent-sandbox-previous-crds', 'agent-sandbox', 'AGENT_SANDBOX_PREVIOUS_VERSION'],
  ['prometheus-operator-crds', 'prometheus-operator', 'PROMETHEUS_OPERATOR_VERSION'],
  ['cert-manager-crds', 'cert-manager', 'CERT_MANAGER_VERSION'],
] as const;

/** A cache with every pinned binary and CRD set present, as a machine that built them has. */
function fullCache(): string {
  const cache = join(scratch, 'cache');
  mkdirSync(join(cache, 'bin'), { recursive: true });
  for (const [name, version] of [...DEV, ...TEST_BINARIES, PREVIOUS_CONTROLLER]) {
    writeFileSync(join(cache, 'bin', `${name}-${pin(version)}`), '', { mode: 0o755 });
  }
  for (const [, dir, version] of CRDS) {
    mkdirSync(join(cache, 'crds', `${dir}-${pin(version)}`), { recursive: true });
  }
  return cache;
}
const cache = fullCache();

let runs = 0;
/** `make TARGET` with the temporary cache; its output lines and the links it made. */
function make(target: string): { lines: string[]; links: Record<string, string> } {
  const bin = join(scratch, `bin-${String((runs += 1))}`);
  const out = execFileSync('make', ['-s', target], {
    cwd: repoRoot,
    encoding: 'utf8',
    env: { ...env, POLYCHROME_CACHE: cache, POLYCHROME_BIN_DIR: bin },
  });
  const links = Object.fromEntries(
    readdirSync(bin).map((name) => [name, readlinkSync(join(bin, name))]),
  );
  return { lines: out.split('\n').filter((l) => l !== ''), links };
}

describe('hack/build-binaries.sh through make', () => {
  it('make dev-binaries builds the five binaries make dev runs, and nothing else', () => {
    const { lines, links } = make('dev-binaries');
    expect(lines.slice(0, 5)).toEqual(
      DEV.map(([name, version], i) => `hack: [${String(i + 1)}/5] ${name} ${pin(version)} cached`),
    );
    expect(lines[5]).toMatch(/^hack: etcd kubectl .* ready in .* \(\d+s\)$/u);
    expect(links).toEqual(
      Object.fromEntries(
        DEV.map(([name, version]) => [name, join(cache, 'bin', `${name}-${pin(version)}`)]),
      ),
    );
  });

  it('make binaries adds the previous agent-sandbox, crane, promtool, otelcol, helm and the CRDs the tests use, counted together', () => {
    const { lines, links } = make('binaries');
    const names: string[] = [...DEV, ...TEST_BINARIES].map(([name]) => name);
    names.push('agent-sandbox-controller-previous', ...CRDS.map(([name]) => name));
    expect(Object.keys(links).sort()).toEqual([...names].sort());
    expect(lines.filter((l) => /^hack: \[\d+\/13\] /u.test(l))).toHaveLength(13);
    expect(lines).toContain(
      `hack: [6/13] agent-sandbox-controller ${pin('AGENT_SANDBOX_PREVIOUS_VERSION')} cached`,
    );
    expect(lines).toContain(
      `hack: [7/13] agent-sandbox ${pin('AGENT_SANDBOX_PREVIOUS_VERSION')} CRDs cached`,
    );
    expect(lines).toContain(`hack: [9/13] promtool ${pin('PROMTOOL_VERSION')} cached`);
    expect(lines).toContain(
      `hack: [12/13] cert-manager ${pin('CERT_MANAGER_VERSION')} CRDs cached`,
    );
    // The previous controller is the binary the pinned one was, under a name of its own.
    expect(links['agent-sandbox-controller-previous']).toBe(
      join(cache, 'bin', `agent-sandbox-controller-${pin('AGENT_SANDBOX_PREVIOUS_VERSION')}`),
    );
    expect(links['agent-sandbox-controller']).toBe(
      join(cache, 'bin', `agent-sandbox-controller-${pin('AGENT_SANDBOX_VERSION')}`),
    );
    expect(lines).toContain(`hack: [13/13] helm ${pin('HELM_VERSION')} cached`);
  });

  it('refuses a name it does not know, listing the ones it does', () => {
    const run = spawnSync('bash', [join(repoRoot, 'hack', 'build-binaries.sh'), 'kubelet'], {
      encoding: 'utf8',
      env: Object.fromEntries(
        [
          'KUBE_VERSION',
          'ETCD_VERSION',
          'AGENT_SANDBOX_VERSION',
          'AGENT_SANDBOX_PREVIOUS_VERSION',
          'CRANE_VERSION',
          'PROMTOOL_VERSION',
          'PROMETHEUS_OPERATOR_VERSION',
          'OTELCOL_VERSION',
          'CERT_MANAGER_VERSION',
          'PATTERNMATCHER_VERSION',
          'COSIGN_VERSION',
          'HELM_VERSION',
          'KREW_VERSION',
        ]
          .map((v) => [v, pin(v)] as [string, string])
          .concat([
            ['PATH', process.env.PATH ?? ''],
            ['HOME', process.env.HOME ?? ''],
            ['POLYCHROME_CACHE', cache],
            ['POLYCHROME_BIN_DIR', join(scratch, 'unused')],
          ]),
      ),
    });
    expect(run.status).toBe(2);
    expect(run.stderr).toMatch(/unknown binary "kubelet"; usage: .* dev\|all\|test-tools\|NAME/u);
  });

  it('make dev, test-monitoring, images, chart, helm-chart and release ask only for what they run', () => {
    const plan = (target: string): string[] =>
      execFileSync('make', ['-n', target], { cwd: repoRoot, encoding: 'utf8', env })
        .split('\n')
        .filter((l) => l.includes('build-binaries.sh'));
    expect(plan('dev')).toEqual(['bash hack/build-binaries.sh dev']);
    expect(plan('cluster-up')).toEqual(['bash hack/build-binaries.sh dev']);
    expect(plan('test-monitoring')).toEqual(['bash hack/build-binaries.sh promtool']);
    expect(plan('images')).toEqual(['bash hack/build-binaries.sh crane dockerignore-check']);
    expect(plan('release')).toEqual([
      'bash hack/build-binaries.sh helm',
      'bash hack/build-binaries.sh crane kubectl cosign dockerignore-check',
    ]);
    expect(plan('test')).toContain('bash hack/build-binaries.sh all test-tools');
    expect(plan('test-integration')).toEqual(['bash hack/build-binaries.sh all test-tools']);
    expect(plan('chart')).toEqual(['bash hack/build-binaries.sh helm']);
    expect(plan('helm-chart')).toEqual(['bash hack/build-binaries.sh kubectl']);
  });
});
