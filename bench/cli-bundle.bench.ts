/*
 * How long the bundled `kubectl polychrome` takes (hack/build-cli.ts, built fresh into a
 * temporary folder with no node_modules above it) against the same commands from the
 * sources through tsx, beside an empty Node process, all measured in this run: `help`,
 * `version`, completion of a verb (`kubectl_complete-polychrome s`) and completion of
 * Conversation names (`kubectl_complete-polychrome get ''`), which reads the kubeconfig and
 * lists the Conversations of a namespace on a local control plane (hack/lib/local-cluster.ts:
 * kube-apiserver and etcd from `make binaries`, the CRDs, three Conversations). Without
 * those binaries the names row is left out, and the bench says so. Median of RUNS spawns
 * each, after one warm-up (tsx compiles once into its cache).
 *
 * Aims (issue 30): `help` under 0.3 s, completion of names under 0.5 s.
 *
 * Usage: npx tsx bench/cli-bundle.bench.ts [runs]   (default 9)
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';

import { CoreV1Api, CustomObjectsApi } from '@kubernetes/client-node';

import { buildCli } from '../hack/build-cli';
import { createConversation } from './fixtures/conversations';
import { LocalCluster } from '../hack/lib/local-cluster';
import { defaultBinDir, defaultCrdDirs, repoRoot } from '../hack/lib/paths';

const RUNS = Number(process.argv[2] ?? '9');
const NAMES = ['bench-a', 'bench-b', 'bench-c'];

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? 0;
}

/** HOME of every run: an empty folder, so no ~/.kube/config of the machine is read. */
let home = tmpdir();

/** Median wall time of `node ...args` in `cwd`, in ms; checks the output each time. */
function time(args: readonly string[], cwd: string, expect: (out: string) => boolean): number {
  const once = (): number => {
    const started = performance.now();
    const run = spawnSync(process.execPath, args, {
      cwd,
      encoding: 'utf8',
      env: { PATH: dirname(process.execPath), HOME: home },
    });
    const ms = performance.now() - started;
    if (run.status !== 0 || !expect(run.stdout)) {
      throw new Error(
        `node ${args.join(' ')} exited ${String(run.status)}: ${run.stdout}${run.stderr}`,
      );
    }
    return ms;
  };
  once();
  return median(Array.from({ length: RUNS }, once));
}

/** A local control plane with the CRDs and three Conversations in `bench`, or none without binaries. */
async function clusterWithConversations(dir: string): Promise<LocalCluster | undefined> {
  if (!existsSync(join(defaultBinDir, 'kube-apiserver'))) return undefined;
  const cluster = await LocalCluster.start({
    dir: join(dir, 'cluster'),
    controllerManager: false,
    agentSandbox: false,
    crdDirs: defaultCrdDirs,
  });
  const kc = cluster.kubeConfig();
  await kc.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name: 'bench' } } });
  const objects = kc.makeApiClient(CustomObjectsApi);
  for (const name of NAMES) await createConversation(objects, 'bench', name);
  return cluster;
}

async function main(): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), 'bench-cli-bundle-'));
  home = dir;
  let cluster: LocalCluster | undefined;
  try {
    const bundle = join(dir, 'bundle');
    await buildCli(bundle);
    cluster = await clusterWithConversations(dir);
    const plugin = {
      bundle: [join(bundle, 'kubectl-polychrome.mjs')],
      source: ['--import', 'tsx', join(repoRoot, 'cli', 'kubectl-polychrome.ts')],
    };
    const complete = {
      bundle: [join(bundle, 'kubectl-complete-polychrome.mjs')],
      source: ['--import', 'tsx', join(repoRoot, 'cli', 'kubectl-complete-polychrome.ts')],
    };
    const names = (out: string): boolean => NAMES.every((n) => out.split('\n').includes(n));
    const rows: [string, number][] = [['baseline: node -e 0', time(['-e', '0'], dir, () => true)]];
    for (const how of ['bundle', 'source'] as const) {
      // The bundle runs from its temporary folder, the sources from the checkout (tsx).
      const cwd = how === 'bundle' ? dir : repoRoot;
      rows.push(
        [`${how}: help`, time([...plugin[how], 'help'], cwd, (o) => o.startsWith('usage:'))],
        [`${how}: version`, time([...plugin[how], 'version'], cwd, (o) => o.includes('0.'))],
        [`${how}: complete "s"`, time([...complete[how], 's'], cwd, (o) => o.includes('send'))],
      );
      if (cluster !== undefined) {
        const args = ['get', '--kubeconfig', cluster.kubeconfigPath, '-n', 'bench', ''];
        rows.push([`${how}: complete names`, time([...complete[how], ...args], cwd, names)]);
      }
    }
    const base = rows[0]?.[1] ?? 1;
    for (const [name, ms] of rows) {
      console.log(`${name.padEnd(28)} ${ms.toFixed(0).padStart(6)} ms  ${(ms / base).toFixed(1)}x`);
    }
    if (cluster === undefined) {
      console.log(
        `complete names: left out, no ${join(defaultBinDir, 'kube-apiserver')} (make binaries)`,
      );
    }
  } finally {
    await cluster?.stop();
    await rm(dir, { recursive: true, force: true });
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
