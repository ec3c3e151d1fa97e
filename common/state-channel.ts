import { readFile } from 'node:fs/promises';

import {
  credentials,
  type ChannelCredentials,
  type Client,
  type ClientOptions,
} from '@grpc/grpc-js';

import { AppError } from './errors';
import { reloadingChannelCredentials } from './reloading-channel-credentials';
import { ServingCertificate } from './serving-certificate';
import { StateCallError } from './state-call-errors';

/*
 * How every client of the state plane's services dials it: mutual TLS with a client
 * identity read from PEM files, the same channel options, and one wait for the handshake.
 */

/** PEM bytes for mutual TLS. */
export interface StateClientTls {
  /** The Polychrome CA, which signed the state plane's server certificate. */
  readonly ca: Uint8Array;
  /** This client's certificate chain (its subject is its identity). */
  readonly cert: Uint8Array;
  readonly key: Uint8Array;
}

/** Options of {@link StateClient}. */
export interface StateClientOptions {
  /** `host:port` of the state plane, e.g. `polychrome-state.polychrome-system.svc:7443`. */
  readonly address: string;
  /**
   * The client identity: PEM bytes fixed for the client's life, or a certificate read again
   * while the process runs, whose pair and CA bundle each new connection takes
   * (common/reloading-channel-credentials.ts; the certificate must carry a CA bundle).
   */
  readonly tls: StateClientTls | ServingCertificate;
  /**
   * The name to check the server certificate against, when it differs from the host in
   * `address` (e.g. connecting through a port-forward).
   */
  readonly serverName?: string;
  /**
   * Deadline of each unary call.
   * @default 30000
   */
  readonly callTimeoutMs?: number;
}

/** Deadline of a unary call when the client options give none. */
export const DEFAULT_CALL_TIMEOUT_MS = 30_000;

/**
 * The channel credentials (mutual TLS) and options of a state-plane client; shared by
 * every client of the state plane's services so they dial it the same way.
 */
export function stateChannel(options: Pick<StateClientOptions, 'tls' | 'serverName'>): {
  credentials: ChannelCredentials;
  options: Partial<ClientOptions>;
} {
  const { tls } = options;
  return {
    credentials:
      tls instanceof ServingCertificate
        ? reloadingChannelCredentials(tls)
        : credentials.createSsl(Buffer.from(tls.ca), Buffer.from(tls.key), Buffer.from(tls.cert)),
    options:
      options.serverName === undefined
        ? {}
        : {
            'grpc.ssl_target_name_override': options.serverName,
            'grpc.default_authority': options.serverName,
          },
  };
}

/**
 * Waits until `client`'s channel is connected (TLS handshake done).
 *
 * @throws StateCallError `unavailable` when it is not connected within `timeoutMs`.
 */
export function waitForStateChannel(
  client: Pick<Client, 'waitForReady'>,
  address: string,
  timeoutMs: number,
): Promise<void> {
  return new Promise((resolve, reject) => {
    client.waitForReady(Date.now() + timeoutMs, (error) => {
      if (error === undefined) {
        resolve();
        return;
      }
      reject(
        new StateCallError(
          'unavailable',
          `state plane at ${address} is not reachable within ${String(timeoutMs)} ms ` +
            `(${error.message}); check the address, that it runs, and the certificates`,
          { method: 'connect', grpcStatus: 14, fromServer: false, cause: error },
        ),
      );
    });
  });
}

/**
 * Loads the three PEM files of a client identity.
 *
 * @throws AppError `not_found` naming the missing file and the flag or variable to set.
 */
export async function loadStateClientTls(paths: {
  readonly ca: string;
  readonly cert: string;
  readonly key: string;
}): Promise<StateClientTls> {
  const load = async (path: string, what: string): Promise<Uint8Array> => {
    try {
      return await readFile(path);
    } catch (cause) {
      throw new AppError(
        'not_found',
        `cannot read the ${what} file ${path}; point the client at an existing PEM file`,
        { details: { file: path }, cause },
      );
    }
  };
  // Read together, but report the first missing file in this order, whichever read
  // failed first: the same error for the same input.
  const [ca, cert, key] = await Promise.allSettled([
    load(paths.ca, 'CA certificate'),
    load(paths.cert, 'client certificate'),
    load(paths.key, 'client key'),
  ]);
  for (const read of [ca, cert, key]) if (read.status === 'rejected') throw read.reason;
  if (ca.status !== 'fulfilled' || cert.status !== 'fulfilled' || key.status !== 'fulfilled') {
    throw new Error('unreachable: every rejected read was thrown above');
  }
  return { ca: ca.value, cert: cert.value, key: key.value };
}
