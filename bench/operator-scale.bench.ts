/*
 * 1,000 Conversations on the local control plane (real kube-apiserver and etcd) with the
 * plain-pod backend; hack's local node marks pods Running and Ready without processes.
 * Measures, for the controller in its own process:
 *
 * - time from the first create until every Conversation is Ready, beside a baseline
 *   measured in the same run: the same number of pods created and made Ready by the
 *   benchmark itself with the same concurrency (the API server's own floor for the
 *   objects involved) — aim: under 60 s for 1,000;
 * - peak RSS and heap growth (after a forced GC, steady state minus idle) — aim: heap
 *   growth under 64 MiB;
 * - API requests per Conversation, counted from the API server's audit log by user.
 *
 * Usage: npx tsx bench/operator-scale.bench.ts [count]   (default 1000)
 */
import { CoreV1Api, CustomObjectsApi, NodeV1Api } from '@kubernetes/client-node';
import { spawn, type ChildProcessByStdio } from 'node:child_process';
import type { Readable, Writable } from 'node:stream';
import { readFile, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { auditLogPath, defaultCrdDirs, LocalCluster, repoRoot } from '../hack/lib/local-cluster';
import { LocalNode } from '../hack/lib/local-node';
import { pollUntil } from '../hack/lib/processes';

const COUNT = Number(process.argv[2] ?? '1000');
const CONCURRENCY = 32;
const OPERATOR_USER = 'polychrome-bench-operator';
const MiB = 1024 * 1024;
const progress = (line: string): void => void process.stderr.write(`operator-scale: ${line}\n`);

async function inBatches<T>(items: readonly T[], fn: (item: T) => Promise<unknown>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < items.length) {
        const item = items[next++];
        if (item !== undefined) await fn(item);
      }
    }),
  );
}

type Controller = ChildProcessByStdio<Writable, Readable, null>;

interface Mem {
  rss: number;
  heapUsed: number;
}

function memoryFeed(child: Controller): {
  latest: () => Mem;
  peakRss: () => number;
} {
  let latest: Mem = { rss: 0, heapUsed: 0 };
  let peak = 0;
  child.stdout.setEncoding('utf8');
  child.stdout.on('data', (chunk: string) => {
    for (const line of chunk.split('\n')) {
      if (!line.startsWith('mem ')) continue;
      const parsed: unknown = JSON.parse(line.slice(4));
      if (
        typeof parsed === 'object' &&
        parsed !== null &&
        'rss' in parsed &&
        'heapUsed' in parsed
      ) {
        latest = { rss: Number(parsed.rss), heapUsed: Number(parsed.heapUsed) };
        peak = Math.max(peak, latest.rss);
      }
    }
  });
  return { latest: () => latest, peakRss: () => peak };
}

async function settledHeap(child: Controller, feed: { latest: () => Mem }): Promise<number> {
  const before = feed.latest();
  child.stdin.write('gc\n');
  return pollUntil('a memory report after GC', () =>
    Promise.resolve(feed.latest() !== before ? feed.latest().heapUsed : undefined),
  );
}

async function readyCount(objects: CustomObjectsApi, namespace: string): Promise<number> {
  const list: unknown = await objects.listNamespacedCustomObject({
    group: 'polychrome.dev',
    version: 'v1alpha1',
    plural: 'conversations',
    namespace,
  });
  const items: unknown =
    typeof list === 'object' && list !== null ? Reflect.get(list, 'items') : [];
  if (!Array.isArray(items)) return 0;
  return items.filter((item: unknown) => {
    const status: unknown =
      typeof item === 'object' && item !== null ? Reflect.get(item, 'status') : undefined;
    return (
      typeof status === 'object' && status !== null && Reflect.get(status, 'phase') === 'Ready'
    );
  }).length;
}

