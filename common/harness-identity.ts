/**
 * Who a harness is on the wire (docs/operator.md, "The harness door"). A harness serves TLS
 * only, with a certificate of its namespace: its DNS name is `polychrome-harness.<namespace>`,
 * and it is signed by the harness CA the control plane trusts. The control plane dials a
 * conversation's harness for that name, so a harness of another namespace, or anything
 * listening on a reused pod address, fails the handshake before a credential is sent.
 * Editors of a namespace can read its harness certificate, as they can exec into its pods:
 * namespaces are the boundary, not the people inside one.
 */
import { X509Certificate } from 'node:crypto';

/** The DNS name a harness of `namespace` presents. */
export function harnessServerName(namespace: string): string {
  return `polychrome-harness.${namespace}`;
}

/**
 * Why `certificatePem` is not a serving certificate for a harness of `namespace`, or
 * undefined when it is: it must name {@link harnessServerName} and allow server auth.
 */
export function harnessCertificateProblem(
  certificatePem: string,
  namespace: string,
): string | undefined {
  let certificate: X509Certificate;
  try {
    certificate = new X509Certificate(certificatePem);
  } catch (error: unknown) {
    return `not a PEM certificate (${error instanceof Error ? error.message : String(error)})`;
  }
  const name = harnessServerName(namespace);
  if (certificate.checkHost(name, { subject: 'never' }) === undefined) {
    return `it names ${certificate.subjectAltName ?? 'no subject alternative name'}, not DNS:${name}; issue the harness certificate of namespace ${namespace} for that name`;
  }
  const usages = certificate.keyUsage;
  if (usages !== undefined && !usages.includes(SERVER_AUTH)) {
    return `its extended key usage (${usages.join(', ')}) does not allow server auth`;
  }
  return undefined;
}

/** The serverAuth extended key usage. */
const SERVER_AUTH = '1.3.6.1.5.5.7.3.1';
