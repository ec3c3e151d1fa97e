/**
 * One `Harness.RunTurn` call (proto/polychrome/harness/v1), read by its caller: an async
 * iterable of what the harness streams, in order, which the caller answers — a step with
 * its journal position once committed ({@link HarnessCall.committed}), a trusted tool with
 * its result ({@link HarnessCall.toolResult}) — before it reads on. A relayed model request
 * is answered with its fragments and answer ({@link HarnessCall.modelDelta},
 * {@link HarnessCall.modelAnswer}) whenever the model has them, while the reading goes on: a
 * panel's threads ask side by side (docs/turns.md, "Delegation"). The call owns the
 * stream: the carried-step rules, how an early end or a wire error reads, and cancelling
 * the call when its reader stops (docs/turns.md "One message", 6).
 */
import type { ClientDuplexStream } from '@grpc/grpc-js';
import { AppError, type ErrorDetails } from '../../common/errors';
import { isServiceError, receivedErrorOf } from '../../common/grpc-errors';
import type {
  McpPaidResult,
  McpPayment,
  ModelAnswer,
  ModelRequest,
  Paused,
  PaymentChallenge,
  PaymentChargeAnswer,
  PaymentSettle,
  Step,
  TextDelta,
  TrustedToolCall,
  TrustedToolResult,
  TurnInput,
  TurnOutput,
  TurnResult,
} from '../../proto/gen/polychrome/harness/v1/harness';

/** One message of a harness call, as the harness sent it. */
export type HarnessMessage =
  /** A live fragment of model text (never committed). */
  | { readonly kind: 'delta'; readonly delta: TextDelta }
  /** A step to commit; the harness waits for {@link HarnessCall.committed}. */
  | { readonly kind: 'step'; readonly step: Step }
  /** A control-plane tool to run; the harness waits for {@link HarnessCall.toolResult}. */
  | { readonly kind: 'trusted_tool'; readonly call: TrustedToolCall }
  /**
   * A relayed model call to make; its thread waits for {@link HarnessCall.modelAnswer} (and
   * takes {@link HarnessCall.modelDelta}s before it), and the reading may go on meanwhile.
   */
  | { readonly kind: 'model_request'; readonly request: ModelRequest }
  /**
   * A tool met a 402 (docs/payments.md, "A paid call in a turn"); the harness waits for
   * {@link HarnessCall.chargeAnswer}.
   */
  | { readonly kind: 'payment_challenge'; readonly challenge: PaymentChallenge }
  /**
   * Pay an approved charge; the harness waits for {@link HarnessCall.toolResult}, or, for
   * an MCP tool's charge, {@link HarnessCall.mcpPayment}.
   */
  | { readonly kind: 'payment_settle'; readonly settle: PaymentSettle }
  /**
   * What the MCP tool answered when called with the payment {@link HarnessCall.mcpPayment}
   * handed over in this call; the harness waits for {@link HarnessCall.toolResult}.
   */
  | {
      readonly kind: 'mcp_paid_result';
      readonly result: McpPaidResult;
      /** This call handed the tool call its payment (else the message is forged). */
      readonly handed: boolean;
    }
  /** The end: the harness paused the turn. */
  | { readonly kind: 'paused'; readonly paused: Paused }
  /**
   * The end: the harness's result, with the steps it sent with `commit_with_result` (the
   * reply that ended the turn): not committed yet, they go into batch two, before
   * `turn_complete`; the harness waits for no ack of them.
   */
  | { readonly kind: 'result'; readonly result: TurnResult; readonly carried: readonly Step[] };

/** How many calls a channel carries and when it was last used (the connector's sweep reads it). */
export interface ChannelUse {
  lastUsedMs: number;
  calls: number;
}

/**
 * A harness call. Read it once, to its end (`paused` or `result`) or until it throws;
 * a reader that stops early (a `break`, a throw in its loop) or calls {@link cancel}
 * cancels the gRPC call. The reading throws AppError: `cancelled` when the caller's signal
 * or {@link cancel} stopped it; the code and details the harness sent (its steering
 * details dropped), else the code of the call's gRPC status (`unavailable` when the
 * harness cannot be reached or died mid-call); `internal` when it broke the protocol;
 * `unavailable` when it ended the call without a result.
 */
