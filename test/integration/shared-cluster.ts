import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { defaultCrdDirs } from '../../hack/lib/paths';
import { LocalCluster } from '../../hack/lib/local-cluster';

/** Environment variable through which test files find the shared cluster's directory. */
export const clusterDirEnv = 'POLYCHROME_TEST_CLUSTER_DIR';

// globalSetup and globalTeardown are loaded as separate modules in the jest parent
// process; a global is the one place both can see.
const handleKey = Symbol.for('polychrome.test.cluster');
type WithHandle = typeof globalThis & { [handleKey]?: LocalCluster };

/** Starts the shared control plane (with the CRDs from config/crd) for one jest run. */
export async function startSharedCluster(): Promise<void> {
  const started = Date.now();
  const dir = await mkdtemp(join(tmpdir(), 'polychrome-it-'));
  const cluster = await LocalCluster.start({
    dir,
    controllerManager: true,
    agentSandbox: true,
    crdDirs: defaultCrdDirs,
  });
  (globalThis as WithHandle)[handleKey] = cluster;
  // Workers are forked after global setup, so they inherit this.
  process.env[clusterDirEnv] = dir;
  process.stderr.write(
    `\nintegration: local control plane ready in ${Date.now() - started} ms (${dir})\n`,
  );
}

/** Stops the shared control plane. */
export async function stopSharedCluster(): Promise<void> {
  await (globalThis as WithHandle)[handleKey]?.stop();
}