async function main(): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), 'bench-operator-'));
  const cluster = await LocalCluster.start({
    dir,
    controllerManager: false,
    agentSandbox: false,
    crdDirs: defaultCrdDirs,
    audit: true,
  });
  const node = new LocalNode({
    kubeConfig: cluster.kubeConfig(),
    name: 'bench-node',
    stateDir: join(dir, 'node'),
    simulate: true,
  });
  let child: Controller | undefined;
  try {
    const admin = cluster.kubeConfig();
    const core = admin.makeApiClient(CoreV1Api);
    const objects = admin.makeApiClient(CustomObjectsApi);
    await node.start();
    for (const ns of ['bench-baseline', 'bench'])
      await core.createNamespace({ body: { metadata: { name: ns } } });
    // The built-in harness pod spec runs under gVisor; admission rejects pods naming a
    // RuntimeClass that does not exist.
    await admin.makeApiClient(NodeV1Api).createRuntimeClass({
      body: { metadata: { name: 'gvisor' }, handler: 'runsc' },
    });

    // Baseline: the benchmark itself creates COUNT pods; the local node binds them and
    // marks them Ready. No controller, no Conversations.
    const names = Array.from({ length: COUNT }, (_, i) => `c${String(i).padStart(4, '0')}`);
    progress(`baseline: ${COUNT} bare pods`);
    const t0 = performance.now();
    await inBatches(names, (name) =>
      core.createNamespacedPod({
        namespace: 'bench-baseline',
        body: {
          metadata: { name },
          spec: { containers: [{ name: 'harness', image: 'polychrome/harness:dev' }] },
        },
      }),
    );
    await pollUntil(
      'baseline pods to be Ready',
      async () => {
        const pods = await core.listNamespacedPod({ namespace: 'bench-baseline' });
        const ready = pods.items.filter((p) =>
          p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True'),
        );
        return ready.length === COUNT ? true : undefined;
      },
      { timeoutMs: 300_000, intervalMs: 500 },
    );
    const baselineS = (performance.now() - t0) / 1000;

    // The controller in its own process, as a user of its own (for the audit count).
    const operatorKubeconfig = await cluster.mintUser(OPERATOR_USER, ['system:masters']);
    child = spawn(
      process.execPath,
      [
        '--expose-gc',
        '--import',
        'tsx',
        join(__dirname, 'fixtures', 'controller-process.ts'),
        operatorKubeconfig,
        'bench',
        '4',
      ],
      { cwd: repoRoot, stdio: ['pipe', 'pipe', 'inherit'] },
    );
    const running = child;
    const feed = memoryFeed(running);
    await pollUntil(
      'the controller process to report',
      () => Promise.resolve(feed.latest().rss > 0 ? true : undefined),
      {
        timeoutMs: 60_000,
      },
    );
    const idleHeap = await settledHeap(running, feed);
    progress(`controller started; creating ${COUNT} Conversations`);

    const t1 = performance.now();
    await inBatches(names, (name) =>
      objects.createNamespacedCustomObject({
        group: 'polychrome.dev',
        version: 'v1alpha1',
        plural: 'conversations',
        namespace: 'bench',
        body: {
          apiVersion: 'polychrome.dev/v1alpha1',
          kind: 'Conversation',
          metadata: { name },
          spec: { agent: { systemPrompt: 'bench' }, sandbox: { backend: 'pod' } },
        },
      }),
    );
    await pollUntil(
      `${COUNT} Conversations to be Ready`,
      async () => ((await readyCount(objects, 'bench')) === COUNT ? true : undefined),
      { timeoutMs: 600_000, intervalMs: 500 },
    );
    const operatorS = (performance.now() - t1) / 1000;
    progress('all Ready; reading memory and the audit log');
    const steadyHeap = await settledHeap(running, feed);

    const audit = await readFile(auditLogPath(dir), 'utf8');
    let requests = 0;
    for (const line of audit.split('\n')) {
      if (
        line.includes(`"username":"${OPERATOR_USER}"`) &&
        line.includes('"stage":"ResponseComplete"')
      )
        requests++;
    }

    const ratio = operatorS / baselineS;
    console.log(
      `conversations ready: ${COUNT} in ${operatorS.toFixed(1)} s (aim < 60 s for 1,000)`,
    );
    console.log(
      `baseline, ${COUNT} bare pods made Ready: ${baselineS.toFixed(1)} s; ratio ${ratio.toFixed(2)}x`,
    );
    console.log(`controller peak RSS: ${(feed.peakRss() / MiB).toFixed(1)} MiB`);
    console.log(
      `controller heap growth after GC: ${((steadyHeap - idleHeap) / MiB).toFixed(1)} MiB (idle ${(idleHeap / MiB).toFixed(1)} MiB; aim < 64 MiB)`,
    );
    console.log(
      `API requests by the controller: ${requests} (${(requests / COUNT).toFixed(1)} per conversation)`,
    );
  } finally {
    child?.kill('SIGTERM');
    await node.close();
    await cluster.stop();
    await rm(dir, { recursive: true, force: true });
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
