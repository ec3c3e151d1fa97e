import { request } from 'node:https';
import { createServer } from 'node:net';
import { existsSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import { installCrds, readCrds } from './crds';
import { defaultBinDir } from './paths';
import { createSigningKeyPair, DevCertificateAuthority, pemAsBase64, type CertFiles } from './pki';
import { freePort, isAlive, pollUntil, startProcess, stopPid } from './processes';

/** Options for {@link LocalCluster.start}. */
export interface LocalClusterOptions {
  /**
   * State directory: certificates, etcd data, logs, kubeconfig, state.json. Wiped on
   * start unless {@link keepData}.
   */
  dir: string;
  /**
   * Start from what `dir` holds (`make dev` across runs): etcd's data, the CAs and the
   * service-account signing key are kept, and the ports of the last run are taken again
   * when they are free (the service-account issuer names the API server's port).
   * @default false: a fresh cluster
   */
  keepData?: boolean;
  /**
   * Run the ServiceAccount admission plugin (as every real cluster does): pods get the
   * projected `kube-api-access-*` token volume unless automountServiceAccountToken is
   * false, and a pod naming a ServiceAccount that does not exist is refused.
   * @default false
   */
  serviceAccountAdmission?: boolean;
  /** @default hack/bin */
  binDir?: string;
  /** Run kube-controller-manager (garbage collection, namespace deletion). @default true */
  controllerManager?: boolean;
  /** Run the agent-sandbox controller (Sandbox, SandboxClaim, SandboxWarmPool). @default false */
  agentSandbox?: boolean;
  /**
   * Folders of CRD YAML to install (and wait for) before any controller starts: the
   * agent-sandbox controller exits when its kinds are not served.
   * @default no CRDs
   */
  crdDirs?: readonly string[];
  /**
   * Write an audit log (`<dir>/audit.log`, JSON lines, metadata level, one line per
   * completed request) so benchmarks can count the requests each user made.
   * @default false
   */
  audit?: boolean;
  /** Processes outlive this one (for `make cluster-up`). @default false */
  detached?: boolean;
  /**
   * Where kube-apiserver listens and what it advertises as the `kubernetes` Service's
   * endpoint (`--bind-address`, `--secure-port`, `--advertise-address`): a managed cluster's
   * API server on 443, for the harness egress test. Port 443 needs root. The advertised
   * address must not be loopback (EndpointSlices refuse 127.0.0.0/8).
   * @default 127.0.0.1 on a free port, advertising 127.0.0.1
   */
  apiServer?: { bindAddress: string; port: number; advertiseAddress: string };
  /** Progress lines go here. @default no output */
  log?: (line: string) => void;
}

/** What a running local cluster is, as written to `<dir>/state.json`. */
export interface ClusterState {
  dir: string;
  server: string;
  kubeconfigPath: string;
  caCertPath: string;
  etcdUrl: string;
  pids: Record<string, number>;
}

const stateFile = (dir: string): string => join(dir, 'state.json');
const portsFile = (dir: string): string => join(dir, 'ports.json');

/** Whether nothing listens on 127.0.0.1:`port` now. */
function portFree(port: number): Promise<boolean> {
  return new Promise((resolvePort) => {
    const server = createServer();
    server.once('error', () => resolvePort(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolvePort(true)));
  });
}

/**
 * etcd's client and peer ports and the API server's: the last run's when `keep` and all
 * are free, new ones otherwise; written down for the next run.
 */
async function clusterPorts(dir: string, keep: boolean): Promise<[number, number, number]> {
  if (keep && existsSync(portsFile(dir))) {
    const last: unknown = JSON.parse(await readFile(portsFile(dir), 'utf8'));
    if (
      Array.isArray(last) &&
      last.length === 3 &&
      last.every((p): p is number => typeof p === 'number') &&
      (await Promise.all(last.map(portFree))).every(Boolean)
    ) {
      return [last[0], last[1], last[2]] as [number, number, number];
    }
  }
  const ports: [number, number, number] = await Promise.all([freePort(), freePort(), freePort()]);
  await writeFile(portsFile(dir), JSON.stringify(ports) + '\n');
  return ports;
}

/** Where a cluster started with `audit: true` writes its audit log. */
/** The common name of kube-apiserver's front-proxy client certificate (requestheader-allowed-names). */
export const FRONT_PROXY_CLIENT_NAME = 'front-proxy-client';

export const auditLogPath = (dir: string): string => join(dir, 'audit.log');

/**
 * The agent-sandbox controller's flags on a local cluster (the pinned release, v1.0 and
 * later: no conversion webhook, so no webhook flags): no leader election, the extensions
 * (SandboxClaim, SandboxTemplate, SandboxWarmPool), no metrics, health probes on loopback.
 */
export function agentSandboxControllerArgs(kubeconfigPath: string, probePort: number): string[] {
  return [
    `--kubeconfig=${kubeconfigPath}`,
    '--leader-elect=false',
    '--extensions=true',
    '--metrics-bind-address=0',
    `--health-probe-bind-address=127.0.0.1:${probePort}`,
  ];
}

/**
 * A real Kubernetes control plane on loopback, started the way controller-runtime's
 * envtest starts one: etcd on a free port, kube-apiserver with a throwaway serving
 * certificate, RBAC, service-account signing keys and an admin client certificate in
 * `system:masters`; optionally kube-controller-manager and the agent-sandbox controller.
 * No kubelet: pods run only through hack's local node.
 */
export class LocalCluster {
  private constructor(readonly state: ClusterState) {}

  get kubeconfigPath(): string {
    return this.state.kubeconfigPath;
  }

  get server(): string {
    return this.state.server;
  }

  /** Starts a fresh cluster in `opts.dir` and waits until the API server is ready. */
  static async start(opts: LocalClusterOptions): Promise<LocalCluster> {
    const log = opts.log ?? ((): void => undefined);
    const bin = (name: string): string => {
      const path = join(opts.binDir ?? defaultBinDir, name);
      if (!existsSync(path)) {
        throw new Error(`${path} is missing: run 'make binaries' to build the local control plane`);
      }
      return path;
    };
    const dir = resolve(opts.dir);
    const keep = opts.keepData === true && existsSync(join(dir, 'etcd'));
    if (!keep) await rm(dir, { recursive: true, force: true });
    const pki = join(dir, 'pki');
    const logs = join(dir, 'logs');
    await mkdir(logs, { recursive: true });
    const kept = (name: string): boolean => keep && existsSync(join(pki, name));
    const authority = (name: string, commonName: string): Promise<DevCertificateAuthority> =>
      kept(`${name}.crt`)
        ? Promise.resolve(DevCertificateAuthority.open(pki, name))
        : DevCertificateAuthority.create(pki, name, commonName);

    log(keep ? `cluster: starting again from ${dir}` : 'cluster: generating certificates');
    const ca = await authority('ca', 'polychrome-local-ca');
    const bindAddress = opts.apiServer?.bindAddress ?? '127.0.0.1';
    const serving = await ca.issue({
      name: 'apiserver',
      commonName: 'kube-apiserver',
      dnsNames: ['localhost', 'kubernetes', 'kubernetes.default', 'kubernetes.default.svc'],
      ipAddresses: [...new Set(['127.0.0.1', bindAddress, '10.0.0.1'])],
      usage: 'server',
    });
    const admin = await ca.issue({
      name: 'admin',
      commonName: 'polychrome-admin',
      organizations: ['system:masters'],
      usage: 'client',
    });
    const saKey = kept('service-account.pub')
      ? {
          keyPath: join(pki, 'service-account.key'),
          publicKeyPath: join(pki, 'service-account.pub'),
        }
      : await createSigningKeyPair(pki, 'service-account');
    // The aggregation layer: kube-apiserver proxies api.polychrome.dev to the control plane
    // with a client certificate from its own front-proxy CA (not the client CA, or any
    // client could claim to be the proxy) and the user in X-Remote-* headers. It publishes
    // this CA and the header names in kube-system/extension-apiserver-authentication.
    const frontProxyCa = await authority('front-proxy-ca', 'polychrome-local-front-proxy-ca');
    const proxyClient = await frontProxyCa.issue({
      name: 'front-proxy-client',
      commonName: FRONT_PROXY_CLIENT_NAME,
      usage: 'client',
    });

    const [etcdPort, peerPort, freeApiPort] = await clusterPorts(dir, keep);
    const etcdUrl = `http://127.0.0.1:${etcdPort}`;
    const apiPort = opts.apiServer?.port ?? freeApiPort;
    const server = `https://${bindAddress}:${apiPort}`;
    const pids: Record<string, number> = {};
    const state: ClusterState = {
      dir,
      server,
      kubeconfigPath: join(dir, 'kubeconfig'),
      caCertPath: ca.certPath,
      etcdUrl,
      pids,
    };
    const cluster = new LocalCluster(state);
    const spawnLogged = (name: string, args: string[]): void => {
      const child = startProcess(bin(name), args, {
        logPath: join(logs, `${name}.log`),
        detached: opts.detached,
      });
      if (child.pid === undefined) throw new Error(`${name} did not start`);
      pids[name] = child.pid;
    };

    try {
      log(`cluster: starting etcd on ${etcdUrl}`);
      const peerUrl = `http://127.0.0.1:${peerPort}`;
      spawnLogged('etcd', [
        '--name=default',
        `--data-dir=${join(dir, 'etcd')}`,
        `--listen-client-urls=${etcdUrl}`,
        `--advertise-client-urls=${etcdUrl}`,
        `--listen-peer-urls=${peerUrl}`,
        `--initial-advertise-peer-urls=${peerUrl}`,
        `--initial-cluster=default=${peerUrl}`,
        '--unsafe-no-fsync=true',
        '--log-level=warn',
      ]);
      await pollUntil('etcd /health', async () => {
        cluster.assertRunning();
        const res = await fetch(`${etcdUrl}/health`);
        return res.ok ? true : undefined;
      });

      log(`cluster: starting kube-apiserver on ${server}`);
      const auditArgs: string[] = [];
      if (opts.audit === true) {
        const policy = join(dir, 'audit-policy.yaml');
        await writeFile(
          policy,
          JSON.stringify({
            apiVersion: 'audit.k8s.io/v1',
            kind: 'Policy',
            omitStages: ['RequestReceived'],
            rules: [{ level: 'Metadata' }],
          }),
        );
        auditArgs.push(`--audit-policy-file=${policy}`, `--audit-log-path=${auditLogPath(dir)}`);
      }
      spawnLogged('kube-apiserver', [
        ...auditArgs,
        `--etcd-servers=${etcdUrl}`,
        `--cert-dir=${pki}`,
        `--tls-cert-file=${serving.certPath}`,
        `--tls-private-key-file=${serving.keyPath}`,
        `--client-ca-file=${ca.certPath}`,
        `--secure-port=${apiPort}`,
        `--bind-address=${bindAddress}`,
        `--advertise-address=${opts.apiServer?.advertiseAddress ?? '127.0.0.1'}`,
        `--service-account-issuer=${server}/`,
        `--service-account-key-file=${saKey.publicKeyPath}`,
        `--service-account-signing-key-file=${saKey.keyPath}`,
        '--authorization-mode=RBAC',
        `--requestheader-client-ca-file=${frontProxyCa.certPath}`,
        `--requestheader-allowed-names=${FRONT_PROXY_CLIENT_NAME}`,
        '--requestheader-username-headers=X-Remote-User',
        '--requestheader-group-headers=X-Remote-Group',
        '--requestheader-extra-headers-prefix=X-Remote-Extra-',
        `--proxy-client-cert-file=${proxyClient.certPath}`,
        `--proxy-client-key-file=${proxyClient.keyPath}`,
        // No kubelet or kube-proxy here: an APIService's Service is an ExternalName on
        // loopback (EndpointSlices refuse 127.0.0.0/8), so proxy to the Service, not to
        // endpoints.
        '--enable-aggregator-routing=false',
        ...(opts.serviceAccountAdmission === true
          ? []
          : ['--disable-admission-plugins=ServiceAccount']),
        '--service-cluster-ip-range=10.0.0.0/24',
        '--allow-privileged=true',
        '--profiling=false',
        '--v=0',
      ]);
      await writeFile(state.kubeconfigPath, await kubeconfig(server, ca.certPath, 'admin', admin));
      await pollUntil(
        'kube-apiserver /readyz',
        async () => {
          cluster.assertRunning();
          return (await cluster.get('/readyz', admin)).status === 200 ? true : undefined;
        },
        { timeoutMs: 120_000, intervalMs: 200 },
      );

      if (opts.crdDirs !== undefined && opts.crdDirs.length > 0) {
        log('cluster: installing CRDs');
        await installCrds(cluster.kubeConfig(), await readCrds(opts.crdDirs));
      }
      if (opts.controllerManager ?? true) {
        log('cluster: starting kube-controller-manager');
        spawnLogged('kube-controller-manager', [
          `--kubeconfig=${state.kubeconfigPath}`,
          '--leader-elect=false',
          '--secure-port=0',
          `--service-account-private-key-file=${saKey.keyPath}`,
          `--root-ca-file=${ca.certPath}`,
          '--use-service-account-credentials=false',
          // No kubelets and no cloud: the node and service controllers have nothing to do.
          '--controllers=*,-nodelifecycle,-node-ipam-controller,-cloud-node-lifecycle-controller,-service-lb-controller,-node-route-controller,-persistentvolume-attach-detach-controller',
          '--v=0',
        ]);
      }
      if (opts.agentSandbox ?? false) {
        log('cluster: starting the agent-sandbox controller');
        const probePort = await freePort();
        spawnLogged(
          'agent-sandbox-controller',
          agentSandboxControllerArgs(state.kubeconfigPath, probePort),
        );
        await pollUntil('the agent-sandbox controller /readyz', async () => {
          cluster.assertRunning();
          const res = await fetch(`http://127.0.0.1:${probePort}/readyz`);
          return res.ok ? true : undefined;
        });
      }
      await writeFile(stateFile(dir), JSON.stringify(state, null, 2) + '\n');
      log(`cluster: ready (kubeconfig ${state.kubeconfigPath})`);
      return cluster;
    } catch (err: unknown) {
      await cluster.stop();
      throw err;
    }
  }

  /** Attaches to a cluster started earlier (possibly by another process) in `dir`. */
  static async attach(dir: string): Promise<LocalCluster> {
    const raw: unknown = JSON.parse(await readFile(stateFile(resolve(dir)), 'utf8'));
    if (!isClusterState(raw)) throw new Error(`${stateFile(dir)} is not a cluster state file`);
    return new LocalCluster(raw);
  }

  /** A client configuration for the admin. */
  kubeConfig(): KubeConfig {
    const kc = new KubeConfig();
    kc.loadFromFile(this.state.kubeconfigPath);
    return kc;
  }

  /** Throws when a process of the cluster has exited, naming it and its log. */
  assertRunning(): void {
    for (const [name, pid] of Object.entries(this.state.pids)) {
      if (!isAlive(pid)) {
        throw new Error(`${name} exited; see ${join(this.state.dir, 'logs', `${name}.log`)}`);
      }
    }
  }

  /**
   * Issues a client certificate for another user (CN = user, O = groups) and writes a
   * kubeconfig for it, so RBAC can be tested as that identity. Safe to call concurrently
   * for the same user (test files sharing a cluster do): each call issues under a name of
   * its own and replaces the kubeconfig with one rename, so no reader sees a torn file or
   * a key that does not match its certificate.
   */
  async mintUser(user: string, groups: readonly string[] = []): Promise<string> {
    const pki = join(this.state.dir, 'pki');
    const ca = DevCertificateAuthority.open(pki, 'ca');
    const stem = user.replace(/[^A-Za-z0-9_.-]/g, '_');
    const unique = `${stem}-${randomBytes(4).toString('hex')}`;
    const cert = await ca.issue({
      name: `user-${unique}`,
      commonName: user,
      organizations: groups,
      usage: 'client',
    });
    const path = join(this.state.dir, `kubeconfig-${stem}`);
    const staged = `${path}.${unique}.tmp`;
    await writeFile(staged, await kubeconfig(this.state.server, this.state.caCertPath, stem, cert));
    await rename(staged, path);
    // The kubeconfig embeds the certificate and key; the files were only the way there.
    await Promise.all([rm(cert.certPath, { force: true }), rm(cert.keyPath, { force: true })]);
    return path;
  }

  /** Stops every process (controllers first, etcd last). Safe to call twice. */
  async stop(): Promise<void> {
    const order = ['agent-sandbox-controller', 'kube-controller-manager', 'kube-apiserver', 'etcd'];
    for (const name of order) {
      const pid = this.state.pids[name];
      if (pid !== undefined) await stopPid(pid);
    }
    await rm(stateFile(this.state.dir), { force: true });
  }

  private async get(path: string, client: CertFiles): Promise<{ status: number; body: string }> {
    const [ca, cert, key] = await Promise.all([
      readFile(this.state.caCertPath),
      readFile(client.certPath),
      readFile(client.keyPath),
    ]);
    return new Promise((resolvePromise, reject) => {
      const req = request(
        `${this.state.server}${path}`,
        { ca, cert, key, timeout: 5000 },
        (res) => {
          let body = '';
          res.setEncoding('utf8');
          res.on('data', (chunk: string) => (body += chunk));
          res.on('end', () => resolvePromise({ status: res.statusCode ?? 0, body }));
        },
      );
      req.on('timeout', () => req.destroy(new Error(`GET ${path} timed out`)));
      req.on('error', reject);
      req.end();
    });
  }
}

function isClusterState(value: unknown): value is ClusterState {
  if (typeof value !== 'object' || value === null) return false;
  const v = value as Record<string, unknown>;
  return (
    typeof v.dir === 'string' &&
    typeof v.server === 'string' &&
    typeof v.kubeconfigPath === 'string' &&
    typeof v.caCertPath === 'string' &&
    typeof v.etcdUrl === 'string' &&
    typeof v.pids === 'object' &&
    v.pids !== null &&
    Object.values(v.pids).every((pid) => typeof pid === 'number')
  );
}

async function kubeconfig(
  server: string,
  caPath: string,
  user: string,
  cert: CertFiles,
): Promise<string> {
  const [ca, crt, key] = await Promise.all([
    pemAsBase64(caPath),
    pemAsBase64(cert.certPath),
    pemAsBase64(cert.keyPath),
  ]);
  // JSON is valid YAML; kubectl and @kubernetes/client-node both read it.
  return JSON.stringify(
    {
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [
        { name: 'polychrome-local', cluster: { server, 'certificate-authority-data': ca } },
      ],
      users: [{ name: user, user: { 'client-certificate-data': crt, 'client-key-data': key } }],
      contexts: [{ name: user, context: { cluster: 'polychrome-local', user } }],
      'current-context': user,
    },
    null,
    2,
  );
}
