import { Server, ServerCredentials } from '@grpc/grpc-js';
import { setMaxListeners } from 'node:events';
import {
  createServer as createTlsServer,
  type SecureContextOptions,
  type Server as TlsServer,
  type TLSSocket,
} from 'node:tls';
import type { Logger } from 'pino';

import { AppError } from '../../common/errors';
import { componentLogger, LogComponent } from '../../common/log';
import { BackupService } from '../../proto/gen/polychrome/state/v1/backup';
import { RecordsService } from '../../proto/gen/polychrome/state/v1/records';
import { JournalService } from '../../proto/gen/polychrome/state/v1/state';
import type { SignatureCheck } from '../journal/verification-types';
import type { RecordStore } from '../records/record-store';
import type { JournalStore } from '../store/journal-store';
import { createBackupService, type SnapshotEntries } from './backup-service';
import { createJournalService, type HeldPublicKey } from './journal-service';
import { createRecordsService } from './records-service';
import type { StateMetrics } from './state-metrics';

/** The state plane's gRPC port. */
export const DEFAULT_STATE_PORT = 7443;

/**
 * Largest request the server accepts. Above the store's batch limit (8 MiB of payload by
 * default) so an oversized append reaches the store and gets its precise
 * `invalid_argument` message instead of a bare RESOURCE_EXHAUSTED from the transport.
 */
const MAX_RECEIVE_BYTES = 16 * 1024 * 1024;

/** PEM bytes of the server's mutual TLS setup. */
export interface StateServerTls {
  /** The Polychrome CA: only client certificates it signed complete the handshake. */
  readonly ca: Uint8Array;
  readonly cert: Uint8Array;
  readonly key: Uint8Array;
}

/** Options of {@link StateServer}. */
export interface StateServerOptions {
  readonly store: JournalStore;
  /**
   * The records (opened by the caller). When given, the Records service is served on the
   * same listener, under the same certificate rules; without it only Journal is.
   */
  readonly records?: RecordStore;
  /**
   * The records database's raw entries (`RecordsDatabase.backupEntries`). When given, the
   * Backup service is served (journal and records together); without it, it is not.
   */
  readonly backupRecords?: SnapshotEntries;
  readonly tls: StateServerTls;
  readonly logger: Logger;
  /** @default '0.0.0.0' */
  readonly host?: string;
  /** 0 lets the system pick (tests). @default 7443 */
  readonly port?: number;
  readonly metrics?: StateMetrics;
  /** See {@link JournalServiceOptions.publicKeys}. */
  readonly publicKeys: readonly HeldPublicKey[];
  readonly checkSignatures?: (checks: readonly SignatureCheck[]) => Promise<readonly boolean[]>;
  /** See {@link JournalServiceOptions.faultAppendDelay}. */
  readonly faultAppendDelay?: { readonly kind: string; readonly ms: number };
}

/** The listener's secure context: the same at start and at each {@link StateServer.useTls}. */
function secureContextOf(tls: StateServerTls): SecureContextOptions {
  return {
    ca: Buffer.from(tls.ca),
    cert: Buffer.from(tls.cert),
    key: Buffer.from(tls.key),
    minVersion: 'TLSv1.2',
  };
}

/**
 * Makes `socket.getPeerCertificate()` answer from the certificate read once at the end of
 * the handshake. grpc-js asks for it on every call (`getAuthContext`), and node:tls builds
 * it anew each time: parsing the certificate and hashing its fingerprints cost about as
 * much as the rest of a Head call. The certificate of a TLS connection cannot change, so
 * the copy is exact; the detailed form (with the issuer chain) is still built on request.
 */
function pinPeerCertificate(socket: TLSSocket): void {
  const read = socket.getPeerCertificate.bind(socket);
  const certificate = read(false);
  socket.getPeerCertificate = ((detailed?: boolean) =>
    detailed === true ? read(true) : certificate) as TLSSocket['getPeerCertificate'];
}

/**
 * The Journal service (and the Records service, when given records) on a
 * mutual-TLS-only gRPC listener. There is no plaintext port and no way to call without a
 * client certificate: the listener is a node:tls server that requires one and checks it
 * against the Polychrome CA (`requestCert`, `rejectUnauthorized`), so a client without a
 * certificate, or with one the CA did not sign, fails the TLS handshake before any call
 * exists. Each connection that completes the handshake is handed to grpc-js (a connection
 * injector), with its peer certificate read once ({@link pinPeerCertificate}).
 */
export class StateServer {
  private readonly server: Server;
  private listener: TlsServer | undefined;
  private readonly log: Logger;
  /** Appends and record changes in flight: shutdown waits for them to be durable. */
  private readonly appends = new Set<Promise<unknown>>();
  /** Aborted on close, once no new call is taken: follow reads end with UNAVAILABLE. */
  private readonly shutdown = new AbortController();
  private port: number | undefined;
  private stopping: Promise<void> | undefined;
  private tls: StateServerTls;

