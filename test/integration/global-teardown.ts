import { stopSharedCluster } from './shared-cluster';

/** Stops the shared local control plane after the last integration test file. */
export default async function globalTeardown(): Promise<void> {
  await stopSharedCluster();
}
