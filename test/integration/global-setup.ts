import { startSharedCluster } from './shared-cluster';

/** Starts the one local control plane that every integration test file shares. */
export default async function globalSetup(): Promise<void> {
  await startSharedCluster();
}
