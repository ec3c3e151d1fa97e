import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { mkdir, mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';

import { CertUsage, DevCertificateAuthority, type CertFiles } from '../hack/lib/pki';
import { ServingCertificate, type CertificatePair } from '../common/serving-certificate';
import { SecretVolume } from '../test/support/secret-volume';

/*
 * The CA bundle and the directory watch of ServingCertificate (common/), which the state
 * plane's TLS reload uses (state/tls-reload.ts), over files laid out as the
 * kubelet lays out a Secret volume (each file a link through `..data`, an update a new
 * directory and a rename of `..data`). The pair alone and the interval are covered by the
 * Kubernetes door's and the harness's tests.
 */

describe('ServingCertificate with a CA bundle and a directory watch', () => {
  let dir: string;
  let volume: SecretVolume;
  let ca: string;
  let first: { cert: string; key: string };
  let renewed: { cert: string; key: string };
  const logger = pino({ level: 'silent' });

  const pem = async (files: CertFiles): Promise<{ cert: string; key: string }> => ({
    cert: await readFile(files.certPath, 'utf8'),
    key: await readFile(files.keyPath, 'utf8'),
  });

  const options = {
    certPath: '',
    keyPath: '',
    caPath: '',
    logger,
    purpose: 'the test certificate',
    remedy: 'mount it',
  };

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'serving-cert-ca-'));
    volume = new SecretVolume(join(dir, 'secret'));
    await mkdir(volume.dir);
    const authority = await DevCertificateAuthority.create(dir, 'ca', 'bundle-test-ca');
    ca = await readFile(authority.certPath, 'utf8');
    const issue = (name: string): Promise<CertFiles> =>
      authority.issue({ name, commonName: name, dnsNames: ['localhost'], usage: CertUsage.Server });
    first = await pem(await issue('first'));
    renewed = await pem(await issue('renewed'));
    Object.assign(options, {
      certPath: volume.path('tls.crt'),
      keyPath: volume.path('tls.key'),
      caPath: volume.path('ca.crt'),
    });
  });

  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('refuses at load a CA bundle that holds a certificate that is not a CA, naming it', async () => {
    await volume.update({ 'tls.crt': first.cert, 'tls.key': first.key, 'ca.crt': first.cert });
    await expect(ServingCertificate.load(options)).rejects.toThrow(
      /are not usable \(the CA bundle holds CN=first, which is not a CA certificate\); mount it/u,
    );
  });

  it('takes a renewal with its CA bundle on the watch, and refuses a bundle without a CA', async () => {
    await volume.update({ 'tls.crt': first.cert, 'tls.key': first.key, 'ca.crt': ca });
    const serving = await ServingCertificate.load({
      ...options,
      intervalMs: 3_600_000,
      watch: true,
      debounceMs: 50,
    });
    const changes: CertificatePair[] = [];
    const refusals: string[] = [];
    serving.onChange((pair) => changes.push(pair));
    serving.onRefused((reason) => refusals.push(reason));
    serving.start();
    try {
      expect(serving.pair).toEqual({ cert: first.cert, key: first.key, ca });
      await volume.update({
        'tls.crt': renewed.cert,
        'tls.key': renewed.key,
        'ca.crt': `${ca}${ca}`,
      });
      await waitFor(() => changes.length === 1);
      expect(serving.pair).toEqual({ cert: renewed.cert, key: renewed.key, ca: `${ca}${ca}` });

      await volume.update({
        'tls.crt': first.cert,
        'tls.key': first.key,
        'ca.crt': 'not a certificate',
      });
      await waitFor(() => refusals.length >= 1);
      expect(refusals[0]).toBe('the CA bundle holds no PEM certificate');
      expect(serving.pair.cert).toBe(renewed.cert);
      expect(changes).toHaveLength(1);
    } finally {
      serving.stop();
    }
  });
});

/** Waits for `done` (the watch's debounce), failing after 5 s. */
async function waitFor(done: () => boolean): Promise<void> {
  for (let waited = 0; !done(); waited += 20) {
    if (waited > 5_000) throw new Error('the watch did not see the update in 5 s');
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
