import { traceHeaders } from '../../common/tracing';
import type { IncomingMessage } from 'node:http';
import { request as httpsRequest, type RequestOptions } from 'node:https';
import type { PeerCertificate, TLSSocket } from 'node:tls';
import {
  certificateIdentityOf,
  CertificateRole,
  describeCertificateIdentity,
  isControlPlaneReplica,
} from '../../common/certificate-identity';
import { isIdentity } from '../../common/identity';
import type { CertificatePair } from '../../common/serving-certificate';
import type { Caller } from '../turns/turn-service';
import { ApiError } from './api-error';
import type { PeerAddress } from './peer-endpoints';

/*
 * The hop from the replica a client reached to the replica that holds the conversation
 * (docs/api.md, "Between replicas"): HTTPS with mutual TLS on both ends, each side
 * presenting the control plane's certificate. The caller the first replica authenticated
 * travels in the body; the bearer token never does.
 */

/** Names the forwarding replica's request id on the hop (for matching log lines). */
export const FORWARDED_HEADER = 'x-polychrome-forwarded';
/** How long the hop may take to connect and finish the TLS handshake. */
export const DEFAULT_PEER_CONNECT_TIMEOUT_MS = 5_000;
/** Largest answer relayed from a peer. */
export const MAX_PEER_ANSWER_BYTES = 1 << 20;

/** The certificate, key and CA of both ends of the hop: the control plane's own (PEM). */
export interface PeerTls {
  readonly ca: Buffer;
  readonly cert: Buffer;
  readonly key: Buffer;
}

/** The hop's TLS material from the state-plane link's (the same certificate serves both). */
export function peerTlsOf(tls: CertificatePair): PeerTls {
  return { ca: Buffer.from(tls.ca ?? ''), cert: Buffer.from(tls.cert), key: Buffer.from(tls.key) };
}

/** What one replica sends another: who asked, and what they sent (key settled). */
export interface PeerEnvelope {
  readonly caller: Caller;
  readonly body: unknown;
}

const MAX_LIST = 64;
const MAX_FIELD_CHARS = 256;

/**
 * Reads the envelope a peer sent. The peer is a replica (its certificate proved that),
 * so this guards against skew between versions, not against an attacker.
 *
 * @throws ApiError `invalid_argument` naming the field that is wrong.
 */
export function parsePeerEnvelope(value: unknown): PeerEnvelope {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw badField('body', 'must be an object {caller, body}');
  }
  const extra = Object.keys(value).filter((k) => k !== 'caller' && k !== 'body');
  if (extra.length > 0) throw badField(extra.join(', '), 'is not a field of a forwarded request');
  const caller: unknown = Reflect.get(value, 'caller');
  if (typeof caller !== 'object' || caller === null || Array.isArray(caller)) {
    throw badField('caller', 'must be an object');
  }
  const fields = fieldsOf(caller, 'caller');
  const identity = fields.text('identity');
  if (!isIdentity(identity)) throw badField('caller.identity', 'is not an identity');
  const identities = fields.list('identities');
  if (!identities.every(isIdentity)) throw badField('caller.identities', 'holds a non-identity');
  const grant: unknown = Reflect.get(caller, 'kubernetes');
  const body: unknown = Reflect.get(value, 'body');
  if (grant === undefined) {
    return {
      caller: {
        identity,
        identities,
        personaId: fields.text('personaId'),
        roles: fields.list('roles'),
        sessionId: fields.text('sessionId'),
      },
      body,
    };
  }
  // A caller of the Kubernetes door: RBAC allowed one subresource of one conversation;
  // no persona, no session, no roles.
  if (typeof grant !== 'object' || grant === null || Array.isArray(grant)) {
    throw badField(
      'caller.kubernetes',
      'must be an object {conversationId, subresource, verb, groups}',
    );
  }
  if (fields.list('roles').length > 0) {
    throw badField('caller.roles', 'must be empty for a Kubernetes caller');
  }
  const granted = fieldsOf(grant, 'caller.kubernetes');
  return {
    caller: {
      identity,
      identities,
      personaId: '',
      roles: [],
      sessionId: '',
      kubernetes: {
        conversationId: granted.text('conversationId'),
        subresource: granted.text('subresource'),
        verb: granted.text('verb'),
        groups: granted.list('groups'),
      },
    },
    body,
  };
}

function badField(field: string, rule: string): ApiError {
  return new ApiError('invalid_argument', `forwarded request: ${field} ${rule}`, {
    details: { field },
  });
}

/** Readers of an envelope object's bounded text and list fields, named `prefix.name`. */
function fieldsOf(
  object: object,
  prefix: string,
): { text(name: string): string; list(name: string): string[] } {
  return {
    text(name) {
      const v: unknown = Reflect.get(object, name);
      if (typeof v !== 'string' || v === '' || v.length > MAX_FIELD_CHARS) {
        throw badField(`${prefix}.${name}`, `must be a string of 1..${MAX_FIELD_CHARS} characters`);
      }
      return v;
    },
    list(name) {
      const v: unknown = Reflect.get(object, name);
      if (
        !Array.isArray(v) ||
        v.length > MAX_LIST ||
        !v.every((s) => typeof s === 'string' && s !== '' && s.length <= MAX_FIELD_CHARS)
      ) {
        throw badField(
          `${prefix}.${name}`,
          `must be a list of at most ${MAX_LIST} non-empty strings`,
        );
      }
      return v as string[];
    },
  };
}

