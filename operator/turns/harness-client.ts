/**
 * The control plane's side of `Harness.RunTurn` (proto/polychrome/harness/v1): send one
 * `start`, then answer what the harness streams, in order — commit each step and ack it,
 * run trusted tools, forward text deltas — until its terminal `paused` or `result`.
 * Every call is TLS, to a harness that proves it serves the conversation's namespace
 * (common/harness-identity.ts). Channels are kept per namespace and endpoint, and closed
 * when idle.
 */
import {
  credentials,
  Metadata,
  type ChannelCredentials,
  type ClientDuplexStream,
} from '@grpc/grpc-js';
import { AppError, type ErrorDetails } from '../../common/errors';
import { isServiceError, receivedErrorOf } from '../../common/grpc-errors';
import { HARNESS_CREDENTIAL_METADATA } from '../../common/harness-credential';
import { harnessServerName } from '../../common/harness-identity';
import { injectTraceMetadata } from '../../common/tracing';
import {
  HarnessClient,
  type Paused,
  type Step,
  type TextDelta,
  type TrustedToolCall,
  type TrustedToolResult,
  type TurnInput,
  type TurnOutput,
  type TurnResult,
  type TurnStart,
} from '../../proto/gen/polychrome/harness/v1/harness';
import type { HarnessCredentials } from './harness-credentials';

/** What the coordinator does with each message the harness sends. */
export interface HarnessTurnHandlers {
  /** A live fragment of model text (not committed). */
  onDelta(delta: TextDelta): void;
  /** Commits the step durably and returns its journal position; a throw ends the call. */
  commitStep(step: Step): Promise<number>;
  /** Runs a control-plane tool. */
  trustedTool(call: TrustedToolCall): Promise<TrustedToolResult>;
}

/** How the harness ended the call. */
export type HarnessTurnEnd =
  | { readonly kind: 'paused'; readonly paused: Paused }
  | {
      readonly kind: 'result';
      readonly result: TurnResult;
      /**
       * Steps the harness sent with `commit_with_result` (the reply that ended the turn):
       * not committed yet, they go into batch two, before `turn_complete`.
       */
      readonly carried: readonly Step[];
    };

export interface HarnessConnectorOptions {
  /**
   * The harness CA bundle (PEM): a harness must present a certificate it signed, for
   * `polychrome-harness.<namespace>` of the conversation's namespace.
   */
  readonly harnessCa: Buffer;
  /** Mints each call's per-conversation credential (harness-credentials.ts). */
  readonly credentials: HarnessCredentials;
  /** Close a harness channel after this long unused. @default 60000 */
  readonly idleChannelMs?: number;
  /** Longest a whole call may take (model and tools included). @default 600000 */
  readonly callDeadlineMs?: number;
}

/** Options of one {@link HarnessConnector.runTurn} call. */
export interface HarnessCallOptions {
  readonly signal?: AbortSignal;
  readonly traceparent?: string;
  /**
   * The conversation's namespace: the harness must prove it serves this namespace, and the
   * call's credential is bound to it.
   */
  readonly namespace: string;
}

interface Channel {
  readonly client: HarnessClient;
  lastUsedMs: number;
  calls: number;
}

/** Dials harness pods and runs turns on them. */
export class HarnessConnector {
  private readonly channels = new Map<string, Channel>();
  private readonly sweeper: NodeJS.Timeout;
  private readonly idleMs: number;
  /** TLS to the harnesses: server authentication with the harness CA, no client certificate. */
  private readonly tls: ChannelCredentials;

  constructor(private readonly options: HarnessConnectorOptions) {
    this.tls = credentials.createSsl(options.harnessCa);
    this.idleMs = options.idleChannelMs ?? 60_000;
    this.sweeper = setInterval(() => this.sweep(), Math.max(1_000, this.idleMs / 2));
    this.sweeper.unref();
  }