export class HarnessCall implements AsyncIterable<HarnessMessage> {
  /**
   * What the reader has yet to answer before the harness goes on (`step 3`,
   * `trusted tool call t-1`).
   */
  private awaited: string | undefined;
  /** The relayed model requests read and not answered yet, by thread and step. */
  private readonly relaying = new Set<string>();
  /** Tool calls handed a signed payment in this call, whose paid result is not read yet. */
  private readonly handedPayments = new Set<string>();
  private failure: unknown;
  private cancelled: { readonly reason: unknown } | undefined;
  private ended = false;
  private released = false;
  private read = false;
  private readonly onAbort = (): void => this.stream.cancel();
  private readonly over = new AbortController();

  constructor(
    private readonly endpoint: string,
    private readonly stream: ClientDuplexStream<TurnInput, TurnOutput>,
    private readonly channel: ChannelUse,
    private readonly signal: AbortSignal | undefined,
  ) {
    channel.calls += 1;
    signal?.addEventListener('abort', this.onAbort, { once: true });
    // Keep the stream's 'error' event here; reading rethrows it.
    stream.on('error', (error: unknown) => {
      this.failure ??= error;
      this.over.abort(error);
    });
    stream.on('status', () => this.over.abort());
  }

  /**
   * Aborted once the call is over on the wire (ended, failed, cancelled): work done for the
   * harness meanwhile (a relayed model call) has nobody to answer and stops.
   */
  get closed(): AbortSignal {
    return this.over.signal;
  }

  /** Answers the step just read with its journal position: the harness goes on. */
  committed(sequence: number, position: number): void {
    this.answer(`step ${String(sequence)}`, {
      $case: 'stepCommitted',
      value: { sequence, position },
    });
  }

  /** Answers the trusted tool call just read with its result. */
  toolResult(result: TrustedToolResult): void {
    this.answer(`trusted tool call ${result.toolCallId}`, {
      $case: 'trustedToolResult',
      value: result,
    });
  }

  /** Answers the payment challenge just read with the charge committed, or a refusal. */
  chargeAnswer(answer: PaymentChargeAnswer): void {
    this.answer(`payment challenge ${answer.toolCallId}`, {
      $case: 'paymentChargeAnswer',
      value: answer,
    });
  }

  /**
   * Answers the payment settle just read, of an MCP tool's charge, with the signed payment
   * for the harness to call the tool with (docs/payments.md, "A paid MCP tool"); only this
   * call may then relay the tool's paid result.
   */
  mcpPayment(payment: McpPayment): void {
    this.answer(`trusted tool call ${payment.toolCallId}`, { $case: 'mcpPayment', value: payment });
    this.handedPayments.add(payment.toolCallId);
  }

  /** Streams a text fragment of a model request read and not answered yet. */
  modelDelta(request: RelayedRequest, text: string): void {
    const key = relayedKey(request);
    if (!this.relaying.has(key)) throw this.answersOther(key);
    if (!this.released) {
      const value = { step: request.step, text, thread: request.thread };
      this.stream.write({ input: { $case: 'modelDelta', value } });
    }
  }

  /** Answers a model request read and not answered yet with the response or its failure. */
  modelAnswer(answer: ModelAnswer): void {
    const key = relayedKey(answer);
    if (!this.relaying.delete(key)) throw this.answersOther(key);
    if (!this.released) this.stream.write({ input: { $case: 'modelAnswer', value: answer } });
  }

