import { readFile } from 'node:fs/promises';

import {
  credentials,
  Metadata,
  type CallOptions,
  type ChannelCredentials,
  type Client,
  type ClientOptions,
  type ClientReadableStream,
  type ServiceError,
} from '@grpc/grpc-js';

import {
  JournalClient,
  type AppendResponse,
  type ExportItem as ExportItemProto,
  type HeadResponse,
  type JournalEvent as JournalEventProto,
  type ListPartitionsResponse,
  type ProofResponse,
  type RepairResponse,
  type VerifyResponse,
} from '../proto/gen/polychrome/state/v1/state';
import { injectTraceMetadata } from './tracing';
import type { SignedRoot as SignedRootProto } from '../proto/gen/polychrome/events/v1/events';
import { AppError, type ErrorCode, type ErrorDetails } from './errors';
import { isServiceError, receivedErrorOf } from './grpc-errors';

/*
 * The typed client every other process (the control plane, the CLI) uses to reach the
 * state plane. Imports nothing from state/, so operator/ and cli/ may use it. Errors cross
 * the wire as common/grpc-errors.ts says (one contract for every gRPC server and client);
 * here they are rebuilt as the state plane's error classes. `fenced` shares
 * FAILED_PRECONDITION with `failed_precondition`; the metadata code tells them apart, and
 * the client rebuilds it as {@link JournalFencedError}.
 */

/**
 * An error the state plane reported, or a failure to reach it, rebuilt on the client
 * side. Kept apart from local errors: `method` names the call, `grpcStatus` the raw status,
 * and `fromServer` tells whether the state plane itself answered (its status carried a
 * Polychrome error code) or the call failed on the way (no connection, refused TLS
 * handshake, deadline).
 */
export class StateCallError extends AppError {
  override readonly name: string = 'StateCallError';
  readonly method: string;
  readonly grpcStatus: number;
  readonly fromServer: boolean;

  constructor(
    code: ErrorCode,
    message: string,
    options: {
      method: string;
      grpcStatus: number;
      fromServer: boolean;
      details?: ErrorDetails;
      cause?: unknown;
    },
  ) {
    super(code, message, { details: options.details, cause: options.cause });
    this.method = options.method;
    this.grpcStatus = options.grpcStatus;
    this.fromServer = options.fromServer;
  }
}

/**
 * The head moved under a compare-and-swap append (`conflict`). Callers need the current
 * head to read what they missed and retry, so it is a field, not only text.
 */
export class JournalConflictError extends StateCallError {
  override readonly name: string = 'JournalConflictError';
  /** The partition's head when the append was refused. */
  readonly head: number;

  constructor(
    message: string,
    options: {
      method: string;
      grpcStatus: number;
      head: number;
      details?: ErrorDetails;
      cause?: unknown;
    },
  ) {
    super('conflict', message, { ...options, fromServer: true });
    this.head = options.head;
  }
}

/**
 * The state plane refused an append whose fencing token is lower than the highest it has
 * accepted for the partition (`fenced`): a newer holder of the conversation's lease has
 * written, so this writer lost the lease. Unlike a {@link JournalConflictError}, reading
 * the journal and retrying at the new head is wrong: stop writing for the conversation
 * until its lease is held again. Nothing of the append was written.
 */
export class JournalFencedError extends StateCallError {
  override readonly name: string = 'JournalFencedError';
  /** The token the refused append carried, as the server reported it. */
  readonly fencingToken: number | undefined;
  /** The highest token the partition has accepted, as the server reported it. */
  readonly highestFencingToken: number | undefined;

  constructor(
    message: string,
    options: {
      method: string;
      grpcStatus: number;
      details?: ErrorDetails;
      cause?: unknown;
    },
  ) {
    super('fenced', message, { ...options, fromServer: true });
    const token = (field: string): number | undefined => {
      const value = options.details?.[field];
      return typeof value === 'number' && Number.isSafeInteger(value) ? value : undefined;
    };
    this.fencingToken = token('fencingToken');
    this.highestFencingToken = token('highestFencingToken');
  }
}

/**
 * Rebuilds the AppError a state-plane call failed with: a {@link JournalConflictError} for
 * a conflict with a head, a {@link JournalFencedError} for `fenced`, else a
 * {@link StateCallError} with the code the state plane sent (or, when the status came from
 * grpc-js itself, the status's code): common/grpc-errors.ts `receivedErrorOf`. Anything
 * that is not a gRPC status becomes `internal`.
 *
 * @param target names the server in messages about transport failures (its address).
 */
