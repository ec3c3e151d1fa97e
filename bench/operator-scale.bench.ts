/*
 * 1,000 Conversations on the local control plane (real kube-apiserver and etcd) with the
 * plain-pod backend; hack's local node marks pods Running and Ready without processes.
 * Measures, for the controller in its own process:
 *
 * - time from the first create until every Conversation is Ready, beside a baseline
 *   measured in the same run: the same number of pods created and made Ready by the
 *   benchmark itself with the same concurrency (the API server's own floor for the
 *   objects involved) — aim: under 60 s for 1,000; readiness is followed with a watch
 *   (a poll listing every object twice a second loaded the API server in proportion to
 *   the count and the time, so slowed what it measured);
 * - CPU seconds of the API server, etcd, the benchmark with the local node, and the
 *   controller in each phase (from /proc), to show which of them the time went to;
 * - peak RSS and heap growth (after a forced GC, steady state minus idle) — aim: heap
 *   growth under 64 MiB;
 * - API requests per Conversation, counted from the API server's audit log by user, and
 *   broken down by verb, resource and response code;
 * - then the per-conversation leases (operator/lease) the control plane holds beside the
 *   controller: one ConversationLeases, as a user of its own, acquires a lease for every
 *   Conversation and holds them for three renew intervals (default timing: 15 s leases
 *   renewed every 5 s): requests per lease to acquire, per lease per renew interval to
 *   hold, and leases lost (none expected). OPERATOR_SCALE_LEASES=0 skips this part.
 * Readiness and the request counts are as before; the figures before the watch replaced the
 * poll (and before the controller read from its caches) are in docs/operator.md, Scale.
 *
 * Usage: npx tsx bench/operator-scale.bench.ts [count]   (default 1000; or OPERATOR_SCALE_COUNT)
 * OPERATOR_SCALE_WORKERS sets the controller's workers (default: the POLYCHROME_WORKERS
 * default), so worker counts can be compared at a reduced size.
 */
import {
  CoreV1Api,
  CustomObjectsApi,
  KubeConfig,
  NodeV1Api,
  makeInformer,
  type KubernetesListObject,
  type KubernetesObject,
} from '@kubernetes/client-node';
import { spawn, type ChildProcessByStdio } from 'node:child_process';
import type { Readable, Writable } from 'node:stream';
import { readFileSync } from 'node:fs';
import { readFile, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { auditLogPath, LocalCluster } from '../hack/lib/local-cluster';
import { defaultCrdDirs, repoRoot } from '../hack/lib/paths';
import { LocalNode } from '../hack/lib/local-node';
import { pollUntil } from '../hack/lib/processes';
import { createConversation } from './fixtures/conversations';
import { DEFAULT_WORKERS } from '../operator/controller/controller-options';
import { isObjectList } from '../operator/controller/watch-keys';
import { ConversationLeases } from '../operator/lease/conversation-leases';
import { isLeaseHandle } from '../operator/lease/lease-source';

const COUNT = Number(process.argv[2] ?? process.env['OPERATOR_SCALE_COUNT'] ?? '1000');
const WORKERS = Number(process.env['OPERATOR_SCALE_WORKERS'] ?? DEFAULT_WORKERS);
const CONCURRENCY = 32;
const LEASES = process.env['OPERATOR_SCALE_LEASES'] !== '0';
const OPERATOR_USER = 'polychrome-bench-operator';
const LEASE_USER = 'polychrome-bench-leases';
const RENEW_INTERVAL_MS = 5_000;
const HOLD_INTERVALS = 3;
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

/**
 * Watches the objects under `path` and resolves once `count` of them are ready. A watch,
 * not a poll: listing every object twice a second would load the API server in proportion
 * to the count and the time, and slow what is measured.
 */
async function watchReady(
  kc: KubeConfig,
  path: string,
  list: () => Promise<KubernetesListObject<KubernetesObject>>,
  isReady: (obj: KubernetesObject) => boolean,
  count: number,
): Promise<{ allReady: Promise<void>; stop: () => Promise<void> }> {
  const informer = makeInformer(kc, path, list);
  const ready = new Set<string>();
  let settle: { resolve: () => void; reject: (err: unknown) => void } | undefined;
  const allReady = new Promise<void>((resolve, reject) => {
    settle = { resolve, reject };
  });
  const see = (obj: KubernetesObject): void => {
    const name = obj.metadata?.name ?? '';
    if (isReady(obj)) ready.add(name);
    else ready.delete(name);
    if (ready.size >= count) settle?.resolve();
  };
  informer.on('add', see);
  informer.on('update', see);
  informer.on('error', (err: unknown) => settle?.reject(err));
  const timer = setTimeout(
    () => settle?.reject(new Error(`${path}: ${ready.size}/${count} ready after 600 s`)),
    600_000,
  );
  timer.unref();
  await informer.start();
  return {
    allReady,
    stop: async () => {
      clearTimeout(timer);
      await informer.stop();
    },
  };
}

const statusOf = (obj: unknown): unknown =>
  typeof obj === 'object' && obj !== null ? Reflect.get(obj, 'status') : undefined;

/** A Conversation whose phase is Ready. */
function conversationReady(obj: unknown): boolean {
  const status = statusOf(obj);
  return typeof status === 'object' && status !== null && Reflect.get(status, 'phase') === 'Ready';
}

/** A pod whose Ready condition is True. */
function podReady(obj: unknown): boolean {
  const conditions: unknown = Reflect.get(Object(statusOf(obj)), 'conditions');
  return (
    Array.isArray(conditions) &&
    conditions.some(
      (c: unknown) =>
        typeof c === 'object' &&
        c !== null &&
        Reflect.get(c, 'type') === 'Ready' &&
        Reflect.get(c, 'status') === 'True',
    )
  );
}

/**
 * CPU time (user + system, from /proc) of the processes that share the machine, per lap:
 * which of them a phase kept busy. Empty where /proc is not there.
 */
function cpuMeter(initial: Record<string, number | undefined>): {
  add: (name: string, pid: number) => void;
  lap: () => string;
} {
  const pids = new Map<string, number>();
  const ticksPerSecond = 100; // USER_HZ on Linux
  const read = (pid: number): number | undefined => {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      // Fields after the parenthesised command: state is the 3rd; utime and stime the 14th, 15th.
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      return (Number(fields[11]) + Number(fields[12])) / ticksPerSecond;
    } catch {
      return undefined;
    }
  };
  const last = new Map<string, number>();
  const add = (name: string, pid: number): void => {
    pids.set(name, pid);
    const now = read(pid);
    if (now !== undefined) last.set(name, now);
  };
  for (const [name, pid] of Object.entries(initial)) if (pid !== undefined) add(name, pid);
  return {
    add,
    lap: () => {
      const parts: string[] = [];
      for (const [name, pid] of pids) {
        const now = read(pid);
        const before = last.get(name);
        if (now === undefined || before === undefined) continue;
        parts.push(`${name} ${(now - before).toFixed(1)}`);
        last.set(name, now);
      }
      return parts.join(', ');
    },
  };
}

