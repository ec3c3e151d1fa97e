import {
  JournalClient,
  type AppendResponse,
  type EraseResponse,
  type HeadResponse,
  type ListPartitionsResponse,
  type ProofResponse,
  type RepairResponse,
  type VerifyResponse,
} from '../proto/gen/polychrome/state/v1/state';
import { entryFromProto, exportEntryFromProto, signedRootFromProto } from './journal-from-proto';
import { StateCallError } from './state-call-errors';
import {
  callStateUnary,
  streamStateCall,
  type StartUnaryCall,
  type StateCallOptions,
} from './state-calls';
import {
  DEFAULT_CALL_TIMEOUT_MS,
  stateChannel,
  waitForStateChannel,
  type StateClientOptions,
} from './state-channel';
import type {
  AppendCallOptions,
  AppendOutcome,
  EraseOutcome,
  ExportEntry,
  HeadOutcome,
  JournalCheckpointInfo,
  JournalEntry,
  NewJournalEvent,
  ProofOutcome,
  RepairOutcome,
  StateJournal,
  VerifyOutcome,
} from './state-journal';

/*
 * The typed client every other process (the control plane, the CLI) uses to reach the
 * state plane's journal. Imports nothing from state/, so operator/ and cli/ may use it.
 * It dials through common/state-channel.ts, calls through common/state-calls.ts (errors
 * rebuilt by common/state-call-errors.ts) and converts answers with
 * common/journal-from-proto.ts.
 */

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
      erased: response.erased,
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
   * Has the state plane erase the named readable content entries of `partition` (erase
   * role only; docs/state-plane.md, "Erasure"): each is replaced by a marker keeping its
   * leaf digest and recorded by a signed `excision` event marked `erased`, in one atomic
   * batch; with `dryRun`, checks everything and writes nothing.
   *
   * @throws JournalFencedError as for {@link StateClient.append}; StateCallError
   *   `invalid_argument`, `failed_precondition` (a position that may not be erased, named
   *   with why), `data_loss`, `permission_denied` as the server reports them.
   */
  async erase(
    partition: string,
    request: {
      readonly positions: readonly number[];
      readonly actor: string;
      readonly reason: string;
      readonly dryRun?: boolean;
      readonly fencingToken?: number;
    },
    options: StateCallOptions = {},
  ): Promise<EraseOutcome> {
    const { positions, actor, reason } = request;
    const fencingToken = request.fencingToken ?? 0;
    const dryRun = request.dryRun ?? false;
    const message = { partition, positions: [...positions], actor, reason, fencingToken, dryRun };
    const response = await this.unary<EraseResponse>('Erase', options, (metadata, call, done) =>
      this.client.erase(message, metadata, call, done),
    );
    return {
      erased: response.erased.map((e) => ({
        position: e.position,
        leafDigest: new Uint8Array(e.leafDigest),
        kind: e.kind,
        turnId: e.turnId,
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
    return streamStateCall(
      this.address,
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
    return streamStateCall(
      this.address,
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
}