  /**
   * Runs one turn (or one attempt of it) on the harness at `endpoint` (`host:port`). The
   * call carries the active trace context, so the harness's RunTurn SERVER span is a child
   * of the caller's span; no CLIENT span is made here (docs/observability.md#spans).
   *
   * @throws AppError: the code and details the harness sent (`failed_precondition` when it
   *   runs another turn, `permission_denied` when it serves another conversation,
   *   `unauthenticated` for a refused credential, ...), else the code of the call's gRPC
   *   status (`unavailable` when the harness cannot be reached or died mid-call);
   *   `internal` when it broke the protocol, or what a handler threw.
   */
  async runTurn(
    endpoint: string,
    start: TurnStart,
    handlers: HarnessTurnHandlers,
    options: HarnessCallOptions,
  ): Promise<HarnessTurnEnd> {
    const channel = this.channel(options.namespace, endpoint);
    channel.calls += 1;
    const call = channel.client.runTurn(this.metadata(start, options), {
      deadline: Date.now() + (this.options.callDeadlineMs ?? 600_000),
    });
    const onAbort = (): void => call.cancel();
    options.signal?.addEventListener('abort', onAbort, { once: true });
    const failures: CallFailures = {};
    // Swallow the stream's 'error' event here; the iterator below rethrows it.
    call.on('error', (error: unknown) => {
      failures.call ??= error;
    });
    try {
      call.write({ input: { $case: 'start', value: start } });
      const end = await answerOutputs(endpoint, call, handlers, failures);
      if (end !== undefined) return end;
    } catch (error) {
      failures.call ??= error;
    } finally {
      options.signal?.removeEventListener('abort', onAbort);
      channel.calls -= 1;
      channel.lastUsedMs = Date.now();
    }
    if (failures.handler !== undefined) {
      throw failures.handler instanceof Error
        ? failures.handler
        : new AppError('internal', 'a turn handler failed with a non-error value');
    }
    if (options.signal?.aborted === true) {
      throw new AppError('cancelled', `the turn call to the harness at ${endpoint} was cancelled`, {
        cause: options.signal.reason,
      });
    }
    if (failures.call !== undefined) throw harnessCallError(failures.call, endpoint);
    throw new AppError(
      'unavailable',
      `the harness at ${endpoint} ended the turn call without a result; the turn will be recovered`,
    );
  }

  /** The call's metadata: the conversation's fresh credential (never logged) and the trace context. */
  private metadata(start: TurnStart, options: HarnessCallOptions): Metadata {
    const metadata = new Metadata();
    metadata.set(
      HARNESS_CREDENTIAL_METADATA,
      this.options.credentials.mint(start.conversationId, options.namespace),
    );
    // The active span's context when tracing is on; else the caller's own id, for the log.
    injectTraceMetadata(metadata);
    if (options.traceparent !== undefined && metadata.get('traceparent').length === 0) {
      metadata.set('traceparent', options.traceparent);
    }
    return metadata;
  }

  /** Closes every channel. */
  close(): void {
    clearInterval(this.sweeper);
    for (const channel of this.channels.values()) channel.client.close();
    this.channels.clear();
  }

  /**
   * The channel to the harness of `namespace` at `endpoint`. The namespace is part of the
   * key: a pod address reused by another namespace's harness gets a channel that checks
   * for that namespace's name, never one made for the first.
   */
  private channel(namespace: string, endpoint: string): Channel {
    const key = `${namespace}/${endpoint}`;
    let channel = this.channels.get(key);
    if (channel === undefined) {
      const name = harnessServerName(namespace);
      channel = {
        client: new HarnessClient(endpoint, this.tls, {
          // The name the harness's certificate must carry (checked with the harness CA).
          'grpc.ssl_target_name_override': name,
          'grpc.default_authority': name,
          // A turn can wait minutes for a model between messages; keep the link checked.
          'grpc.keepalive_time_ms': 30_000,
          'grpc.keepalive_timeout_ms': 10_000,
        }),
        lastUsedMs: Date.now(),
        calls: 0,
      };
      this.channels.set(key, channel);
    }
    return channel;
  }

