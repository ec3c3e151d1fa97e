import type { ServerDuplexStream } from '@grpc/grpc-js';
import type { Logger } from 'pino';
import { AppError, isAppError } from '../../common/errors';
import { grpcErrorOf } from '../../common/grpc-errors';
import type {
  TurnInput as TurnInputMessage,
  TurnOutput,
} from '../../proto/gen/polychrome/harness/v1/harness';
import type {
  ToolCallOptions,
  ToolCallRequest,
  ToolOutcome,
  ToolRunner,
} from '../turn/ports/tool-port';
import type { ModelResponse } from '../../common/model/model-port';
import type { ModelChannel, RelayedCall } from '../model/relayed-model';
import type { StepSink } from '../turn/run-turn';
import type { TextDelta } from '../turn/effect-calls';
import type { TurnStep, TurnTool } from '../turn/turn-records';
import { observeStep, type HarnessMetrics } from './harness-metrics';
import {
  textDeltaToProto,
  trustedAnswerFromProto,
  trustedCallToProto,
  type TerminalOutput,
  type TrustedAnswer,
} from './turn-output-codec';
import { turnStepToProto } from '../turn/step-codec';
import { modelAnswerFromProto } from './relay-codec';
import { waitForAnswer, type Waiter } from './answer-waiters';
import type { PaidToolRunner, PaymentPort } from '../turn/ports/payment-port';
import { TurnPayments, trustedTimeout } from './turn-payments';

/** The RunTurn call as grpc-js hands it to the handler. */
export type RunTurnCall = ServerDuplexStream<TurnInputMessage, TurnOutput>;

/**
 * Ends `call` with the status for `error` (common/grpc-errors.ts, the one wire contract:
 * the gRPC status from `errorStatus`, the code and details in trailing metadata, so the
 * control plane rebuilds the exact AppError). The message is the AppError's, written for
 * users; anything else becomes INTERNAL with a generic message (its detail belongs in the
 * log, never on the wire). A cancelled call gets nothing: nobody is listening.
 */
export function endWithError(call: RunTurnCall, error: unknown): AppError {
  const appError = isAppError(error)
    ? error
    : new AppError('internal', 'the harness hit an internal error; see its log', {
        cause: error,
      });
  if (!call.cancelled) call.emit('error', grpcErrorOf(appError));
  return appError;
}

/** Options of one {@link TurnCall}. */
export interface TurnCallOptions {
  readonly call: RunTurnCall;
  readonly turnId: string;
  /** The turn's tools (for the effect of a trusted call). */
  readonly tools: readonly TurnTool[];
  readonly log: Logger;
  readonly metrics?: HarnessMetrics;
}

/**
 * The stream side of one running turn: sends steps and waits for their acks (the
 * {@link StepSink}), proxies trusted tools to the control plane, streams text deltas,
 * and turns a `cancel`, a client cancel or a protocol mistake into an abort of the turn.
 *
 * Waits are bounded: each takes the signal runTurn gives it (a timeout), and all fail at
 * once when the control plane can send nothing more (it cancelled or half-closed).
 */
export class TurnCall {
  private readonly options: TurnCallOptions;
  private readonly abortController = new AbortController();
  private readonly acks = new Map<number, Waiter<number>>();
  private readonly trusted = new Map<string, Waiter<TrustedAnswer>>();
  /** The turn's paid calls (turn-payments.ts). */
  private readonly paid: TurnPayments;
  /**
   * The relayed model calls waiting for their answers, by {@link relayKey}: one per
   * thread, and a panel's threads ask side by side.
   */
  private readonly models = new Map<string, Waiter<ModelResponse>>();
  /** Every call relayed on this call, by {@link relayKey}. */
  private readonly relayed = new Set<string>();
  /** Where each waiting call's deltas go, by {@link relayKey}. */
  private readonly modelDeltas = new Map<string, (text: string) => void>();
  private sequence = 0;
  private inputClosed: AppError | undefined;
  private violation: AppError | undefined;

  constructor(options: TurnCallOptions) {
    this.options = options;
    this.paid = new TurnPayments({
      turnId: options.turnId,
      write: (output) => this.write(output),
      violate: (what) => this.violate(what),
    });
  }

  /** Aborted when the turn must stop (cancel, client gone, shutdown, protocol mistake). */
  get signal(): AbortSignal {
    return this.abortController.signal;
  }

  /** The protocol mistake that ended the turn, if one did. */
  get protocolViolation(): AppError | undefined {
    return this.violation;
  }

  /** Stops the turn; runTurn reports it `cancelled` (or `ambiguous`) with `reason`'s message. */
  abort(reason: AppError): void {
    if (!this.abortController.signal.aborted) this.abortController.abort(reason);
  }

