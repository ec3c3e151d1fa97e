import { setUpTestHarnessPki } from './harness-tls';

/** The unit project's global setup: the harness CA every in-process harness's certificate comes from. */
export default async function globalSetup(): Promise<void> {
  await setUpTestHarnessPki();
}
