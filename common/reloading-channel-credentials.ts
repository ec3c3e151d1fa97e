import { experimental, type ChannelCredentials } from '@grpc/grpc-js';

import type { CaBundleFile } from './ca-bundle-file';
import type { ReloadingFiles } from './reloading-files';
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
  const provider = new ReloadingProvider(certificate, (pair) => pair.ca ?? '', identityUpdate);
  return experimental.createCertificateProviderChannelCredentials(provider, provider);
}

/**
 * TLS channel credentials with no client certificate that check the server against a CA
 * bundle read again while the process runs: the control plane's harness CA
 * (operator/turns/harness-client.ts). As above, one channel stays: each new connection
 * checks the server against the bundle in use at its handshake, and connections already
 * open and calls in flight are not cut. A fixed bundle (a Buffer) never changes.
 */
export function reloadingCaChannelCredentials(ca: CaBundleFile | Buffer): ChannelCredentials {
  const source: Reloading<string> = Buffer.isBuffer(ca)
    ? { value: ca.toString('utf8'), onChange: () => undefined }
    : ca;
  return experimental.createCertificateProviderChannelCredentials(
    new ReloadingProvider(source, (bundle) => bundle),
    null,
  );
}

type CaListener = experimental.CaCertificateUpdateListener;
type IdentityListener = experimental.IdentityCertificateUpdateListener;

/** What the provider follows: a value in use and its changes (common/reloading-files.ts). */
type Reloading<T> = Pick<ReloadingFiles<T>, 'value' | 'onChange'>;

/**
 * grpc-js's certificate provider interface over files read again: their CA bundle and, when
 * `identityOf` is given, the client certificate and key.
 */
class ReloadingProvider<T> implements experimental.CertificateProvider {
  private readonly caListeners = new Set<CaListener>();
  private readonly identityListeners = new Set<IdentityListener>();

  constructor(
    private readonly files: Reloading<T>,
    private readonly caOf: (value: T) => string,
    private readonly identityOf?: (value: T) => experimental.IdentityCertificateUpdate,
  ) {
    files.onChange((value) => {
      // Both updates land before any handshake can run (no await between them), so no
      // connection mixes the new CA with the old pair.
      for (const listener of this.caListeners) listener(this.caUpdate(value));
      for (const listener of this.identityListeners) listener(this.identityUpdate(value));
    });
  }

  addCaCertificateListener(listener: CaListener): void {
    this.caListeners.add(listener);
    // grpc-js keeps the latest value of each; it needs both before its first handshake.
    listener(this.caUpdate(this.files.value));
  }

  removeCaCertificateListener(listener: CaListener): void {
    this.caListeners.delete(listener);
  }

  addIdentityCertificateListener(listener: IdentityListener): void {
    this.identityListeners.add(listener);
    listener(this.identityUpdate(this.files.value));
  }

  removeIdentityCertificateListener(listener: IdentityListener): void {
    this.identityListeners.delete(listener);
  }

  private caUpdate(value: T): experimental.CaCertificateUpdate {
    return { caCertificate: Buffer.from(this.caOf(value)) };
  }

  private identityUpdate(value: T): experimental.IdentityCertificateUpdate | null {
    return this.identityOf?.(value) ?? null;
  }
}

function identityUpdate(pair: CertificatePair): experimental.IdentityCertificateUpdate {
  return { certificate: Buffer.from(pair.cert), privateKey: Buffer.from(pair.key) };
}
