import {
  JournalClient,
  type AppendResponse,
  type HeadResponse,
  type ListPartitionsResponse,
  type ProofResponse,
  type VerifyResponse,
} from '../proto/gen/polychrome/state/v1/state';
import { entryFromProto, exportEntryFromProto, signedRootFromProto } from './journal-from-proto';
import * as excisionCalls from './excision-calls';
import * as memoryClearCall from './memory-clear-call';
import * as retireCalls from './retire-calls';
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
  ClearMemoryOutcome,
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

  /** Repairs `partition` (see {@link excisionCalls.repair}; docs/state-plane.md, "Repair"). */
  repair(
    partition: string,
    request: Parameters<typeof excisionCalls.repair>[2],
    options: StateCallOptions = {},
  ): Promise<RepairOutcome> {
    return excisionCalls.repair(this.calls(), partition, request, options);
  }

  /** Retires `partition` (see {@link retireCalls.retire}; docs/state-plane.md, "Retirement"). */
  retire(
    partition: string,
    request: Parameters<typeof retireCalls.retire>[2],
    options: StateCallOptions = {},
  ): Promise<retireCalls.RetireOutcome> {
    return retireCalls.retire(this.calls(), partition, request, options);
  }

  /** The retirement of `partition` (see {@link retireCalls.retirement}). */
  retirement(
    partition: string,
    options: StateCallOptions = {},
  ): Promise<retireCalls.RetirementRecord> {
    return retireCalls.retirement(this.calls(), partition, options);
  }

  private calls(): retireCalls.JournalCalls {
    return { grpc: this.client, address: this.address, unary: (m, o, s) => this.unary(m, o, s) };
  }

  /** A memory clear and its erasure (see {@link memoryClearCall.clearMemory}). */
  clearMemory(
    partition: string,
    expectedHead: number,
    cleared: NewJournalEvent,
    options: AppendCallOptions = {},
  ): Promise<ClearMemoryOutcome> {
    return memoryClearCall.clearMemory(this.calls(), partition, expectedHead, cleared, options);
  }

  /** Erases entries of `partition` (see {@link excisionCalls.erase}; docs/state-plane.md, "Erasure"). */
  erase(
    partition: string,
    request: Parameters<typeof excisionCalls.erase>[2],
    options: StateCallOptions = {},
  ): Promise<EraseOutcome> {
    return excisionCalls.erase(this.calls(), partition, request, options);
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
