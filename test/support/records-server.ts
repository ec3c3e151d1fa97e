import { RecordsClient } from '../../common/records-client';
import {
  clientTls,
  makeTestPki,
  startTestStateServer,
  tempDir,
  type TestStateServer,
} from '../../state/server/testdata/fixtures';

/**
 * The state plane's Records service for a control-plane test: the real state server on
 * loopback over mutual TLS, its records on a fresh LevelDB, and a RecordsClient holding the
 * control plane's certificate (the roles main.ts's client has).
 */
export interface TestRecords {
  readonly records: RecordsClient;
  /** Creates a persona linking `identity`; its id. */
  persona(identity: string, roles?: readonly ('admin' | 'member' | 'edge')[]): Promise<string>;
  close(): Promise<void>;
}

/** Starts {@link TestRecords}; close it with `close()`. */
export async function startTestRecords(): Promise<TestRecords> {
  const dir = await tempDir('records');
  const pki = await makeTestPki(dir.path);
  const state: TestStateServer = await startTestStateServer(dir.path, pki, { signerSeed: 7 });
  const records = new RecordsClient({
    address: state.address,
    tls: await clientTls(pki.ca, pki.controlPlane),
    callTimeoutMs: 5_000,
  });
  return {
    records,
    async persona(identity, roles = ['member']) {
      const created = await records.createPersona({
        displayName: identity,
        identities: [identity],
        roles,
      });
      return created.id;
    },
    async close() {
      records.close();
      await state.close();
      await dir.remove();
    },
  };
}
