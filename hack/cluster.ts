/**
 * `make cluster-up` / `make cluster-down`: the local control plane for development.
 *
 *   tsx hack/cluster.ts up      start etcd, kube-apiserver, kube-controller-manager and the
 *                               agent-sandbox controller in the background, install the CRDs,
 *                               apply config/samples and show `kubectl get conversations`
 *   tsx hack/cluster.ts down    stop them
 *   tsx hack/cluster.ts status  say whether it runs and where its kubeconfig is
 *   tsx hack/cluster.ts mint-user NAME [GROUP...]   kubeconfig for another identity (RBAC)
 */
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { defaultBinDir, defaultCrdDirs, repoRoot } from './lib/paths';
import { LocalCluster } from './lib/local-cluster';

const dir = process.env.POLYCHROME_CLUSTER_DIR ?? join(repoRoot, '.local', 'cluster');

function kubectl(kubeconfigPath: string, args: readonly string[]): string {
  return execFileSync(join(defaultBinDir, 'kubectl'), [`--kubeconfig=${kubeconfigPath}`, ...args], {
    encoding: 'utf8',
  });
}

async function up(): Promise<void> {
  if (existsSync(join(dir, 'state.json'))) {
    const running = await LocalCluster.attach(dir);
    try {
      running.assertRunning();
      console.log(`cluster: already running; export KUBECONFIG=${running.kubeconfigPath}`);
      return;
    } catch {
      await running.stop();
    }
  }
  const cluster = await LocalCluster.start({
    dir,
    detached: true,
    controllerManager: true,
    agentSandbox: true,
    crdDirs: defaultCrdDirs,
    log: (line) => console.log(line),
  });
  console.log('cluster: applying config/samples');
  process.stdout.write(
    kubectl(cluster.kubeconfigPath, ['apply', '-k', join(repoRoot, 'config', 'samples')]),
  );
  process.stdout.write(kubectl(cluster.kubeconfigPath, ['get', 'conversations']));
  console.log(
    `\nexport KUBECONFIG=${cluster.kubeconfigPath} PATH=${defaultBinDir}:$PATH    # then: kubectl get conv`,
  );
}

async function main(argv: readonly string[]): Promise<void> {
  const [command, ...rest] = argv;
  switch (command) {
    case 'up':
      return up();
    case 'down': {
      if (!existsSync(join(dir, 'state.json'))) {
        console.log('cluster: not running');
        return;
      }
      await (await LocalCluster.attach(dir)).stop();
      console.log('cluster: stopped');
      return;
    }
    case 'status': {
      if (!existsSync(join(dir, 'state.json'))) {
        console.log('cluster: not running');
        process.exitCode = 1;
        return;
      }
      const cluster = await LocalCluster.attach(dir);
      cluster.assertRunning();
      console.log(
        `cluster: running at ${cluster.server}; export KUBECONFIG=${cluster.kubeconfigPath}`,
      );
      return;
    }
    case 'mint-user': {
      const [user, ...groups] = rest;
      if (user === undefined) throw new Error('usage: cluster.ts mint-user NAME [GROUP...]');
      console.log(await (await LocalCluster.attach(dir)).mintUser(user, groups));
      return;
    }
    default:
      throw new Error(`unknown command '${command ?? ''}': use up, down, status or mint-user`);
  }
}

if (require.main === module) {
  main(process.argv.slice(2)).catch((err: unknown) => {
    console.error(err instanceof Error ? err.message : err);
    process.exit(1);
  });
}
