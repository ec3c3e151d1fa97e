import { RecordsClient as RecordsGrpcClient } from '../proto/gen/polychrome/state/v1/records';
import { recordsErrorOf } from './record-conflict-error';
import { StateCallError } from './state-call-errors';
import { callStateUnary, type StartUnaryCall, type StateCallOptions } from './state-calls';
import {
  DEFAULT_CALL_TIMEOUT_MS,
  stateChannel,
  waitForStateChannel,
  type StateClientOptions,
} from './state-channel';

/**
 * The channel to the state plane's Records service and how one call on it runs: mutual TLS
 * (common/state-channel.ts), the deadline, and a failure rebuilt as an AppError (a
 * RecordConflictError for a stale version). The calls of each kind of record
 * (persona-calls.ts, session-calls.ts, credential-calls.ts, ceremony-calls.ts) go through it.
 */
export class RecordsConnection {
  /** The generated client; a call starts on it inside {@link RecordsConnection.unary}. */
  readonly grpc: RecordsGrpcClient;
  private readonly address: string;
  private readonly callTimeoutMs: number;

  constructor(options: StateClientOptions) {
    this.address = options.address;
    this.callTimeoutMs = options.callTimeoutMs ?? DEFAULT_CALL_TIMEOUT_MS;
    const channel = stateChannel(options);
    this.grpc = new RecordsGrpcClient(options.address, channel.credentials, channel.options);
  }

  /**
   * Waits until the channel is connected (TLS handshake done).
   *
   * @throws StateCallError `unavailable` when it is not connected within `timeoutMs`.
   */
  waitForReady(timeoutMs: number): Promise<void> {
    return waitForStateChannel(this.grpc, this.address, timeoutMs);
  }

  /** Closes the channel; calls in flight fail. Idempotent. */
  close(): void {
    this.grpc.close();
  }

  async unary<R>(method: string, options: StateCallOptions, start: StartUnaryCall<R>): Promise<R> {
    try {
      return await callStateUnary(
        this.address,
        method,
        {
          signal: options.signal,
          timeoutMs: options.timeoutMs ?? this.callTimeoutMs,
        },
        start,
      );
    } catch (error) {
      throw recordsErrorOf(error);
    }
  }

  /**
   * A message field the server always sets.
   *
   * @throws StateCallError `internal` when it is absent (a server that breaks the contract).
   */
  required<T>(value: T | undefined, method: string): T {
    if (value !== undefined) return value;
    throw new StateCallError(
      'internal',
      `state plane at ${this.address}: ${method} answered without its record`,
      { method, grpcStatus: 0, fromServer: true },
    );
  }
}
