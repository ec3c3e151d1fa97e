/**
 * The local node: runs the pods of a local control plane as local processes.
 *
 *   tsx hack/local-node.ts --kubeconfig FILE [--name N] [--simulate] [--state-dir DIR]
 *                          [--namespace NS]... [--selector LABELS]
 *                          [--image 'PATTERN=["argv0","arg"]']... [--cluster-dns]
 *                          [--port-forward [HOST:]PORT=NS/SERVICE:TARGET]...
 *                          [--shutdown-grace SECONDS] [--pull-images]
 *
 * It registers the Node, binds every unscheduled pod in scope (all namespaces unless
 * --namespace is given) and runs it until SIGTERM or SIGINT, then stops its processes
 * (each within its pod's grace period, at most --shutdown-grace seconds, default 5) and
 * writes each pod's last status. The kubeconfig defaults to $KUBECONFIG, the state
 * directory (per-pod logs) to .local/node in the repository. With --pull-images (root
 * only) a container runs its own image, pinned by digest, pulled with hack/bin/crane into
 * <state-dir>/images and started under chroot, instead of a command of --image.
 */
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { KubeConfig } from '@kubernetes/client-node';
import { parsePortForward } from './lib/local-node-host-ports';
import { defaultImageCommands, LocalNode } from './lib/local-node';
import { type ImageCommands } from './lib/local-node-pod';
import { CraneImageStore } from './lib/local-node-image-store';
import { hostTools } from './lib/local-node-image-launch';
import { defaultBinDir, repoRoot } from './lib/paths';

const usage =
  'usage: local-node.ts --kubeconfig FILE [--name N] [--simulate] [--state-dir DIR] [--namespace NS]... [--selector LABELS] [--image PATTERN=JSON-ARGV]... [--cluster-dns] [--port-forward [HOST:]PORT=NS/SERVICE:TARGET]... [--shutdown-grace SECONDS] [--pull-images]';

function parseImages(specs: readonly string[]): ImageCommands {
  const images: Record<string, readonly string[]> = { ...defaultImageCommands };
  for (const spec of specs) {
    const at = spec.indexOf('=');
    let argv: unknown;
    try {
      argv = at > 0 ? JSON.parse(spec.slice(at + 1)) : undefined;
    } catch {
      argv = undefined;
    }
    if (!Array.isArray(argv) || argv.length === 0 || !argv.every((a) => typeof a === 'string')) {
      throw new Error(`--image ${spec}: expected PATTERN=["command","arg",...]\n${usage}`);
    }
    images[spec.slice(0, at)] = argv;
  }
  return images;
}

async function main(argv: readonly string[]): Promise<void> {
  const { values } = parseArgs({
    args: [...argv],
    options: {
      kubeconfig: { type: 'string' },
      name: { type: 'string' },
      simulate: { type: 'boolean' },
      'state-dir': { type: 'string' },
      namespace: { type: 'string', multiple: true },
      selector: { type: 'string' },
      image: { type: 'string', multiple: true },
      'cluster-dns': { type: 'boolean' },
      'port-forward': { type: 'string', multiple: true },
      'shutdown-grace': { type: 'string' },
      'pull-images': { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help === true) {
    console.log(usage);
    return;
  }
  const images = parseImages(values.image ?? []);
  const shutdownGrace = values['shutdown-grace'];
  if (shutdownGrace !== undefined && !/^\d+$/.test(shutdownGrace)) {
    throw new Error(`--shutdown-grace ${shutdownGrace}: expected whole seconds\n${usage}`);
  }
  const kubeconfig = values.kubeconfig ?? process.env.KUBECONFIG;
  if (kubeconfig === undefined) throw new Error(`--kubeconfig is required\n${usage}`);
  const kc = new KubeConfig();
  kc.loadFromFile(kubeconfig);
  const stateDir = values['state-dir'] ?? join(repoRoot, '.local', 'node');
  const node = new LocalNode({
    kubeConfig: kc,
    ...(values.name !== undefined ? { name: values.name } : {}),
    stateDir,
    simulate: values.simulate ?? false,
    ...(values.namespace !== undefined ? { namespaces: values.namespace } : {}),
    ...(values.selector !== undefined ? { labelSelector: values.selector } : {}),
    images,
    ...(values['pull-images'] === true
      ? {
          registry: {
            puller: new CraneImageStore({
              crane: join(defaultBinDir, 'crane'),
              cacheDir: join(stateDir, 'images'),
            }),
            tools: hostTools(),
          },
        }
      : {}),
    clusterDns: values['cluster-dns'] ?? false,
    portForwards: (values['port-forward'] ?? []).map(parsePortForward),
    ...(shutdownGrace !== undefined ? { shutdownGracePeriodSeconds: Number(shutdownGrace) } : {}),
    log: (line) => console.log(line),
  });
  const stop = new Promise<NodeJS.Signals>((resolve) => {
    process.once('SIGTERM', () => resolve('SIGTERM'));
    process.once('SIGINT', () => resolve('SIGINT'));
  });
  await node.start();
  const signal = await stop;
  console.log(`local node: ${signal}, stopping pods`);
  await node.close();
}

if (require.main === module) {
  main(process.argv.slice(2)).catch((err: unknown) => {
    console.error(err instanceof Error ? err.message : err);
    process.exit(1);
  });
}