/**
 * The controller's completed requests in an audit log (JSON lines), in total and by
 * `verb resource[/subresource] code`, most frequent first. Watches still open have no
 * ResponseComplete line and are not counted.
 */
function countRequests(
  audit: string,
  user: string = OPERATOR_USER,
): { requests: number; breakdown: [string, number][] } {
  const byKind = new Map<string, number>();
  let requests = 0;
  for (const line of audit.split('\n')) {
    if (!line.includes(`"username":"${user}"`)) continue;
    const event: unknown = JSON.parse(line);
    const at = (...path: string[]): unknown =>
      path.reduce<unknown>(
        (cur, key) => (typeof cur === 'object' && cur !== null ? Reflect.get(cur, key) : undefined),
        event,
      );
    if (at('stage') !== 'ResponseComplete') continue;
    requests++;
    const sub = at('objectRef', 'subresource');
    const what = `${String(at('verb'))} ${String(at('objectRef', 'resource'))}${
      typeof sub === 'string' ? `/${sub}` : ''
    } ${String(at('responseStatus', 'code'))}`;
    byKind.set(what, (byKind.get(what) ?? 0) + 1);
  }
  return { requests, breakdown: [...byKind].sort((a, b) => b[1] - a[1]) };
}

/** Acquires a lease per Conversation in `bench`, holds them, and prints what it cost. */
async function leasePhase(
  cluster: LocalCluster,
  objects: CustomObjectsApi,
  dir: string,
): Promise<void> {
  const list: unknown = await objects.listNamespacedCustomObject({
    group: 'polychrome.dev',
    version: 'v1alpha1',
    plural: 'conversations',
    namespace: 'bench',
  });
  const items: unknown =
    typeof list === 'object' && list !== null ? Reflect.get(list, 'items') : [];
  const refs = (Array.isArray(items) ? items : []).map((item: unknown) => {
    const meta: unknown =
      typeof item === 'object' && item !== null ? Reflect.get(item, 'metadata') : {};
    const text = (k: string): string => {
      const v: unknown = typeof meta === 'object' && meta !== null ? Reflect.get(meta, k) : '';
      return typeof v === 'string' ? v : '';
    };
    return { namespace: 'bench', name: text('name'), uid: text('uid') };
  });
  const kc = new KubeConfig();
  kc.loadFromFile(await cluster.mintUser(LEASE_USER, ['system:masters']));
  let lost = 0;
  let renewed = 0;
  const leases = new ConversationLeases({
    kubeConfig: kc,
    // Stands in for the control plane's own namespace: the bench has one namespace.
    namespace: 'bench',
    identity: 'bench-replica',
    renewIntervalMs: RENEW_INTERVAL_MS,
    onTransition: (event) => {
      if (event === 'lost') lost++;
      if (event === 'renewed') renewed++;
    },
  });
  progress(`leases: acquiring ${refs.length}`);
  const t = performance.now();
  let held = 0;
  await inBatches(refs, async (ref) => {
    if (isLeaseHandle(await leases.tryAcquire(ref))) held++;
  });
  const acquireS = (performance.now() - t) / 1000;
  const acquired = countRequests(await readFile(auditLogPath(dir), 'utf8'), LEASE_USER).requests;
  progress(`leases: holding ${held} for ${HOLD_INTERVALS} renew intervals`);
  leases.start();
  await new Promise((resolve) => setTimeout(resolve, HOLD_INTERVALS * RENEW_INTERVAL_MS));
  const renewedBeforeRead = renewed;
  const total = countRequests(await readFile(auditLogPath(dir), 'utf8'), LEASE_USER);
  await leases.close();
  const renewals = total.requests - acquired;
  const holdS = (HOLD_INTERVALS * RENEW_INTERVAL_MS) / 1000;
  console.log(
    `leases: ${held}/${refs.length} acquired in ${acquireS.toFixed(1)} s, ${(acquired / refs.length).toFixed(2)} requests per lease`,
  );
  console.log(
    `leases held ${holdS} s (renewed every ${RENEW_INTERVAL_MS / 1000} s): ${renewedBeforeRead} renewals, ${renewals} requests (${(renewals / Math.max(1, renewedBeforeRead)).toFixed(2)} per renewal, ${(renewals / holdS).toFixed(0)}/s); lost: ${lost}`,
  );
  for (const [what, n] of total.breakdown) console.log(`  ${what}: ${n}`);
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
    const cpu = cpuMeter({
      'kube-apiserver': cluster.state.pids['kube-apiserver'],
      etcd: cluster.state.pids['etcd'],
      'bench + local node': process.pid,
    });
    const baselineReady = await watchReady(
      admin,
      '/api/v1/namespaces/bench-baseline/pods',
      () => core.listNamespacedPod({ namespace: 'bench-baseline' }),
      podReady,
      COUNT,
    );
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
    await baselineReady.allReady;
    const baselineS = (performance.now() - t0) / 1000;
    const baselineCpu = cpu.lap();
    await baselineReady.stop();

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
        String(WORKERS),
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

    const conversationsReady = await watchReady(
      admin,
      '/apis/polychrome.dev/v1alpha1/namespaces/bench/conversations',
      async () => {
        const list: unknown = await objects.listNamespacedCustomObject({
          group: 'polychrome.dev',
          version: 'v1alpha1',
          plural: 'conversations',
          namespace: 'bench',
        });
        if (!isObjectList(list)) throw new Error('listing conversations returned something else');
        return list;
      },
      conversationReady,
      COUNT,
    );
    if (running.pid !== undefined) cpu.add('controller', running.pid);
    cpu.lap();
    const t1 = performance.now();
    await inBatches(names, (name) => createConversation(objects, 'bench', name));
    const createdS = (performance.now() - t1) / 1000;
    await conversationsReady.allReady;
    const operatorS = (performance.now() - t1) / 1000;
    const operatorCpu = cpu.lap();
    await conversationsReady.stop();
    progress('all Ready; reading memory and the audit log');
    const steadyHeap = await settledHeap(running, feed);

    const { requests, breakdown } = countRequests(await readFile(auditLogPath(dir), 'utf8'));
    const ratio = operatorS / baselineS;
    console.log(
      `conversations ready: ${COUNT} in ${operatorS.toFixed(1)} s (aim < 60 s for 1,000)`,
    );
    console.log(`  (the benchmark's own ${COUNT} creates took ${createdS.toFixed(1)} s of that)`);
    console.log(
      `baseline, ${COUNT} bare pods made Ready: ${baselineS.toFixed(1)} s; ratio ${ratio.toFixed(2)}x`,
    );
    console.log(`CPU seconds, baseline: ${baselineCpu}`);
    console.log(`CPU seconds, conversations: ${operatorCpu}`);
    console.log(`controller peak RSS: ${(feed.peakRss() / MiB).toFixed(1)} MiB`);
    console.log(
      `controller heap growth after GC: ${((steadyHeap - idleHeap) / MiB).toFixed(1)} MiB (idle ${(idleHeap / MiB).toFixed(1)} MiB; aim < 64 MiB)`,
    );
    console.log(
      `API requests by the controller: ${requests} (${(requests / COUNT).toFixed(1)} per conversation; ${WORKERS} workers)`,
    );
    for (const [what, n] of breakdown) {
      console.log(`  ${what}: ${n} (${(n / COUNT).toFixed(2)} per conversation)`);
    }
    if (LEASES) await leasePhase(cluster, objects, dir);
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
