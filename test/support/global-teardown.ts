import { tearDownTestHarnessPki } from './harness-tls';

/** The unit project's global teardown: removes the run's harness CA and certificates. */
export default async function globalTeardown(): Promise<void> {
  await tearDownTestHarnessPki();
}