export function stateErrorFromGrpc(error: unknown, method: string, target: string): AppError {
  if (error instanceof StateCallError) return error;
  if (!isServiceError(error)) {
    return new StateCallError(
      'internal',
      `state plane at ${target}: ${method} failed unexpectedly; see the cause`,
      { method, grpcStatus: 2, fromServer: false, cause: error },
    );
  }
  const received = receivedErrorOf(error);
  const { code, details, grpcStatus } = received;
  if (received.fromServer) {
    if (code === 'conflict' && received.head !== undefined) {
      return new JournalConflictError(received.message, {
        method,
        grpcStatus,
        head: received.head,
        details,
        cause: error,
      });
    }
    if (code === 'fenced') {
      return new JournalFencedError(received.message, {
        method,
        grpcStatus,
        details,
        cause: error,
      });
    }
    return new StateCallError(code, received.message, {
      method,
      grpcStatus,
      fromServer: true,
      details,
      cause: error,
    });
  }
  const hint =
    code === 'unavailable'
      ? '; check the address, that the state plane is running, and that this client ' +
        'certificate is signed by the Polychrome CA and trusts the server certificate'
      : '';
  return new StateCallError(
    code,
    `state plane at ${target}: ${method} failed: ${received.message || 'no details'}${hint}`,
    { method, grpcStatus, fromServer: false, cause: error },
  );
}

/** A signed root as the state plane reports it. */
export interface SignedRootInfo {
  /** Position of the `signed_root` event; equals `leafCount`. */
  readonly position: number;
  readonly leafCount: number;
  readonly root: Uint8Array;
  readonly keyId: string;
  readonly signature: Uint8Array;
  /** 2: the signature also binds `partition` (docs/journal-format.md); 1: it does not. */
  readonly version: 1 | 2;
  /** The partition a version-2 root was signed for; empty for version 1. */
  readonly partition: string;
}

/**
 * One committed journal event. An entry the state plane's repair excised has `excised`
 * true, an empty kind and payload, and its kept `leafDigest`: readers skip it as a gap.
 */
export interface JournalEntry {
  readonly position: number;
  readonly kind: string;
  readonly payload: Uint8Array;
  readonly excised?: boolean;
  readonly leafDigest?: Uint8Array;
}

/** One event to append; the state plane assigns its position. */
export interface NewJournalEvent {
  readonly kind: string;
  readonly payload: Uint8Array;
}

/** What an acknowledged (durable) append wrote. */
export interface AppendOutcome {
  readonly firstPosition: number;
  /** The next free position; the event at `head − 1` is the batch's `signed_root`. */
  readonly head: number;
  readonly signedRoot: SignedRootInfo;
}

/** A partition's head; `signedRoot` is absent for a partition with no events. */
export interface HeadOutcome {
  readonly head: number;
  readonly signedRoot: SignedRootInfo | undefined;
}

/** An inclusion proof (docs/journal-format.md, "Inclusion proofs"). */
export interface ProofOutcome {
  readonly position: number;
  readonly leafCount: number;
  readonly leafDigest: Uint8Array;
  readonly digests: readonly Uint8Array[];
  readonly root: Uint8Array;
  readonly signedRoot: SignedRootInfo | undefined;
}

/** The first failing check of a verification. */
export interface VerifyFailureInfo {
  readonly position: number;
  readonly reason: string;
  readonly expected: string;
  readonly found: string;
  readonly message: string;
}

/** The outcome of a server-side verification. */
export interface VerifyOutcome {
  readonly ok: boolean;
  readonly events: number;
  readonly signedRoots: number;
  /** Events after the last signed root (none in a healthy journal). */
  readonly unsealed: number;
  readonly failure: VerifyFailureInfo | undefined;
  /** Positions repair excised; checked against their kept leaf digests. */
  readonly excised: readonly number[];
  /** True when a checkpoint was passed and checked. */
  readonly checkpointChecked: boolean;
}

/**
 * A checkpoint kept outside the journal (the Conversation's `status.journal`): the head
 * then, and the last signed root (the root over the first `head − 1` entries).
 */
export interface JournalCheckpointInfo {
  readonly head: number;
  readonly root: Uint8Array;
  readonly keyId?: string;
}