  /** Handles one message after `start`. */
  onInput(message: TurnInputMessage): void {
    const input = message.input;
    switch (input?.$case) {
      case 'stepCommitted': {
        const waiter = this.acks.get(input.value.sequence);
        if (waiter === undefined) {
          this.violate(
            `step_committed names sequence ${input.value.sequence}, which is not waiting for an ack`,
          );
          return;
        }
        this.acks.delete(input.value.sequence);
        waiter.resolve(input.value.position);
        return;
      }
      case 'trustedToolResult': {
        let answer: TrustedAnswer;
        try {
          answer = trustedAnswerFromProto(input.value);
        } catch (error) {
          this.violate(isAppError(error) ? error.message : 'malformed trusted_tool_result');
          return;
        }
        if (this.paid.settled(answer)) return;
        const waiter = this.trusted.get(answer.toolCallId);
        if (waiter === undefined) {
          this.violate(`trusted_tool_result for ${answer.toolCallId}, which was not asked for`);
          return;
        }
        this.trusted.delete(answer.toolCallId);
        waiter.resolve(answer);
        return;
      }
      case 'mcpPayment':
        this.paid.mcpPayment(input.value);
        return;
      case 'paymentChargeAnswer':
        this.paid.chargeAnswered(input.value);
        return;
      case 'modelDelta': {
        const key = relayKey(input.value);
        if (this.models.has(key)) this.modelDeltas.get(key)?.(input.value.text);
        else this.lateRelay(input.value, 'model_delta');
        return;
      }
      case 'modelAnswer': {
        const key = relayKey(input.value);
        const waiter = this.models.get(key);
        if (waiter === undefined) {
          this.lateRelay(input.value, 'model_answer');
          return;
        }
        this.models.delete(key);
        this.modelDeltas.delete(key);
        const answer = modelAnswerFromProto(input.value);
        if (answer.ok) waiter.resolve(answer.response);
        else waiter.reject(answer.error);
        return;
      }
      case 'cancel':
        this.options.log.info({ reason: input.value.reason }, 'turn cancel received');
        this.abort(
          new AppError('cancelled', input.value.reason || 'the control plane cancelled the turn'),
        );
        return;
      case 'start':
        this.violate('a second start on one call; one call runs one turn');
        return;
      default:
        this.violate('an empty TurnInput');
    }
  }

  /** No more input will arrive: every wait, now or later, fails with `reason`. */
  closeInput(reason: AppError): void {
    if (this.inputClosed !== undefined) return;
    this.inputClosed = reason;
    for (const waiter of this.acks.values()) waiter.reject(reason);
    for (const waiter of this.trusted.values()) waiter.reject(reason);
    for (const waiter of this.models.values()) waiter.reject(reason);
    this.acks.clear();
    this.trusted.clear();
    this.paid.closeInput(reason);
    this.models.clear();
    this.modelDeltas.clear();
  }

  /**
   * Sends each step and resolves once the control plane acks its journal append; a
   * carried step (the last, before the result) is sent without an ack to wait for.
   */
  readonly sink: StepSink = {
    commit: async (step: TurnStep, { signal }: { readonly signal: AbortSignal }) => {
      const sequence = ++this.sequence;
      const started = performance.now();
      const acked = this.wait(this.acks, sequence, signal, () =>
        ackTimeout(this.options.turnId, step, sequence),
      );
      this.write({ $case: 'step', value: turnStepToProto(step, sequence) });
      const position = await acked;
      const seconds = (performance.now() - started) / 1000;
      if (this.options.metrics !== undefined) observeStep(this.options.metrics, step, seconds);
      this.options.log.debug({ kind: step.kind, sequence, position }, 'step committed');
    },
    carry: (step: TurnStep) => {
      const sequence = ++this.sequence;
      this.write({
        $case: 'step',
        value: { ...turnStepToProto(step, sequence), commitWithResult: true },
      });
      if (this.options.metrics !== undefined) observeStep(this.options.metrics, step, undefined);
      this.options.log.debug({ kind: step.kind, sequence }, 'step sent with the result');
    },
  };

  /** Runs `host: control_plane` tools by asking the control plane over the stream. */
  readonly trustedTools: ToolRunner = {
    call: async (request: ToolCallRequest, options: ToolCallOptions): Promise<ToolOutcome> => {
      const tool = this.options.tools.find((t) => t.name === request.name);
      const answered = this.wait(this.trusted, request.toolCallId, options.signal, () =>
        trustedTimeout(request, options.timeoutMs),
      );
      this.write({
        $case: 'trustedToolCall',
        value: trustedCallToProto({ call: request, effect: tool?.effect ?? 'side_effect' }),
      });
      const answer = await answered;
      // Rejecting is how a ToolRunner says "outcome unknown" (turn/ports/tool-port.ts).
      if (!answer.known) throw new AppError('unavailable', answer.reason);
      return answer.outcome;
    },
  };

