import { experimental, type ChannelCredentials } from '@grpc/grpc-js';

import type { CertificatePair, ServingCertificate } from './serving-certificate';

/**
 * gRPC channel credentials for mutual TLS whose client certificate, key and CA bundle
 * follow a {@link ServingCertificate} (read again while the process runs): the control
 * plane's state-plane link (docs/operations.md, "Certificate renewal").
 *
 * Why this design: grpc-js fixes `ChannelCredentials` per channel, and its secure-context
 * credentials (`createFromSecureContext`) take one context for the channel's life. Its
 * certificate-provider credentials instead build the TLS context at each handshake from
 * the provider's latest pair. So one channel stays for the process's life: every new
 * connection (the first, and each reconnect after the state plane restarts or the link
 * drops) presents the pair in use at that moment and checks the server against the CA
 * bundle in use; a connection already open keeps the handshake it made, as TLS does (the
 * server checks a client certificate only at the handshake), and no call in flight is cut.
 * The alternative, a new channel per renewal, would have to close the old channel, which
 * cancels calls queued on it while it connects. Only pairs the certificate accepted reach
 * here: it refuses one whose key does not match or whose bundle holds no CA.
 *
 * The caller starts and stops the certificate's checks; this only listens.
 */
export function reloadingChannelCredentials(certificate: ServingCertificate): ChannelCredentials {
  if (certificate.pair.ca === undefined) {
    throw new Error('reloadingChannelCredentials: the certificate was loaded without a CA bundle');
  }
  const provider = new PairProvider(certificate);
  return experimental.createCertificateProviderChannelCredentials(provider, provider);
}

type CaListener = experimental.CaCertificateUpdateListener;
type IdentityListener = experimental.IdentityCertificateUpdateListener;

/** grpc-js's certificate provider interface over a {@link ServingCertificate}'s pair and CA. */
class PairProvider implements experimental.CertificateProvider {
  private readonly caListeners = new Set<CaListener>();
  private readonly identityListeners = new Set<IdentityListener>();

  constructor(private readonly certificate: ServingCertificate) {
    certificate.onChange((pair) => {
      // Both updates land before any handshake can run (no await between them), so no
      // connection mixes the new CA with the old pair.
      for (const listener of this.caListeners) listener(caUpdate(pair));
      for (const listener of this.identityListeners) listener(identityUpdate(pair));
    });
  }

  addCaCertificateListener(listener: CaListener): void {
    this.caListeners.add(listener);
    // grpc-js keeps the latest value of each; it needs both before its first handshake.
    listener(caUpdate(this.certificate.pair));
  }

  removeCaCertificateListener(listener: CaListener): void {
    this.caListeners.delete(listener);
  }

  addIdentityCertificateListener(listener: IdentityListener): void {
    this.identityListeners.add(listener);
    listener(identityUpdate(this.certificate.pair));
  }

  removeIdentityCertificateListener(listener: IdentityListener): void {
    this.identityListeners.delete(listener);
  }
}

function caUpdate(pair: CertificatePair): experimental.CaCertificateUpdate {
  return { caCertificate: Buffer.from(pair.ca ?? '') };
}

function identityUpdate(pair: CertificatePair): experimental.IdentityCertificateUpdate {
  return { certificate: Buffer.from(pair.cert), privateKey: Buffer.from(pair.key) };
}