/** What a repair found and did (`excised` empty: nothing was unreadable). */
export interface RepairOutcome {
  readonly excised: readonly {
    readonly position: number;
    readonly leafDigest: Uint8Array;
    readonly problem: string;
  }[];
  readonly dryRun: boolean;
  readonly head: number;
  readonly signedRoot: SignedRootInfo | undefined;
  readonly message: string;
}

/** One item of an export: a public key (all come first) or an event. */
export type ExportEntry =
  | { readonly type: 'public_key'; readonly keyId: string; readonly publicKey: Uint8Array }
  | { readonly type: 'event'; readonly event: JournalEntry };

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
  readonly tls: StateClientTls;
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

/** Per-call options. */
export interface StateCallOptions {
  /** Cancels the call; the server sees the cancellation (streams stop reading the store). */
  readonly signal?: AbortSignal;
  /** Overrides {@link StateClientOptions.callTimeoutMs} for this call. */
  readonly timeoutMs?: number;
}

/** Options of {@link StateClient.append}. */
export interface AppendCallOptions extends StateCallOptions {
  /**
   * The fencing token of the lease under which the writer acts (the Lease's
   * `leaseTransitions` when it was taken). The state plane refuses it with
   * {@link JournalFencedError} when a higher one has already written to the partition.
   * 0, the default, is the lowest token: accepted only while no higher one has written.
   * @default 0
   */
  readonly fencingToken?: number;
  /**
   * The root of the partition's last signed root as the writer last saw it: the state
   * plane refuses the append (`failed_precondition`, `details.reason` `root_mismatch`)
   * when the journal at the expected head ends in another root. Unset: no check.
   */
  readonly expectedRoot?: Uint8Array;
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
  return {
    credentials: credentials.createSsl(
      Buffer.from(options.tls.ca),
      Buffer.from(options.tls.key),
      Buffer.from(options.tls.cert),
    ),
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

/** Starts one unary call of a generated client; {@link callStateUnary} finishes it. */
export type StartUnaryCall<R> = (
  metadata: Metadata,
  callOptions: Partial<CallOptions>,
  done: (error: ServiceError | null, response: R) => void,
) => { cancel(): void };

/**
 * Runs one unary call with a deadline and cancellation, rebuilding a failure as an
 * AppError ({@link stateErrorFromGrpc}). The call carries the active trace context in its
 * metadata, so the state plane's SERVER span is a child of the caller's span; it makes no
 * CLIENT span of its own (docs/observability.md#spans).
 *
 * @param options `timeoutMs` is required here: the client passes its default.
 * @throws StateCallError (or JournalConflictError) as the server or transport reports it;
 *   `cancelled` when `signal` is already aborted.
 */
export function callStateUnary<R>(
  target: string,
  method: string,
  options: { readonly signal?: AbortSignal; readonly timeoutMs: number },
  start: StartUnaryCall<R>,
): Promise<R> {
  return new Promise<R>((resolve, reject) => {
    const signal = options.signal;
    if (signal?.aborted === true) {
      reject(
        new StateCallError('cancelled', `${method} was cancelled before it was sent`, {
          method,
          grpcStatus: 1,
          fromServer: false,
          cause: signal.reason,
        }),
      );
      return;
    }
    const deadline = Date.now() + options.timeoutMs;
    const onAbort = (): void => call.cancel();
    const metadata = new Metadata();
    injectTraceMetadata(metadata);
    const call = start(metadata, { deadline }, (error, response) => {
      signal?.removeEventListener('abort', onAbort);
      if (error === null) resolve(response);
      else reject(stateErrorFromGrpc(error, method, target));
    });
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

const STREAM_HIGH_WATER = 64;

function signedRootFromProto(
  proto: SignedRootProto | undefined,
  position: number,
): SignedRootInfo | undefined {
  if (proto === undefined) return undefined;
  return {
    position,
    leafCount: proto.leafCount,
    root: new Uint8Array(proto.root),
    keyId: proto.keyId,
    signature: new Uint8Array(proto.signature),
    version: proto.version === 2 ? 2 : 1,
    partition: proto.partition,
  };
}

function entryFromProto(proto: JournalEventProto): JournalEntry {
  const entry = {
    position: proto.position,
    kind: proto.kind,
    payload: new Uint8Array(proto.payload),
  };
  return proto.excised
    ? { ...entry, excised: true, leafDigest: new Uint8Array(proto.leafDigest) }
    : entry;
}

function exportEntryFromProto(proto: ExportItemProto): ExportEntry | undefined {
  const item = proto.item;
  if (item === undefined) return undefined;
  switch (item.$case) {
    case 'publicKey':
      return {
        type: 'public_key',
        keyId: item.value.keyId,
        publicKey: new Uint8Array(item.value.publicKey),
      };
    case 'event':
      return { type: 'event', event: entryFromProto(item.value) };
  }
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

/**
 * What the control plane's turn code uses of the state plane's journal: appends at an
 * expected head, reads (bounded or following) and the head. {@link StateClient} is the
 * production one; the same contract holds for any other (tests put the real store behind
 * it): a lost compare-and-swap is a {@link JournalConflictError}, a follow that the state
 * plane ends is a StateCallError `unavailable`.
 */
export interface StateJournal {
  append(
    partition: string,
    expectedHead: number,
    events: readonly NewJournalEvent[],
    options?: AppendCallOptions,
  ): Promise<AppendOutcome>;
  read(
    partition: string,
    fromPosition?: number,
    limit?: number,
    options?: Pick<StateCallOptions, 'signal'> & { readonly follow?: boolean },
  ): AsyncIterable<JournalEntry>;
  head(partition: string, options?: StateCallOptions): Promise<HeadOutcome>;
  /** The state plane's public keys, then every event (the control plane reads only the keys). */
  export(partition: string, options?: Pick<StateCallOptions, 'signal'>): AsyncIterable<ExportEntry>;
}

/**
 * The typed client of the state plane's Journal service over mutual TLS. Every failure is
 * rebuilt as an AppError ({@link stateErrorFromGrpc}): a {@link JournalConflictError} when
 * an append lost the compare-and-swap, a {@link StateCallError} otherwise. Streams are
 * async iterables with backpressure: the client stops reading from the network while the
 * consumer is behind, and leaving a `for await` early cancels the call on the server.
 *
 * @example
 * async function lastHead(tls: StateClientTls): Promise<number> {
 *   const client = new StateClient({ address: 'localhost:7443', tls });
 *   try {
 *     return (await client.head('conv-1')).head;
 *   } finally {
 *     client.close();
 *   }
 * }
 */
export class StateClient implements StateJournal {
  private readonly client: JournalClient;
  private readonly address: string;
  private readonly callTimeoutMs: number;

  constructor(options: StateClientOptions) {
    this.address = options.address;
    this.callTimeoutMs = options.callTimeoutMs ?? DEFAULT_CALL_TIMEOUT_MS;
    const channel = stateChannel(options);
    this.client = new JournalClient(options.address, channel.credentials, channel.options);
  }

  /**
   * Waits until the channel is connected (TLS handshake done).
   *
   * @throws StateCallError `unavailable` when it is not connected within `timeoutMs`.
   */
  waitForReady(timeoutMs: number): Promise<void> {
    return waitForStateChannel(this.client, this.address, timeoutMs);
  }

  /**
   * Appends `events` at exactly `expectedHead` (compare-and-swap); the state plane seals the
   * batch with a signed root and answers once it is durable.
   *
   * @throws JournalFencedError when `options.fencingToken` is lower than one the partition
   *   already accepted (checked before the head: this writer lost the lease);
   *   JournalConflictError when the head moved (`head` is the current one);
   *   StateCallError `invalid_argument`, `failed_precondition`, `permission_denied`,
   *   `data_loss`, `unavailable` as the server reports them.
   */
  async append(
    partition: string,
    expectedHead: number,
    events: readonly NewJournalEvent[],
    options: AppendCallOptions = {},
  ): Promise<AppendOutcome> {
    const response = await this.unary<AppendResponse>(
      'Append',
      options,
      (metadata, callOptions, done) =>
        this.client.append(
          {
            partition,
            expectedHead,
            events: events.map((e) => ({ kind: e.kind, payload: Buffer.from(e.payload) })),
            fencingToken: options.fencingToken ?? 0,
            expectedRoot: Buffer.from(options.expectedRoot ?? new Uint8Array(0)),
          },
          metadata,
          callOptions,
          done,
        ),
    );
    const signedRoot = signedRootFromProto(response.signedRoot, response.signedRootPosition);
    if (signedRoot === undefined) {
      throw new StateCallError(
        'internal',
        `state plane at ${this.address}: Append to ${partition} answered without a signed root`,
        { method: 'Append', grpcStatus: 0, fromServer: true },
      );
    }
    return { firstPosition: response.firstPosition, head: response.head, signedRoot };
  }

  /**
   * The partition's head and last signed root.
   *
   * @throws StateCallError as the server reports it.
   */
  async head(partition: string, options: StateCallOptions = {}): Promise<HeadOutcome> {
    const response = await this.unary<HeadResponse>(
      'Head',
      options,
      (metadata, callOptions, done) => this.client.head({ partition }, metadata, callOptions, done),
    );
    return {
      head: response.head,
      signedRoot: signedRootFromProto(response.lastSignedRoot, response.lastSignedRootPosition),
    };
  }

  /**
   * An inclusion proof of the event at `position` against the root over `leafCount` leaves
   * (0 or omitted: the latest).
   *
   * @throws StateCallError as the server reports it.
   */
  async proof(
    partition: string,
    position: number,
    leafCount = 0,
    options: StateCallOptions = {},
  ): Promise<ProofOutcome> {
    const response = await this.unary<ProofResponse>(
      'Proof',
      options,
      (metadata, callOptions, done) =>
        this.client.proof({ partition, position, leafCount }, metadata, callOptions, done),
    );
    return {
      position: response.position,
      leafCount: response.leafCount,
      leafDigest: new Uint8Array(response.leafDigest),
      digests: response.digests.map((d) => new Uint8Array(d)),
      root: new Uint8Array(response.root),
      signedRoot: signedRootFromProto(response.signedRoot, response.signedRootPosition),
    };
  }

  /**
   * Has the state plane replay the partition and check every root and signature.
   *
   * @throws StateCallError as the server reports it (`not_found` for an unknown partition).
   */
  async verify(
    partition: string,
    options: StateCallOptions & { readonly checkpoint?: JournalCheckpointInfo } = {},
  ): Promise<VerifyOutcome> {
    const { checkpoint } = options;
    const response = await this.unary<VerifyResponse>(
      'Verify',
      options,
      (metadata, callOptions, done) =>
        this.client.verify(
          {
            partition,
            checkpoint:
              checkpoint === undefined
                ? undefined
                : {
                    head: checkpoint.head,
                    root: Buffer.from(checkpoint.root),
                    keyId: checkpoint.keyId ?? '',
                  },
          },
          metadata,
          callOptions,
          done,
        ),
    );
    return {
      ok: response.ok,
      events: response.events,
      signedRoots: response.signedRoots,
      unsealed: response.unsealed,
      excised: response.excised,
      checkpointChecked: response.checkpointChecked,
      failure:
        response.failure === undefined
          ? undefined
          : {
              position: response.failure.position,
              reason: response.failure.reason,
              expected: response.failure.expected,
              found: response.failure.found,
              message: response.failure.message,
            },
    };
  }

  /**
   * Has the state plane excise every unreadable entry of `partition` (writer role only):
   * each is replaced by a marker keeping its leaf digest and recorded by a signed
   * `excision` event naming `actor` and `reason`, in one atomic batch; with `dryRun`,
   * reports what it would excise and writes nothing (docs/state-plane.md, "Repair").
   *
   * @throws JournalFencedError as for {@link StateClient.append}; StateCallError
   *   `invalid_argument` (no actor or reason), `not_found`, `data_loss` (the damage is not
   *   confined to entries: restore from a backup), `permission_denied` as the server
   *   reports them.
   */
  async repair(
    partition: string,
    request: {
      readonly actor: string;
      readonly reason: string;
      readonly dryRun?: boolean;
      readonly fencingToken?: number;
    },
    options: StateCallOptions = {},
  ): Promise<RepairOutcome> {
    const response = await this.unary<RepairResponse>(
      'Repair',
      options,
      (metadata, callOptions, done) =>
        this.client.repair(
          {
            partition,
            actor: request.actor,
            reason: request.reason,
            dryRun: request.dryRun ?? false,
            fencingToken: request.fencingToken ?? 0,
          },
          metadata,
          callOptions,
          done,
        ),
    );
    return {
      excised: response.excised.map((e) => ({
        position: e.position,
        leafDigest: new Uint8Array(e.leafDigest),
        problem: e.problem,
      })),
      dryRun: response.dryRun,
      head: response.head,
      signedRoot: signedRootFromProto(response.signedRoot, response.signedRootPosition),
      message: response.message,
    };
  }

  /**
   * Partition names, sorted.
   *
   * @throws StateCallError as the server reports it.
   */
  async listPartitions(options: StateCallOptions = {}): Promise<string[]> {
    const response = await this.unary<ListPartitionsResponse>(
      'ListPartitions',
      options,
      (metadata, callOptions, done) => this.client.listPartitions({}, metadata, callOptions, done),
    );
    return response.partitions;
  }

  /**
   * Streams committed events from `fromPosition`, at most `limit` of them (0: no limit).
   * Without `follow` the stream ends at the head as of the call. With `follow` it then
   * stays open and yields each newly committed event, in order, with no gap and no
   * duplicate, once it is durable; it ends after `limit` events, when `signal` fires or
   * the loop is left (both cancel the call), or with a StateCallError `unavailable` when
   * the state plane shuts down: reconnect and follow again from the position after the
   * last event received. A follow read has no deadline. Leaving the loop early cancels
   * the call.
   *
   * @throws StateCallError from the iterator, as the server reports it
   *   (`failed_precondition` for a `fromPosition` beyond the head, `unavailable` when a
   *   follow read is ended by a shutdown, `cancelled` after `signal` fired).
   */
  read(
    partition: string,
    fromPosition = 0,
    limit = 0,
    options: Pick<StateCallOptions, 'signal'> & { readonly follow?: boolean } = {},
  ): AsyncIterable<JournalEntry> {
    const follow = options.follow ?? false;
    return this.stream(
      'Read',
      options.signal,
      (metadata) => this.client.read({ partition, fromPosition, limit, follow }, metadata),
      entryFromProto,
    );
  }

  /**
   * Streams the partition for offline verification: every public key the state plane
   * holds first, then every stored event.
   *
   * @throws StateCallError from the iterator, as the server reports it.
   */
  export(
    partition: string,
    options: Pick<StateCallOptions, 'signal'> = {},
  ): AsyncIterable<ExportEntry> {
    return this.stream(
      'Export',
      options.signal,
      (metadata) => this.client.export({ partition }, metadata),
      exportEntryFromProto,
    );
  }

  /** Closes the channel; calls in flight fail. Idempotent. */
  close(): void {
    this.client.close();
  }

  private unary<R>(
    method: string,
    options: StateCallOptions,
    start: StartUnaryCall<R>,
  ): Promise<R> {
    return callStateUnary(
      this.address,
      method,
      { signal: options.signal, timeoutMs: options.timeoutMs ?? this.callTimeoutMs },
      start,
    );
  }

  private async *stream<P, T>(
    method: string,
    signal: AbortSignal | undefined,
    start: (metadata: Metadata) => ClientReadableStream<P>,
    convert: (proto: P) => T | undefined,
  ): AsyncGenerator<T> {
    // The active trace context, for the state plane's SERVER span (no CLIENT span here).
    const metadata = new Metadata();
    injectTraceMetadata(metadata);
    const call = start(metadata);
    const queue: P[] = [];
    let ended = false;
    let failure: unknown;
    let wake: (() => void) | undefined;
    const notify = (): void => {
      wake?.();
      wake = undefined;
    };
    call.on('data', (item: P) => {
      queue.push(item);
      // Backpressure: stop pulling from the network until the consumer catches up.
      if (queue.length >= STREAM_HIGH_WATER) call.pause();
      notify();
    });
    call.on('end', () => {
      ended = true;
      notify();
    });
    call.on('error', (error: unknown) => {
      failure = error;
      notify();
    });
    const onAbort = (): void => call.cancel();
    signal?.addEventListener('abort', onAbort, { once: true });
    try {
      for (;;) {
        const item = queue.shift();
        if (item !== undefined) {
          if (queue.length < STREAM_HIGH_WATER / 2 && call.isPaused()) call.resume();
          const converted = convert(item);
          if (converted !== undefined) yield converted;
          continue;
        }
        if (failure !== undefined) {
          throw stateErrorFromGrpc(failure, method, this.address);
        }
        if (ended) return;
        await new Promise<void>((resolve) => {
          wake = resolve;
        });
      }
    } finally {
      signal?.removeEventListener('abort', onAbort);
      // Leaving early (break, throw in the loop body) must stop the server's read too.
      if (!ended && failure === undefined) call.cancel();
    }
  }
}
