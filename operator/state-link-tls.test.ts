import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterAll, afterEach, beforeAll, describe, expect, it, jest } from '@jest/globals';
import pino from 'pino';
import { Registry } from 'prom-client';

import { encodePayload, EventKind } from '../common/event-kinds';
import type { ServingCertificate } from '../common/serving-certificate';
import { loadStateClientTls } from '../common/state-channel';
import { StateClient } from '../common/state-client';
import type { NewJournalEvent } from '../common/state-journal';
import { ensureDevCerts, type DevCerts } from '../hack/lib/dev-certs';
import { CertUsage, DevCertificateAuthority, type CertFiles } from '../hack/lib/pki';
import { pollUntil } from '../hack/lib/processes';
import { SecretVolume } from '../test/support/secret-volume';
import { controlPlaneTlsReloads } from '../test/support/tls-reloads';
import { startStateProcess, type StateProcess } from '../test/support/state-process';
import { loadStateLinkCertificate } from './state-link-tls';

/*
 * The control plane's state-plane client certificate renewed without restarting it, on the
 * real state plane process over mutual TLS. The control plane's files are mounted as the
 * kubelet mounts a Secret (a `..data` link renamed over the old one); the same StateClient
 * the control plane builds (operator/main.ts) keeps running through the rotation. A
 * certificate is presented only at a handshake, so the proof that the new one is presented
 * is a state plane that trusts only the new CA: the client's next connection to it must
 * carry the new certificate or be refused.
 */

jest.setTimeout(120_000);

let dir: string;
let pki: DevCerts;
let ca2: DevCertificateAuthority;
/** CN polychrome-control-plane, O polychrome:writer, signed by the second CA. */
let writer2: CertFiles;
const processes = new Set<StateProcess>();
const clients = new Set<StateClient>();
const certificates = new Set<ServingCertificate>();

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'polychrome-control-plane-tls-reload-'));
  pki = await ensureDevCerts(join(dir, 'pki'));
  ca2 = await DevCertificateAuthority.create(join(dir, 'ca2'), 'ca2', 'polychrome-ca-2');
  writer2 = await ca2.issue({
    name: 'writer',
    commonName: 'polychrome-control-plane',
    organizations: ['polychrome:writer'],
    usage: CertUsage.Client,
  });
}, 60_000);

afterEach(async () => {
  for (const c of clients) c.close();
  clients.clear();
  for (const c of certificates) c.stop();
  certificates.clear();
  for (const p of processes) {
    p.child.kill('SIGKILL');
    await p.exited;
  }
  processes.clear();
});

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

const text = (path: string): Promise<string> => readFile(path, 'utf8');

/** Polls `check` until it gives a value (every 50 ms, for 20 s unless told). */
const eventually = <T>(
  what: string,
  check: () => Promise<T | undefined>,
  timeoutMs = 20_000,
): Promise<T> => pollUntil(what, check, { timeoutMs, intervalMs: 50 });

/** A `message_received` event whose text identifies it. */
function message(text: string): NewJournalEvent {
  const received = { turnId: 't', idempotencyKey: text, text, attribution: undefined };
  return {
    kind: EventKind.MessageReceived,
    payload: encodePayload(EventKind.MessageReceived, { ...received, receivedAtMs: 0 }),
  };
}

/** Starts the state plane on `port` (0: any) over `journal`, trusting the CA bundle at `caFile`. */
async function stateOn(port: number, caFile: string): Promise<StateProcess> {
  const p = await startStateProcess(pki, join(dir, 'journal'), {
    STATE_PORT: String(port),
    STATE_TLS_CA_FILE: caFile,
  });
  processes.add(p);
  return p;
}

/** Stops `p` as a rollout does and starts it again on its port, trusting `caFile` only. */
async function restart(p: StateProcess, caFile: string): Promise<StateProcess> {
  p.child.kill('SIGTERM');
  await p.exited;
  processes.delete(p);
  return await stateOn(p.port, caFile);
}

/** The head of `partition` through `client`, once its channel has reconnected. */
function headOnceConnected(client: StateClient, partition: string): Promise<number> {
  return eventually(
    'the client reconnected',
    async () =>
      client.head(partition).then(
        (h) => h.head,
        () => undefined,
      ),
    60_000,
  );
}

const metric = (registry: Registry, outcome: 'reloaded' | 'refused'): Promise<number> =>
  controlPlaneTlsReloads(registry, 'state-client', outcome);