  /** Cancels the call; reading it (if it goes on) throws `cancelled` with `reason`. */
  cancel(reason: unknown): void {
    this.cancelled ??= { reason };
    this.release();
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<HarnessMessage, void, undefined> {
    if (this.read) throw new AppError('internal', 'a harness call is read once');
    this.read = true;
    let end: HarnessMessage | undefined;
    try {
      end = yield* this.relay();
    } catch (error) {
      this.failure ??= error;
    } finally {
      // A reader that stops early lands here too: the call is cancelled.
      this.release();
    }
    if (end === undefined) throw this.endError();
    yield end;
  }

  /** The harness's messages up to its end (returned, the call half-closed), or undefined. */
  private async *relay(): AsyncGenerator<HarnessMessage, HarnessMessage | undefined, undefined> {
    const carried: Step[] = [];
    for await (const raw of this.stream as AsyncIterable<TurnOutput>) {
      const output = raw.output;
      if (output === undefined) continue;
      switch (output.$case) {
        case 'textDelta':
          yield { kind: 'delta', delta: output.value };
          break;
        case 'step':
          if (output.value.commitWithResult) {
            carried.push(output.value);
            break;
          }
          this.awaited = `step ${String(output.value.sequence)}`;
          yield { kind: 'step', step: output.value };
          break;
        case 'trustedToolCall':
          this.awaited = `trusted tool call ${output.value.toolCallId}`;
          yield { kind: 'trusted_tool', call: output.value };
          break;
        case 'paymentChallenge':
          this.awaited = `payment challenge ${output.value.toolCallId}`;
          yield { kind: 'payment_challenge', challenge: output.value };
          break;
        case 'paymentSettle':
          // Answered as a trusted tool is: with the paid response, or an unknown outcome.
          this.awaited = `trusted tool call ${output.value.toolCallId}`;
          yield { kind: 'payment_settle', settle: output.value };
          break;
        case 'mcpPaidResult': {
          // Only the call the payment was handed to knows what the paid tool answered.
          const handed = this.handedPayments.delete(output.value.toolCallId);
          this.awaited = `trusted tool call ${output.value.toolCallId}`;
          yield { kind: 'mcp_paid_result', result: output.value, handed };
          break;
        }
        case 'modelRequest': {
          const key = relayedKey(output.value);
          if (this.relaying.has(key)) throw this.askedTwice(key);
          this.relaying.add(key);
          yield { kind: 'model_request', request: output.value };
          break;
        }
        case 'paused':
          this.end();
          if (carried.length > 0) throw this.carriedWithout('paused the turn');
          return { kind: 'paused', paused: output.value };
        case 'result':
          this.end();
          // Only a completed turn has a batch two that holds its last reply.
          if (carried.length > 0 && output.value.outcome?.$case !== 'complete') {
            throw this.carriedWithout(`ended it ${output.value.outcome?.$case ?? 'empty'}`);
          }
          return { kind: 'result', result: output.value, carried };
      }
      if (this.awaited !== undefined) throw this.unanswered(this.awaited);
    }
    return undefined;
  }

  /** Writes the answer to what the harness waits for; an answer to anything else is a bug. */
  private answer(answered: string, input: TurnInput['input']): void {
    if (this.awaited !== answered) throw this.answersOther(answered);
    this.awaited = undefined;
    if (!this.released) this.stream.write({ input });
  }

  private answersOther(answered: string): AppError {
    return new AppError(
      'internal',
      `the harness at ${this.endpoint} waits for an answer to ${this.awaited ?? 'nothing'}, not to ${answered}`,
    );
  }

  /** The harness sent its end: the call is half-closed, never cancelled. */
  private end(): void {
    this.ended = true;
    this.stream.end();
  }

  /** Cancels the call unless it ended, and gives the channel back (once). */
  private release(): void {
    if (this.released) return;
    this.released = true;
    this.over.abort();
    if (!this.ended) this.stream.cancel();
    this.signal?.removeEventListener('abort', this.onAbort);
    this.channel.calls -= 1;
    this.channel.lastUsedMs = Date.now();
  }

  /** Why reading ended without the harness's end. */
  private endError(): AppError {
    const cancelled =
      this.signal?.aborted === true ? { reason: this.signal.reason as unknown } : this.cancelled;
    if (cancelled !== undefined) {
      return new AppError(
        'cancelled',
        `the turn call to the harness at ${this.endpoint} was cancelled`,
        { cause: cancelled.reason },
      );
    }
    if (this.failure !== undefined) return harnessCallError(this.failure, this.endpoint);
    return new AppError(
      'unavailable',
      `the harness at ${this.endpoint} ended the turn call without a result; the turn will be recovered`,
    );
  }

  /** A harness that carried a step to commit with the result, then did not complete. */
  private carriedWithout(what: string): AppError {
    return new AppError(
      'internal',
      `the harness at ${this.endpoint} sent a step to commit with the turn's result, then ${what}; the turn will be recovered`,
    );
  }

  private askedTwice(request: string): AppError {
    return new AppError(
      'internal',
      `the harness at ${this.endpoint} asked ${request} again before it was answered`,
    );
  }

  private unanswered(awaited: string): AppError {
    return new AppError(
      'internal',
      `the harness call to ${this.endpoint} was read on before ${awaited} was answered; answer each step and trusted tool call before reading the next message`,
    );
  }
}

/** What names one relayed model request: its thread ('' for the turn's own agent) and step. */
export interface RelayedRequest {
  readonly step: number;
  readonly thread: string;
}

function relayedKey({ step, thread }: RelayedRequest): string {
  return thread === '' ? `model request ${step}` : `model request ${step} of thread ${thread}`;
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
