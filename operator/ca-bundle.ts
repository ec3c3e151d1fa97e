import { X509Certificate } from 'node:crypto';
import { ConfigError } from '../common/config';

/**
 * A trust anchor file's content, checked: a PEM bundle whose first certificate is a CA.
 *
 * @throws ConfigError naming `variable` when it holds no certificate, or one that is not a CA.
 */
export function caBundle(pem: string, variable: string): Buffer {
  let certificate: X509Certificate;
  try {
    certificate = new X509Certificate(pem);
  } catch (error) {
    throw new ConfigError('control plane', [
      {
        variable,
        message: `names a file that holds no PEM certificate (${(error as Error).message})`,
      },
    ]);
  }
  if (!certificate.ca) {
    throw new ConfigError('control plane', [
      {
        variable,
        message: `names ${certificate.subject.replace(/\n/g, ', ')}, which is not a CA certificate; give the CA that signs the harness certificates`,
      },
    ]);
  }
  return Buffer.from(pem);
}
