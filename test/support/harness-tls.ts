/**
 * Harness certificates for tests that run a harness in-process (scripted-harness.ts,
 * real-turns.ts, harness-server.test.ts): one harness CA for the whole jest run, made by the
 * unit project's global setup, and a serving certificate per namespace, issued on first use
 * by each worker into a directory of its own. They have the shape make dev and a cluster's
 * issuer give them (hack/lib/harness-pki.ts), so the listener and the connector run exactly
 * as deployed: TLS only, the namespace's name checked.
 */
import { credentials, type ChannelCredentials, type ServerCredentials } from '@grpc/grpc-js';
import { mkdtempSync, rmSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Logger } from 'pino';

import { harnessServerName } from '../../common/harness-identity';
import type { ServingCertificate } from '../../common/serving-certificate';
import {
  harnessServerCredentials,
  loadHarnessCertificate,
} from '../../harness/server/serving-credentials';
import { ensureHarnessCa } from '../../hack/lib/harness-pki';
import { CertUsage, type CertFiles, type DevCertificateAuthority } from '../../hack/lib/pki';

/** Where the global setup's harness CA is, for the test workers. */
const PKI_ENV = 'POLYCHROME_TEST_HARNESS_PKI';

/** Jest global setup: the run's harness CA, in a directory the teardown removes. */
export async function setUpTestHarnessPki(): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), 'polychrome-test-harness-pki-'));
  await ensureHarnessCa(dir);
  process.env[PKI_ENV] = dir;
}

/** Jest global teardown. */
export async function tearDownTestHarnessPki(): Promise<void> {
  const dir = process.env[PKI_ENV];
  if (dir !== undefined) await rm(dir, { recursive: true, force: true });
}

/** The run's harness CA: the global setup's, or (outside jest: a bench) one of this process. */
async function harnessCa(): Promise<DevCertificateAuthority> {
  const dir = process.env[PKI_ENV];
  if (dir !== undefined) return ensureHarnessCa(dir);
  const own = mkdtempSync(join(tmpdir(), 'polychrome-harness-pki-'));
  process.once('exit', () => rmSync(own, { recursive: true, force: true }));
  process.env[PKI_ENV] = own;
  return ensureHarnessCa(own);
}

let ca: Promise<DevCertificateAuthority> | undefined;
const issued = new Map<string, Promise<CertFiles>>();

/** The serving certificate files of `namespace`'s harness, issued once per worker. */
export function testHarnessCertificateFiles(namespace: string): Promise<CertFiles> {
  let files = issued.get(namespace);
  if (files === undefined) {
    ca ??= harnessCa();
    files = ca.then((authority) =>
      authority.issue(
        {
          name: `harness-${namespace}`,
          commonName: harnessServerName(namespace),
          dnsNames: [harnessServerName(namespace)],
          usage: CertUsage.Server,
        },
        join(authority.dir, `worker-${String(process.pid)}`),
      ),
    );
    issued.set(namespace, files);
  }
  return files;
}

/** The certificate a harness of `namespace` serves, loaded as harness/main.ts loads it. */
export async function testHarnessCertificate(
  namespace: string,
  logger: Logger,
): Promise<ServingCertificate> {
  return harnessCertificateFrom(await testHarnessCertificateFiles(namespace), namespace, logger);
}

/** A harness certificate of `namespace` from any files: an impostor's, of another CA. */
export function harnessCertificateFrom(
  files: CertFiles,
  namespace: string,
  logger: Logger,
): Promise<ServingCertificate> {
  return loadHarnessCertificate({ ...files, namespace, logger });
}

/**
 * What a hand-written harness peer listens with: the run's certificate of `namespace`, as
 * harness/server's listener presents it (a compromised harness holds a genuine one).
 */
export async function testHarnessServerCredentials(
  namespace: string,
  logger: Logger,
): Promise<ServerCredentials> {
  return harnessServerCredentials(await testHarnessCertificate(namespace, logger));
}

/** The harness CA's certificate (PEM), as the control plane's `POLYCHROME_HARNESS_CA_FILE`. */
export async function testHarnessCa(): Promise<Buffer> {
  ca ??= harnessCa();
  return readFile((await ca).certPath);
}

/**
 * A raw client's channel to a harness of `namespace`: TLS with the harness CA, checking the
 * namespace's name, as the control plane's connector dials it.
 */
export async function testHarnessChannel(namespace: string): Promise<{
  credentials: ChannelCredentials;
  options: Record<string, string>;
}> {
  const name = harnessServerName(namespace);
  return {
    credentials: credentials.createSsl(await testHarnessCa()),
    options: { 'grpc.ssl_target_name_override': name, 'grpc.default_authority': name },
  };
}