  private sweep(): void {
    const now = Date.now();
    for (const [key, channel] of this.channels) {
      if (channel.calls === 0 && now - channel.lastUsedMs > this.idleMs) {
        channel.client.close();
        this.channels.delete(key);
      }
    }
  }
}

/** What ended a call early: a handler's throw (which cancels the call) or the call's error. */
interface CallFailures {
  handler?: unknown;
  call?: unknown;
}

/**
 * Answers what the harness streams until its terminal `paused` or `result` (returned), a
 * handler's failure (recorded in `failures`, the call cancelled) or the stream's end.
 */
async function answerOutputs(
  endpoint: string,
  call: ClientDuplexStream<TurnInput, TurnOutput>,
  handlers: HarnessTurnHandlers,
  failures: CallFailures,
): Promise<HarnessTurnEnd | undefined> {
  const carried: Step[] = [];
  for await (const raw of call as AsyncIterable<TurnOutput>) {
    const output = raw.output;
    if (output === undefined) continue;
    switch (output.$case) {
      case 'textDelta':
        handlers.onDelta(output.value);
        break;
      case 'step': {
        if (output.value.commitWithResult) {
          // Committed with the result in batch two; the harness waits for no ack.
          carried.push(output.value);
          break;
        }
        const { sequence } = output.value;
        await answer(call, failures, async () => ({
          input: {
            $case: 'stepCommitted',
            value: { sequence, position: await handlers.commitStep(output.value) },
          },
        }));
        break;
      }
      case 'trustedToolCall': {
        const toolCall = output.value;
        await answer(call, failures, async () => ({
          input: { $case: 'trustedToolResult', value: await handlers.trustedTool(toolCall) },
        }));
        break;
      }
      case 'paused':
        call.end();
        if (carried.length > 0) throw carriedWithout(endpoint, 'paused the turn');
        return { kind: 'paused', paused: output.value };
      case 'result':
        call.end();
        // Only a completed turn has a batch two that holds its last reply.
        if (carried.length > 0 && output.value.outcome?.$case !== 'complete') {
          throw carriedWithout(endpoint, `ended it ${output.value.outcome?.$case ?? 'empty'}`);
        }
        return { kind: 'result', result: output.value, carried };
    }
    if (failures.handler !== undefined) break;
  }
  return undefined;
}

/** Writes what `work` makes; if it throws, records the failure and cancels the call. */
async function answer(
  call: ClientDuplexStream<TurnInput, TurnOutput>,
  failures: CallFailures,
  work: () => Promise<TurnInput>,
): Promise<void> {
  try {
    call.write(await work());
  } catch (error) {
    failures.handler = error;
    call.cancel();
  }
}

/** A harness that carried a step to commit with the result, then did not complete. */
function carriedWithout(endpoint: string, what: string): AppError {
  return new AppError(
    'internal',
    `the harness at ${endpoint} sent a step to commit with the turn's result, then ${what}; the turn will be recovered`,
  );
}

/**
 * The call's failure as an AppError whose message names the harness: the code and details
 * the harness sent (common/grpc-errors.ts), else the code of the status grpc-js made (a
 * refused handshake, a dropped connection).
 */
function harnessCallError(error: unknown, endpoint: string): AppError {
  if (error instanceof AppError) return error;
  if (isServiceError(error)) {
    const received = receivedErrorOf(error);
    return new AppError(
      received.code,
      `harness at ${endpoint}: ${received.message || error.message}`,
      { details: withoutSteering(received.details), cause: error },
    );
  }
  return new AppError('unavailable', `harness at ${endpoint}: ${String(error)}`, { cause: error });
}

/**
 * Details the control plane acts on when its own code sets them: where a request is
 * forwarded (holder-routing.ts reads `forwardTo`). A harness is not trusted to steer the
 * control plane, so its error never carries them in; the rest of its details are kept.
 */
const STEERING_DETAILS: ReadonlySet<string> = new Set(['forwardTo', 'holder', 'retryAfterMs']);

function withoutSteering(details: ErrorDetails): ErrorDetails {
  return Object.fromEntries(Object.entries(details).filter(([key]) => !STEERING_DETAILS.has(key)));
}
