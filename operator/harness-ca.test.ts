import { generateKeyPairSync, X509Certificate } from 'node:crypto';
import { mkdir, mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterAll, afterEach, beforeAll, describe, expect, it, jest } from '@jest/globals';
import pino from 'pino';
import { Registry } from 'prom-client';

import type { CaBundleFile } from '../common/ca-bundle-file';
import { isAppError } from '../common/errors';
import { harnessServerName } from '../common/harness-identity';
import { CertUsage, DevCertificateAuthority, type CertFiles } from '../hack/lib/pki';
import { pollUntil } from '../hack/lib/processes';
import { harnessCertificateFrom, testHarnessCa } from '../test/support/harness-tls';
import { startScriptedHarness, type ScriptedHarness } from '../test/support/scripted-harness';
import { SecretVolume } from '../test/support/secret-volume';
import { controlPlaneTlsExpiry, controlPlaneTlsReloads } from '../test/support/tls-reloads';
import { loadHarnessCa } from './harness-ca';
import { ApprovalSigner } from './turns/approval-signer';
import { HarnessConnector } from './turns/harness-client';
import { HarnessCredentialMinter } from './turns/harness-credentials';
import { readToEnd, start } from './turns/testdata/harness-calls';

/*
 * The harness CA rotated without restarting the control plane, against real harness
 * servers over TLS. The bundle is mounted as the kubelet mounts a Secret (a `..data` link
 * renamed over the old one); the connector the control plane builds (operator/main.ts)
 * is never rebuilt. A harness presents its certificate at each handshake, so the proof that
 * the new bundle is used is a harness whose certificate only the new CA signed.
 */

jest.setTimeout(60_000);

const { privateKey } = generateKeyPairSync('ed25519');
const keyPem = privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
const approvals = ApprovalSigner.fromPem(keyPem);
const logged: string[] = [];
const logger = pino({ level: 'warn' }, { write: (line: string) => void logged.push(line) });

let dir: string;
let newCa: DevCertificateAuthority;
/** A harness certificate of team-a that only the new CA signed. */
let newCaHarness: CertFiles;
const harnesses: ScriptedHarness[] = [];
const cleanups: (() => void)[] = [];

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'polychrome-harness-ca-reload-'));
  newCa = await DevCertificateAuthority.create(
    join(dir, 'ca'),
    'new-ca',
    'Polychrome harness CA 2',
  );
  newCaHarness = await newCa.issue({
    name: 'harness',
    commonName: harnessServerName('team-a'),
    dnsNames: [harnessServerName('team-a')],
    usage: CertUsage.Server,
  });
});

afterEach(async () => {
  for (const cleanup of cleanups.splice(0)) cleanup();
  await Promise.all(harnesses.splice(0).map((h) => h.close()));
});

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** A harness of team-a serving `files`, or the run's certificate from the current CA. */
async function harness(files?: CertFiles): Promise<ScriptedHarness> {
  const started = await startScriptedHarness({
    replies: [{ text: 'hello from the harness' }],
    approvalPublicKey: approvals.publicKey,
    logger: pino({ level: 'silent' }),
    namespace: 'team-a',
    ...(files === undefined
      ? {}
      : { certificate: await harnessCertificateFrom(files, 'team-a', logger) }),
  });
  harnesses.push(started);
  return started;
}

/** The bundle mounted as a Secret volume holding `caPem`, checked until the test ends. */
async function mounted(
  caPem: string,
  registry: Registry,
): Promise<{ volume: SecretVolume; bundle: CaBundleFile; connector: HarnessConnector }> {
  const volume = new SecretVolume(await mkdtemp(join(dir, 'volume-')));
  await volume.update({ 'ca.crt': caPem });
  const bundle = await loadHarnessCa(
    { caPath: volume.path('ca.crt'), intervalMs: 60_000 },
    logger,
    registry,
  );
  bundle.start();
  const connector = new HarnessConnector({
    harnessCa: bundle,
    credentials: HarnessCredentialMinter.fromPem(keyPem),
  });
  cleanups.push(
    () => bundle.stop(),
    () => connector.close(),
  );
  return { volume, bundle, connector };
}

/** What running one turn on `h` gives: its outcome (`complete`), or the error's code. */
async function turnOn(connector: HarnessConnector, h: ScriptedHarness): Promise<string> {
  try {
    const end = await readToEnd(
      connector.openTurn(h.endpoint, start('c-1', `t-${String(Date.now())}`), {
        namespace: 'team-a',
      }),
    );
    return end.kind === 'result' ? (end.result.outcome?.$case ?? 'no outcome') : end.kind;
  } catch (error: unknown) {
    if (isAppError(error)) return error.code;
    throw error;
  }
}

const reloads = (registry: Registry, outcome: 'reloaded' | 'refused'): Promise<number> =>
  controlPlaneTlsReloads(registry, 'harness-ca', outcome);

/** Polls until the counter of `outcome` reaches `count` (every 50 ms, for 20 s). */
const counted = (
  registry: Registry,
  outcome: 'reloaded' | 'refused',
  count: number,
): Promise<true> =>
  pollUntil(
    `${outcome} ${String(count)}`,
    async () => ((await reloads(registry, outcome)) === count ? true : undefined),
    { timeoutMs: 20_000, intervalMs: 50 },
  );