  /** The turn's paid calls (turn-payments.ts); `paid` calls MCP tools with their payments. */
  payments(paid: PaidToolRunner | undefined): PaymentPort {
    return this.paid.port(paid);
  }

  /**
   * Relayed model calls (relayed-model.ts): a `model_request` up, its `model_delta`s and
   * `model_answer` down. The wait has no timeout of its own: the control plane's model call
   * is bounded by its adapter, and the call by its deadline.
   */
  readonly modelChannel: ModelChannel = {
    ask: (call: RelayedCall, { signal, onDelta }): Promise<ModelResponse> => {
      const key = relayKey(call);
      if (this.models.has(key)) {
        return Promise.reject(
          new AppError('internal', `model call ${describeRelay(call)} started while it is relayed`),
        );
      }
      const answered = this.wait(this.models, key, signal, () => relayCancelled(call));
      // Nobody would answer, or nobody waits: ask nothing.
      if (this.inputClosed !== undefined || signal.aborted) return answered;
      this.relayed.add(key);
      if (onDelta !== undefined) this.modelDeltas.set(key, onDelta);
      void answered.catch(() => this.modelDeltas.delete(key));
      this.write({ $case: 'modelRequest', value: call });
      return answered;
    },
  };

  /**
   * Streams a text fragment (not committed). A relayed step's fragments are not sent back:
   * the control plane streamed them itself.
   */
  sendDelta(delta: TextDelta): void {
    if (this.relayed.has(relayKey({ step: delta.step, thread: delta.thread ?? '' }))) return;
    this.write({ $case: 'textDelta', value: textDeltaToProto(delta) });
  }

  /** Sends the terminal message and ends the call with OK. */
  finish(output: TerminalOutput): void {
    this.write(output);
    if (!this.options.call.cancelled) this.options.call.end();
  }

  private write(output: NonNullable<TurnOutput['output']>): void {
    // grpc-js buffers what the peer has not read yet. Steps and trusted calls each wait for
    // an answer before the next, so only text deltas can queue, bounded by one model reply.
    if (!this.options.call.cancelled) this.options.call.write({ output });
  }

  /**
   * A `model_delta` or `model_answer` for no waiting call: one of a step this call relayed
   * and stopped waiting for (a cancel) is ignored; any other is a protocol mistake.
   */
  private lateRelay(call: RelayKeyParts, what: string): void {
    if (this.relayed.has(relayKey(call))) return;
    this.violate(`${what} ${describeRelay(call)}, which was not relayed`);
  }

  private violate(what: string): void {
    const error = new AppError(
      'invalid_argument',
      `turn ${this.options.turnId}: protocol mistake from the control plane: ${what}`,
      { details: { turn: this.options.turnId } },
    );
    this.options.log.warn({ err: error }, 'turn protocol mistake');
    this.violation ??= error;
    this.abort(error);
    this.closeInput(error);
  }

  private wait<K, T>(
    waiters: Map<K, Waiter<T>>,
    key: K,
    signal: AbortSignal,
    onTimeout: () => AppError,
  ): Promise<T> {
    const closed = this.inputClosed;
    if (closed !== undefined) return Promise.reject(closed);
    return waitForAnswer(waiters, key, signal, onTimeout, this.options.turnId);
  }
}

function ackTimeout(turnId: string, step: TurnStep, sequence: number): AppError {
  return new AppError(
    'deadline_exceeded',
    `turn ${turnId}: the control plane did not ack step ${sequence} (${step.kind}) in time; the journal append may or may not have happened, so recover the turn from the journal`,
    { details: { turn: turnId, sequence, kind: step.kind } },
  );
}

function relayCancelled(call: RelayedCall): AppError {
  return new AppError('cancelled', `the relayed model call ${describeRelay(call)} was cancelled`);
}

/** What names one relayed call: its thread ('' for the turn's own) and its step in it. */
interface RelayKeyParts {
  readonly step: number;
  readonly thread: string;
}

function relayKey({ step, thread }: RelayKeyParts): string {
  return `${thread}\u0000${step}`;
}

function describeRelay({ step, thread }: RelayKeyParts): string {
  return thread === '' ? `of step ${step}` : `of step ${step} in thread ${thread}`;
}
