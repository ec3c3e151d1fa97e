/*
 * How long `kubectl polychrome` takes to start, through the launcher people run
 * (bin/kubectl-polychrome.js: dist/ when built, else the sources through tsx). `help`, a
 * verb's `--help`, `version` and a usage error must not load the Kubernetes client library or the other libraries a
 * command needs only when it runs (zod, yaml); a command that reads a kubeconfig does.
 * Printed beside baselines measured in the same run: an empty Node process, and one that
 * only loads @kubernetes/client-node. Median of RUNS spawns each, after one warm-up (tsx
 * compiles once into its cache).
 *
 * Usage: npx tsx bench/cli-start.bench.ts [runs]   (default 15)
 */
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';

const RUNS = Number(process.argv[2] ?? '15');
const PLUGIN = join(__dirname, '..', 'bin', 'kubectl-polychrome.js');

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? 0;
}

/** Median wall time of `node ...args`, in ms; checks the exit code each time. */
function time(args: readonly string[], expectedStatus: number): number {
  const once = (): number => {
    const started = performance.now();
    const run = spawnSync(process.execPath, args, { encoding: 'utf8' });
    const ms = performance.now() - started;
    if (run.status !== expectedStatus) {
      throw new Error(`node ${args.join(' ')} exited ${String(run.status)}: ${run.stderr}`);
    }
    return ms;
  };
  once();
  return median(Array.from({ length: RUNS }, once));
}

const rows: [string, number][] = [
  ['baseline: node -e 0', time(['-e', '0'], 0)],
  [
    'baseline: node loading @kubernetes/client-node',
    time(['-e', "import('@kubernetes/client-node')"], 0),
  ],
  ['kubectl polychrome help', time([PLUGIN, 'help'], 0)],
  ['kubectl polychrome send --help', time([PLUGIN, 'send', '--help'], 0)],
  ['kubectl polychrome version', time([PLUGIN, 'version'], 0)],
  ['kubectl polychrome (usage error)', time([PLUGIN, 'no-such-verb'], 2)],
  [
    'kubectl polychrome get x (reads a kubeconfig)',
    time([PLUGIN, 'get', 'x', '--kubeconfig', join(__dirname, 'no-such-kubeconfig')], 3),
  ],
];
const base = rows[0]?.[1] ?? 1;
for (const [name, ms] of rows) {
  console.log(`${name.padEnd(48)} ${ms.toFixed(0).padStart(6)} ms  ${(ms / base).toFixed(1)}x`);
}