describe("the control plane's state-plane certificate, renewed while it runs", () => {
  it('presents a certificate of a new CA at its next handshake, keeps calls in flight, and refuses a broken pair', async () => {
    const ca1 = await text(pki.ca.certPath);
    const ca2Pem = await text(ca2.certPath);
    const onlyCa2 = join(dir, 'only-ca2.crt');
    await writeFile(onlyCa2, ca2Pem);
    const volume = new SecretVolume(join(dir, 'control-plane-tls'));
    await mkdir(volume.dir);
    await volume.update({
      'ca.crt': ca1,
      'tls.crt': await text(pki.controlPlane.certPath),
      'tls.key': await text(pki.controlPlane.keyPath),
    });
    const warnings: string[] = [];
    const logger = pino({ level: 'info' }, { write: (line: string) => warnings.push(line) });
    const registry = new Registry();
    const certificate = await loadStateLinkCertificate(
      {
        address: 'unused',
        ...volume.tlsPaths(),
        serverName: undefined,
        // Only the directory watch can pick the change up within the test.
        reloadIntervalMs: 3_600_000,
      },
      logger,
      registry,
    );
    certificates.add(certificate);
    certificate.start();

    let state = await stateOn(0, pki.ca.certPath);
    const client = new StateClient({ address: state.address, tls: certificate });
    clients.add(client);
    const partition = 'conv-control-plane-tls';
    await client.append(partition, 0, [message('before')]);
    const follow = client.read(partition, 0, 0, { follow: true })[Symbol.asyncIterator]();
    expect((await follow.next()).value).toMatchObject({ position: 0 });
    expect((await follow.next()).value).toMatchObject({ position: 1 });

    // The renewal: a certificate of the new CA (the state plane's own still chains to ca1).
    await volume.update({
      'ca.crt': ca1,
      'tls.crt': await text(writer2.certPath),
      'tls.key': await text(writer2.keyPath),
    });
    await eventually('the new pair taken into use', async () =>
      (await metric(registry, 'reloaded')) === 1 ? true : undefined,
    );
    // The connection made before it goes on: the follow read delivers, the link appends.
    expect((await client.append(partition, 2, [message('after')])).head).toBe(4);
    expect((await follow.next()).value).toMatchObject({ position: 2 });
    await follow.return?.();

    // A state plane that trusts only the new CA: the old certificate is refused there...
    state = await restart(state, onlyCa2);
    const old = new StateClient({
      address: state.address,
      tls: await loadStateClientTls({
        ca: pki.ca.certPath,
        cert: pki.controlPlane.certPath,
        key: pki.controlPlane.keyPath,
      }),
      callTimeoutMs: 5_000,
    });
    clients.add(old);
    await expect(old.head(partition)).rejects.toThrow();
    // ...and the running client, not restarted, reconnects with the new one.
    expect(await headOnceConnected(client, partition)).toBe(4);
    expect((await client.append(partition, 4, [message('renewed')])).head).toBe(6);

    // Broken updates are refused and the pair in use stays: a key of another certificate,
    // then a CA bundle with no CA in it.
    await volume.update({
      'ca.crt': ca1,
      'tls.crt': await text(writer2.certPath),
      'tls.key': await text(pki.controlPlane.keyPath),
    });
    await eventually('the mismatched key refused', async () =>
      (await metric(registry, 'refused')) === 1 ? true : undefined,
    );
    await volume.update({
      'ca.crt': await text(pki.controlPlane.certPath),
      'tls.crt': await text(writer2.certPath),
      'tls.key': await text(writer2.keyPath),
    });
    await eventually('the bundle without a CA refused', async () =>
      (await metric(registry, 'refused')) === 2 ? true : undefined,
    );
    const refusals = warnings.filter((l) => l.includes('the new pair is not usable'));
    expect(refusals).toHaveLength(2);
    expect(refusals[0]).toMatch(/key values mismatch/u);
    expect(refusals[1]).toMatch(/not a CA certificate/u);
    expect(certificate.pair.cert).toBe(await text(writer2.certPath));
    // A new handshake after the refusals still presents the pair in use.
    state = await restart(state, onlyCa2);
    expect(await headOnceConnected(client, partition)).toBe(6);
    expect(await metric(registry, 'reloaded')).toBe(1);
  });
});
