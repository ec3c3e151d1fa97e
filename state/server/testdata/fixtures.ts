import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { ensureDevCerts, type DevCerts } from '../../../hack/lib/dev-certs';
import { CertUsage, DevCertificateAuthority, type CertFiles } from '../../../hack/lib/pki';
import { CertificateRole } from '../../../common/certificate-identity';
import { encodePayload, EventKind } from '../../../common/event-kinds';
import type { NewJournalEvent } from '../../../common/state-journal';
import type { StateClientTls } from '../../../common/state-channel';
import { pollUntil } from '../../../hack/lib/processes';
import pino, { type Logger } from 'pino';
import { createNodeEd25519Signer } from '../../journal/node-ed25519';
import { loadRecordsKey } from '../../records/records-key';
import { JournalStore } from '../../store/journal-store';
import { RecordsDatabase } from '../records-database';
import type { StateMetrics } from '../state-metrics';
import { StateServer } from '../state-server';

/** A fresh temporary directory and a function that removes it. */
export async function tempDir(
  prefix: string,
): Promise<{ path: string; remove: () => Promise<void> }> {
  const path = await mkdtemp(join(tmpdir(), `polychrome-${prefix}-`));
  return { path, remove: () => rm(path, { recursive: true, force: true }) };
}

/** The dev PKI plus identities the state plane must refuse. */
export interface TestPki extends DevCerts {
  /** A client certificate that signed itself (CN polychrome-control-plane). */
  readonly selfSigned: CertFiles;
  /** CN polychrome-control-plane, but signed by a CA the state plane does not trust. */
  readonly foreign: CertFiles;
  /** Signed by the Polychrome CA, with no Polychrome role. */
  readonly stranger: CertFiles;
  /**
   * Signed by the Polychrome CA, each holding exactly one role (the shipped control-plane
   * certificate holds several), for the tests an attacker with that one role would try.
   */
  readonly only: Readonly<Record<CertificateRole, CertFiles>>;
}

/** Makes the dev certificates and the refused identities in `dir` (openssl). */
export async function makeTestPki(dir: string): Promise<TestPki> {
  const certs = await ensureDevCerts(join(dir, 'pki'));
  const rogue = await DevCertificateAuthority.create(
    join(dir, 'rogue'),
    'rogue-ca',
    'polychrome-control-plane',
  );
  const foreign = await rogue.issue({
    name: 'foreign-client',
    commonName: 'polychrome-control-plane',
    organizations: ['polychrome:writer'],
    usage: CertUsage.Client,
  });
  const stranger = await DevCertificateAuthority.open(join(dir, 'pki'), 'ca').issue(
    {
      name: 'stranger',
      commonName: 'someone-else',
      organizations: ['acme'],
      usage: CertUsage.Client,
    },
    join(dir, 'stranger'),
  );
  const ca = DevCertificateAuthority.open(join(dir, 'pki'), 'ca');
  const only: Partial<Record<CertificateRole, CertFiles>> = {};
  for (const role of Object.values(CertificateRole)) {
    const name = `only-${role.replace('polychrome:', '')}`;
    only[role] = await ca.issue(
      { name, commonName: name, organizations: [role], usage: CertUsage.Both },
      join(dir, name),
    );
  }
  return {
    ...certs,
    only: only as Record<CertificateRole, CertFiles>,
    selfSigned: { certPath: rogue.certPath, keyPath: rogue.keyPath },
    foreign,
    stranger,
  };
}

/** Client TLS bytes: the Polychrome CA as trust anchor, `identity` as the client. */
export async function clientTls(ca: CertFiles, identity: CertFiles): Promise<StateClientTls> {
  const [caPem, cert, key] = await Promise.all([
    readFile(ca.certPath),
    readFile(identity.certPath),
    readFile(identity.keyPath),
  ]);
  return { ca: caPem, cert, key };
}

/** A `message_received` event whose text identifies it. */
export function message(text: string): NewJournalEvent {
  return {
    kind: EventKind.MessageReceived,
    payload: encodePayload(EventKind.MessageReceived, {
      turnId: 't',
      idempotencyKey: text,
      text,
      attribution: undefined,
      receivedAtMs: 0,
    }),
  };
}

/** One turn's worth of events: a message, a tool call and its result (3 events). */
export function turn(label: string, size = 64): NewJournalEvent[] {
  const filler = (seed: number): Uint8Array => {
    const out = new Uint8Array(size);
    for (let i = 0; i < size; i++) out[i] = (i * 31 + seed) & 0xff;
    return out;
  };
  return [
    message(label),
    { kind: EventKind.ToolCall, payload: filler(label.length) },
    { kind: EventKind.ToolResult, payload: filler(label.length + 1) },
  ];
}

/** Polls `check` until it returns a value other than undefined, or fails at the deadline. */
export function eventually<T>(
  what: string,
  check: () => Promise<T | undefined> | T | undefined,
  timeoutMs = 20_000,
): Promise<T> {
  return pollUntil(what, async () => check(), { timeoutMs, intervalMs: 50 });
}

/** A state server on loopback over a fresh journal and records in `dir`, with `pki`'s server certificate. */
export interface TestStateServer {
  readonly journal: JournalStore;
  readonly recordsDb: RecordsDatabase;
  readonly server: StateServer;
  /** `localhost:<port>`: the name the server certificate carries. */
  readonly address: string;
  /** Stops the server, then closes the records and the journal. */
  close(): Promise<void>;
}

/** Starts a {@link TestStateServer}; `signerSeed` fills the journal signing key's 32 bytes. */
export async function startTestStateServer(
  dir: string,
  pki: TestPki,
  options: {
    readonly signerSeed: number;
    readonly logger?: Logger;
    readonly metrics?: (journal: JournalStore) => StateMetrics;
  },
): Promise<TestStateServer> {
  const journal = new JournalStore({
    location: join(dir, 'journal'),
    signer: createNodeEd25519Signer(new Uint8Array(32).fill(options.signerSeed)),
  });
  await journal.open();
  const recordsDb = new RecordsDatabase(join(dir, 'records'), await loadRecordsKey(pki.recordsKey));
  await recordsDb.open();
  const server = new StateServer({
    store: journal,
    records: recordsDb.records,
    backupRecords: () => recordsDb.backupEntries(),
    tls: {
      ca: await readFile(pki.ca.certPath),
      cert: await readFile(pki.server.certPath),
      key: await readFile(pki.server.keyPath),
    },
    logger: options.logger ?? pino({ level: 'silent' }),
    host: '127.0.0.1',
    port: 0,
    ...(options.metrics === undefined ? {} : { metrics: options.metrics(journal) }),
    publicKeys: [],
  });
  const address = `localhost:${String(await server.start())}`;
  return {
    journal,
    recordsDb,
    server,
    address,
    async close() {
      await server.close(1_000);
      await recordsDb.close();
      await journal.close();
    },
  };
}