  constructor(private readonly options: StateServerOptions) {
    this.tls = options.tls;
    // Every open stream listens to it (follow reads are long-lived): no listener limit.
    setMaxListeners(0, this.shutdown.signal);
    this.log = componentLogger(options.logger, LogComponent.Grpc);
    this.server = new Server({ 'grpc.max_receive_message_length': MAX_RECEIVE_BYTES });
    this.server.addService(
      JournalService,
      createJournalService({
        store: options.store,
        log: this.log,
        publicKeys: options.publicKeys,
        ...(options.metrics === undefined ? {} : { metrics: options.metrics }),
        ...(options.checkSignatures === undefined
          ? {}
          : { checkSignatures: options.checkSignatures }),
        trackAppend: (work) => this.track(work),
        shutdown: this.shutdown.signal,
        ...(options.faultAppendDelay === undefined
          ? {}
          : { faultAppendDelay: options.faultAppendDelay }),
      }),
    );
    if (options.records !== undefined) {
      this.server.addService(
        RecordsService,
        createRecordsService({
          records: options.records,
          log: this.log,
          ...(options.metrics === undefined ? {} : { metrics: options.metrics }),
          trackWrite: (work) => this.track(work),
        }),
      );
    }
    if (options.backupRecords !== undefined) this.addBackup(options, options.backupRecords);
  }

  private addBackup(options: StateServerOptions, records: SnapshotEntries): void {
    this.server.addService(
      BackupService,
      createBackupService({
        journal: () => options.store.backupEntries(),
        records,
        signingKeyIds: options.publicKeys.map((k) => k.keyId),
        log: this.log,
        ...(options.metrics === undefined ? {} : { metrics: options.metrics }),
      }),
    );
  }

  private track(work: Promise<unknown>): void {
    this.appends.add(work);
    const done = (): void => {
      this.appends.delete(work);
    };
    work.then(done, done);
  }

  /**
   * Binds the listener; resolves with the bound port.
   *
   * @throws Error from node:tls when the TLS material is unusable or the address cannot be
   *   bound; Error when called twice.
   */
  async start(): Promise<number> {
    if (this.port !== undefined || this.stopping !== undefined) {
      throw new Error('state server: start() called twice');
    }
    const host = this.options.host ?? '0.0.0.0';
    const address = `${host.includes(':') ? `[${host}]` : host}:${String(this.options.port ?? DEFAULT_STATE_PORT)}`;
    // TLS is done here; grpc-js gets the decrypted connection, so its side is "insecure".
    const injector = this.server.createConnectionInjector(ServerCredentials.createInsecure());
    const listener = createTlsServer({
      ...secureContextOf(this.tls),
      requestCert: true,
      rejectUnauthorized: true,
      ALPNProtocols: ['h2'],
    });
    listener.on('secureConnection', (socket: TLSSocket) => {
      // A connection reset must not be an unhandled 'error' (it would end the process);
      // the HTTP/2 session on the socket sees the close and fails its calls.
      socket.on('error', (error: Error & { code?: string }) => {
        this.log.debug({ code: error.code, message: error.message }, 'client connection failed');
      });
      pinPeerCertificate(socket);
      injector.injectConnection(socket);
    });
    listener.on('tlsClientError', (error: Error & { code?: string }) => {
      // A refused handshake (no certificate, a foreign CA) ends here; the client sees it.
      this.log.debug({ code: error.code, message: error.message }, 'TLS handshake refused');
    });
    await new Promise<void>((resolve, reject) => {
      listener.once('error', reject);
      listener.listen(this.options.port ?? DEFAULT_STATE_PORT, host, () => {
        listener.off('error', reject);
        resolve();
      });
    });
    listener.on('error', (error) => this.log.error({ err: error }, 'state listener failed'));
    const bound = listener.address();
    if (bound === null || typeof bound === 'string') {
      throw new Error(`unreachable: a TCP listener on ${address} has a port`);
    }
    this.listener = listener;
    this.port = bound.port;
    this.log.info({ address, port: this.port }, 'state server listening (mutual TLS)');
    return this.port;
  }

  /**
   * Presents `tls` from the next handshake on: the server certificate and key, and the CA
   * bundle client certificates must chain to (a renewal, or a CA rotation with both CAs in
   * the bundle). Connections already open keep the certificate they were made with.
   *
   * @throws Error from node:tls when the material does not load (the old one stays).
   */
  useTls(tls: StateServerTls): void {
    this.listener?.setSecureContext(secureContextOf(tls));
    this.tls = tls;
  }

  /** True while bound and not shutting down: part of the readiness signal. */
  isServing(): boolean {
    return this.port !== undefined && this.stopping === undefined;
  }

  /**
   * Graceful stop (SIGTERM): stop accepting calls, end follow reads with UNAVAILABLE (they
   * have no end of their own; the message tells the client to reconnect and resume from
   * the position after the last event it received), wait for appends in
   * flight to become durable (they hold the caller's only acknowledgement), then let
   * other calls finish for up to `graceMs` before cutting them. The store is closed by
   * the caller after this resolves. Idempotent.
   */
  close(graceMs = 10_000): Promise<void> {
    this.stopping ??= this.stop(graceMs);
    return this.stopping;
  }

  private async stop(graceMs: number): Promise<void> {
    const pending = this.appends.size;
    if (pending > 0) this.log.info({ writes: pending }, 'waiting for writes in flight');
    // No new connection; the open ones end once their calls have (tryShutdown).
    this.listener?.close();
    const graceful = new Promise<void>((resolve) => this.server.tryShutdown(() => resolve()));
    this.shutdown.abort(
      new AppError(
        'unavailable',
        'the state plane is shutting down; reconnect and read on from the position after the ' +
          'last event received',
      ),
    );
    await Promise.allSettled([...this.appends]);
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<'timeout'>((resolve) => {
      timer = setTimeout(() => resolve('timeout'), graceMs);
    });
    const outcome = await Promise.race([graceful.then((): 'done' => 'done'), timedOut]);
    clearTimeout(timer);
    if (outcome === 'timeout') {
      this.log.warn({ graceMs }, 'calls still open after the grace period; cutting them');
      this.server.forceShutdown();
    }
    this.log.info('state server stopped');
  }
}
