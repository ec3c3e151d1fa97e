import { X509Certificate } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';

import { harnessCertificateProblem, harnessServerName } from '../../common/harness-identity';
import { CertUsage, DevCertificateAuthority, exists, type CertFiles } from './pki';

/**
 * Development harness certificates (docs/operator.md, "The harness door"): a harness CA,
 * kept apart from the state plane's CA so a harness certificate is never a client identity
 * there, and one serving certificate per conversation namespace, for
 * `polychrome-harness.<namespace>`. `make dev`, the end-to-end test stack and the tests that
 * run a harness in-process all issue them here, so each has the shape a cluster's issuer
 * gives it.
 */

/** File stem of the harness CA inside its directory. */
const HARNESS_CA_NAME = 'harness-ca';

/** The Secret of a conversation namespace that holds its harness certificate (`tls.crt`, `tls.key`). */
export const HARNESS_TLS_SECRET = 'polychrome-harness-tls';

/** The harness CA in `dir`, created when it is missing. */
export async function ensureHarnessCa(dir: string): Promise<DevCertificateAuthority> {
  const ca = DevCertificateAuthority.open(dir, HARNESS_CA_NAME);
  if ((await exists(ca.certPath)) && (await exists(ca.keyPath))) return ca;
  return DevCertificateAuthority.create(dir, HARNESS_CA_NAME, 'Polychrome dev harness CA');
}

/**
 * The serving certificate of `namespace`'s harnesses, signed by `ca`: the one already in
 * `ca`'s directory when it names the namespace and `ca` signed it, else a new one.
 */
export async function ensureHarnessCertificate(
  ca: DevCertificateAuthority,
  namespace: string,
): Promise<CertFiles> {
  const name = `harness-${namespace}`;
  const files = { certPath: join(ca.dir, `${name}.crt`), keyPath: join(ca.dir, `${name}.key`) };
  if ((await exists(files.certPath)) && (await exists(files.keyPath))) {
    const pem = await readFile(files.certPath, 'utf8');
    const issuer = new X509Certificate(await readFile(ca.certPath));
    if (
      harnessCertificateProblem(pem, namespace) === undefined &&
      new X509Certificate(pem).verify(issuer.publicKey)
    ) {
      return files;
    }
  }
  return ca.issue({
    name,
    commonName: harnessServerName(namespace),
    dnsNames: [harnessServerName(namespace)],
    usage: CertUsage.Server,
  });
}