/**
 * node:tls `checkServerIdentity` for the hop: the server must present a control-plane
 * replica's certificate (role polychrome:control-plane-replica; the chain was already
 * verified against the Polychrome CA). It replaces the
 * host name check: a pod's address is an IP, which the certificate need not name.
 */
export function checkPeerServerIdentity(
  _host: string,
  certificate: PeerCertificate,
): Error | undefined {
  const identity = certificateIdentityOf(certificate);
  if (isControlPlaneReplica(identity)) return undefined;
  return new Error(
    `the peer presented "${identity === undefined ? 'no subject' : describeCertificateIdentity(identity)}", ` +
      `not a control-plane replica's certificate (O or OU ${CertificateRole.ControlPlaneReplica})`,
  );
}

/** A peer's answer, to relay as it is. */
export interface PeerAnswer {
  readonly status: number;
  readonly contentType: string | undefined;
  readonly idempotencyKey: string | undefined;
  readonly text: string;
}

/** What to send on the hop. */
export interface PeerRequest {
  readonly method: string;
  /** The public route's path (the peer serves the same paths). */
  readonly path: string;
  readonly envelope: PeerEnvelope;
  /** The forwarding replica's request id. */
  readonly requestId: string;
}

/** Options of {@link PeerClient}. */
export interface PeerClientOptions {
  readonly tls: PeerTls;
  /** @default {@link DEFAULT_PEER_CONNECT_TIMEOUT_MS} */
  readonly connectTimeoutMs?: number;
}

/**
 * Sends a forwarded request to another replica's peer listener over mutual TLS: the
 * control plane's client certificate, the server checked against the Polychrome CA and
 * the control-plane identity. The request carries the envelope and no Authorization
 * header.
 */
export class PeerClient {
  private tls: PeerTls;
  private readonly connectTimeoutMs: number;

  constructor(options: PeerClientOptions) {
    this.tls = options.tls;
    this.connectTimeoutMs = options.connectTimeoutMs ?? DEFAULT_PEER_CONNECT_TIMEOUT_MS;
  }

  /** Presents `tls` from the next hop on (a renewed certificate); hops under way keep theirs. */
  useTls(tls: PeerTls): void {
    this.tls = tls;
  }

  /**
   * @throws Error when the connection, the handshake or the exchange fails, or `signal`
   *   aborts; the message says which.
   */
  send(address: PeerAddress, request: PeerRequest, signal: AbortSignal): Promise<PeerAnswer> {
    const payload = JSON.stringify(request.envelope);
    return new Promise<PeerAnswer>((resolve, reject) => {
      let settled = false;
      const settle = (): boolean => {
        if (settled) return false;
        settled = true;
        clearTimeout(connectTimer);
        signal.removeEventListener('abort', onAbort);
        return true;
      };
      const fail = (error: Error): void => {
        if (!settle()) return;
        outgoing.destroy();
        reject(error);
      };
      const outgoing = httpsRequest(this.hopOptions(address, request, payload));
      const connectTimer = setTimeout(
        () => fail(new Error(`no TLS connection within ${this.connectTimeoutMs} ms`)),
        this.connectTimeoutMs,
      );
      const onAbort = (): void => fail(new Error('the caller went away'));
      if (signal.aborted) {
        onAbort();
        return;
      }
      signal.addEventListener('abort', onAbort, { once: true });
      outgoing.once('socket', (socket) => {
        (socket as TLSSocket).once('secureConnect', () => clearTimeout(connectTimer));
      });
      outgoing.once('error', (error) => fail(error));
      outgoing.once('response', (incoming) =>
        readAnswer(incoming, fail, (answer) => {
          if (settle()) resolve(answer);
        }),
      );
      outgoing.end(payload);
    });
  }

  /** The hop's request: mutual TLS, a connection of its own, no Authorization header. */
  private hopOptions(address: PeerAddress, request: PeerRequest, payload: string): RequestOptions {
    return {
      host: address.host,
      port: address.port,
      method: request.method,
      path: request.path,
      ca: this.tls.ca,
      cert: this.tls.cert,
      key: this.tls.key,
      checkServerIdentity: checkPeerServerIdentity,
      // A new connection per hop: no socket (and no other caller's state) is shared.
      agent: false,
      headers: {
        'content-type': 'application/json',
        'content-length': Buffer.byteLength(payload),
        [FORWARDED_HEADER]: request.requestId,
        ...traceHeaders(),
      },
    };
  }
}

/** Reads a peer's answer, at most {@link MAX_PEER_ANSWER_BYTES}, then `done` with it. */
function readAnswer(
  incoming: IncomingMessage,
  fail: (error: Error) => void,
  done: (answer: PeerAnswer) => void,
): void {
  const chunks: Buffer[] = [];
  let size = 0;
  incoming.on('data', (chunk: Buffer) => {
    size += chunk.length;
    if (size > MAX_PEER_ANSWER_BYTES) {
      fail(new Error(`the answer is larger than ${MAX_PEER_ANSWER_BYTES} bytes`));
      return;
    }
    chunks.push(chunk);
  });
  incoming.once('error', (error) => fail(error));
  incoming.once('aborted', () => fail(new Error('the peer closed the answer early')));
  incoming.once('end', () => {
    const key = incoming.headers['idempotency-key'];
    done({
      status: incoming.statusCode ?? 502,
      contentType: incoming.headers['content-type'],
      idempotencyKey: typeof key === 'string' ? key : undefined,
      text: Buffer.concat(chunks).toString('utf8'),
    });
  });
}
