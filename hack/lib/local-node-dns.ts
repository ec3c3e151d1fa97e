import { rename, writeFile } from 'node:fs/promises';
import { CoreV1Api, type KubeConfig, type V1Pod, type V1Service } from '@kubernetes/client-node';
import { delay } from './local-node-container';

/**
 * Cluster DNS for hack's local node. There is no kube-proxy here, and EndpointSlices refuse
 * loopback addresses, so a Service name resolves straight to the addresses of its ready
 * pods (as a headless Service's does; with publishNotReadyAddresses, of its running ones),
 * and an ExternalName to its target. The records go to a JSON file that each pod process
 * reads through hack/lib/local-pod-runtime.mjs. A client therefore dials the target port
 * itself: a Service whose port differs from its target port is reported, since the port
 * a client names would not answer.
 */

/** A name's addresses, or the name an ExternalName Service points at. */
export type DnsRecord = readonly string[] | { readonly cname: string };

/** Every name, fully qualified under cluster.local, lower case. */
export type DnsRecords = Readonly<Record<string, DnsRecord>>;

/** The cluster domain, as the kubelet's default `--cluster-domain`. */
export const clusterDomain = 'cluster.local';

function isReady(pod: V1Pod): boolean {
  return pod.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') === true;
}

function selects(selector: Readonly<Record<string, string>>, pod: V1Pod): boolean {
  const labels = pod.metadata?.labels ?? {};
  return Object.entries(selector).every(([key, value]) => labels[key] === value);
}

/** The records of `services` over `pods`, and a line for each Service a client cannot use. */
export function clusterDnsRecords(
  services: readonly V1Service[],
  pods: readonly V1Pod[],
): { records: Record<string, DnsRecord>; problems: string[] } {
  const records: Record<string, DnsRecord> = {};
  const problems: string[] = [];
  for (const service of services) {
    const name = service.metadata?.name;
    const namespace = service.metadata?.namespace;
    if (name === undefined || namespace === undefined) continue;
    const fqdn = `${name}.${namespace}.svc.${clusterDomain}`;
    const spec = service.spec ?? {};
    if (spec.type === 'ExternalName') {
      if (spec.externalName !== undefined) records[fqdn] = { cname: spec.externalName };
      continue;
    }
    const selector = spec.selector;
    if (selector === undefined || Object.keys(selector).length === 0) continue;
    const members = pods.filter(
      (pod) =>
        pod.metadata?.namespace === namespace &&
        pod.metadata.deletionTimestamp === undefined &&
        pod.status?.podIP !== undefined &&
        selects(selector, pod) &&
        (spec.publishNotReadyAddresses === true || isReady(pod)),
    );
    records[fqdn] = [...new Set(members.map((pod) => pod.status?.podIP ?? ''))].sort();
    for (const pod of members) {
      // A pod with hostname and subdomain = this Service: hostname.name.ns.svc (StatefulSets).
      const hostname = pod.spec?.hostname;
      if (hostname !== undefined && pod.spec?.subdomain === name) {
        records[`${hostname}.${fqdn}`] = [pod.status?.podIP ?? ''];
      }
    }
    for (const port of spec.ports ?? []) {
      const target = port.targetPort ?? port.port;
      const numbers = members.map((pod) =>
        typeof target === 'number'
          ? target
          : /^\d+$/.test(target)
            ? Number(target)
            : pod.spec?.containers.flatMap((c) => c.ports ?? []).find((p) => p.name === target)
                ?.containerPort,
      );
      if (numbers.some((n) => n !== undefined && n !== port.port)) {
        problems.push(
          `Service ${namespace}/${name} port ${port.port} targets another port (${String(target)}); without kube-proxy a client of ${fqdn} must dial the target port`,
        );
      }
    }
  }
  return { records, problems };
}

/** Options of {@link ClusterDns}. */
export interface ClusterDnsOptions {
  kubeConfig: KubeConfig;
  /** Namespaces whose Services get names. @default every namespace */
  namespaces?: readonly string[];
  /** The records file the pods read. */
  file: string;
  /** How often the records are rebuilt. @default 1000 */
  intervalMs?: number;
  log?: (line: string) => void;
}

/** Keeps the records file current: lists Services and pods, rewrites the file on change. */
export class ClusterDns {
  private readonly core: CoreV1Api;
  private readonly abort = new AbortController();
  private loop: Promise<void> | undefined;
  private written = '';
  private readonly reported = new Set<string>();

  constructor(private readonly opts: ClusterDnsOptions) {
    this.core = opts.kubeConfig.makeApiClient(CoreV1Api);
  }

  /** Writes the records once, then keeps them current until {@link stop}. */
  async start(): Promise<void> {
    await this.refresh();
    this.loop ??= (async () => {
      while (!this.abort.signal.aborted) {
        await delay(this.opts.intervalMs ?? 1000, this.abort.signal);
        if (this.abort.signal.aborted) return;
        await this.refresh().catch((err: unknown) =>
          this.opts.log?.(`cluster DNS: ${err instanceof Error ? err.message : String(err)}`),
        );
      }
    })();
  }

  async stop(): Promise<void> {
    this.abort.abort();
    await this.loop;
  }

  private async refresh(): Promise<void> {
    const namespaces = this.opts.namespaces;
    const [services, pods] =
      namespaces === undefined
        ? await Promise.all([
            this.core.listServiceForAllNamespaces().then((l) => l.items),
            this.core.listPodForAllNamespaces().then((l) => l.items),
          ])
        : await Promise.all([
            Promise.all(
              namespaces.map((namespace) => this.core.listNamespacedService({ namespace })),
            ).then((lists) => lists.flatMap((l) => l.items)),
            Promise.all(
              namespaces.map((namespace) => this.core.listNamespacedPod({ namespace })),
            ).then((lists) => lists.flatMap((l) => l.items)),
          ]);
    const { records, problems } = clusterDnsRecords(services, pods);
    for (const problem of problems) {
      if (this.reported.has(problem)) continue;
      this.reported.add(problem);
      this.opts.log?.(`cluster DNS: ${problem}`);
    }
    const body = JSON.stringify(records, null, 1) + '\n';
    if (body === this.written) return;
    const staged = `${this.opts.file}.${process.pid}.tmp`;
    await writeFile(staged, body);
    await rename(staged, this.opts.file);
    this.written = body;
  }
}