describe('the harness CA bundle, rotated while the control plane runs', () => {
  it('connects to a harness of the new CA after the swap, not before, and no longer to the dropped CA', async () => {
    const registry = new Registry();
    const { volume, connector } = await mounted((await testHarnessCa()).toString(), registry);
    const rotated = await harness(newCaHarness);
    const current = await harness();

    // Before the swap: the new CA's harness is refused, the current CA's accepted.
    expect(await turnOn(connector, rotated)).toBe('unavailable');
    expect(rotated.model.callCount).toBe(0);
    expect(await turnOn(connector, current)).toBe('complete');

    await volume.update({ 'ca.crt': await readFile(newCa.certPath, 'utf8') });
    await counted(registry, 'reloaded', 1);

    // The same connector, its channel to that harness refused once: its next handshake
    // checks against the new bundle (the channel may wait out its reconnect backoff).
    await pollUntil(
      'the new CA harness accepted',
      async () => ((await turnOn(connector, rotated)) === 'unavailable' ? undefined : true),
      { timeoutMs: 30_000, intervalMs: 200 },
    );
    expect(rotated.model.callCount).toBe(1);
    // A harness whose certificate only the dropped CA signed is refused at a new handshake.
    const dropped = await harness();
    expect(await turnOn(connector, dropped)).toBe('unavailable');
    expect(dropped.model.callCount).toBe(0);
    expect(await reloads(registry, 'refused')).toBe(0);
  });

  it('refuses a bundle with no CA certificate, or none readable, counts it, and keeps the one in use', async () => {
    const registry = new Registry();
    const { volume, bundle, connector } = await mounted(
      await readFile(newCa.certPath, 'utf8'),
      registry,
    );
    const inUse = bundle.bundle;
    logged.length = 0;

    // A harness's own certificate is no CA: a bundle of it would make every harness refused.
    await volume.update({ 'ca.crt': await readFile(newCaHarness.certPath, 'utf8') });
    await counted(registry, 'refused', 1);
    await volume.update({ 'ca.crt': 'not a certificate\n' });
    await counted(registry, 'refused', 2);
    // A new version without ca.crt: the mounted link names a file that is not there.
    await volume.update({ 'tls.crt': 'other' });
    await counted(registry, 'refused', 3);

    expect(bundle.bundle).toBe(inUse);
    expect(await reloads(registry, 'reloaded')).toBe(0);
    const warnings = logged.join('');
    expect(warnings).toContain('which is not a CA certificate');
    expect(warnings).toContain('the CA bundle holds no PEM certificate');
    expect(warnings).toContain('the harness CA bundle: the files are not readable');
    // The bundle in use keeps working: a new handshake to a harness of its CA.
    expect(await turnOn(connector, await harness(newCaHarness))).toBe('complete');
  });

  it("reports the bundle's expiry, its last CA's, and moves it at each reload, not at a refused one", async () => {
    const registry = new Registry();
    const shortCa = await DevCertificateAuthority.create(
      join(dir, 'short-ca'),
      'short-ca',
      'Polychrome harness CA short',
      20,
    );
    const short = await readFile(shortCa.certPath, 'utf8');
    const long = await readFile(newCa.certPath, 'utf8');
    const notAfter = (pem: string): number =>
      Math.floor(Date.parse(new X509Certificate(pem).validTo) / 1000);
    const expiry = (): Promise<number> => controlPlaneTlsExpiry(registry, 'harness-ca');
    expect(notAfter(long) - notAfter(short)).toBeGreaterThan(3000 * 86_400);

    const { volume } = await mounted(short, registry);
    expect(await expiry()).toBe(notAfter(short));
    // A rotation's bundle, the old CA and the new: it verifies until the later one expires.
    await volume.update({ 'ca.crt': `${short}${long}` });
    await counted(registry, 'reloaded', 1);
    expect(await expiry()).toBe(notAfter(long));
    // Back to the short-lived CA alone: the gauge comes down with it.
    await volume.update({ 'ca.crt': short });
    await counted(registry, 'reloaded', 2);
    expect(await expiry()).toBe(notAfter(short));
    // A refused bundle (a harness's certificate is no CA) changes nothing in use, nor the gauge.
    await volume.update({ 'ca.crt': await readFile(newCaHarness.certPath, 'utf8') });
    await counted(registry, 'refused', 1);
    expect(await expiry()).toBe(notAfter(short));
  });

  it('refuses to start on a bundle that is no CA, naming the file and what to do', async () => {
    const at = join(dir, 'leaf');
    await mkdir(at);
    await expect(
      loadHarnessCa({ caPath: newCaHarness.certPath, intervalMs: 60_000 }, logger, new Registry()),
    ).rejects.toThrow(
      /the harness CA bundle .*harness\.crt is not usable \(the CA bundle holds .*CN=polychrome-harness\.team-a.*, which is not a CA certificate\); .*fix POLYCHROME_HARNESS_CA_FILE/,
    );
    await expect(
      loadHarnessCa(
        { caPath: join(at, 'missing.crt'), intervalMs: 60_000 },
        logger,
        new Registry(),
      ),
    ).rejects.toThrow(/the harness CA bundle .*missing\.crt cannot be read \(.*ENOENT.*\); /);
  });
});
