import { Server } from '@grpc/grpc-js';
import type { Logger } from 'pino';
import { AppError, isAppError } from '../../common/errors';
import { componentLogger, LogComponent } from '../../common/log';
import { requestIds as defaultRequestIds } from '../../common/request-ids';
import { conversationAttributes } from '../../common/genai-attributes';
import { extractTraceMetadata, inSpan, SpanKind } from '../../common/tracing';
import {
  HarnessService,
  type TurnInput as TurnInputMessage,
} from '../../proto/gen/polychrome/harness/v1/harness';
import { createHistoryRequestHasher } from '../turn/agent-config';
import { traceContextFrom } from './call-metadata';
import { ConversationBinding, startMismatch } from './conversation-binding';
import { trustedKeys, type HarnessServerOptions } from './harness-options';
import { harnessServerCredentials } from './serving-credentials';
import { endWithError, TurnCall, type RunTurnCall } from './turn-call';
import { runTurnCall, withPolicy } from './turn-run';
import { turnRequestFromProto, type TurnRequest } from './turn-start-codec';
import { isToolOfServers } from './turn-tools';
import { UsedApprovals } from './used-approvals';

/**
 * The harness's gRPC server: `Harness.RunTurn`, one turn per call, one call at a time.
 *
 * Who may call: the listener speaks TLS only, presenting the certificate of the pod's
 * namespace (serving-credentials.ts), and every call must carry a per-conversation
 * credential the control plane minted (conversation-binding.ts), checked before any turn
 * state is touched. The harness serves one conversation: the first valid credential binds
 * it, and every other conversation is refused with PERMISSION_DENIED.
 */

/** The turn in progress. */
export interface RunningTurn {
  readonly conversationId: string;
  readonly turnId: string;
  readonly attempt: number;
}

interface Running extends RunningTurn {
  readonly call: TurnCall;
  readonly done: Promise<void>;
}

const DEFAULT_PORT = 7070;
const DEFAULT_START_TIMEOUT_MS = 10_000;

/** The gRPC server. `start()` binds; `drain()`/`close()` stop it (idempotent). */
export class HarnessServer {
  /** Request digests across this conversation's turns: the history is hashed once. */
  private readonly requestHasher = createHistoryRequestHasher();
  /** Single-use ids of the approval answers this harness has used (used-approvals.ts). */
  private readonly usedApprovals: UsedApprovals;
  /** The one conversation this harness serves (conversation-binding.ts). */
  private readonly binding: ConversationBinding;
  private readonly options: HarnessServerOptions;
  private readonly log: Logger;
  private readonly server = new Server();
  private running: Running | undefined;
  private draining = false;
  private port: number | undefined;
  private stopping: Promise<void> | undefined;

  constructor(options: HarnessServerOptions) {
    this.options = options;
    this.usedApprovals = new UsedApprovals(options.deps.ids ?? defaultRequestIds);
    const clock = options.deps.clock ?? { nowMs: () => Date.now() };
    this.binding = new ConversationBinding({
      publicKeys: options.credentialKeys ?? trustedKeys(options.deps),
      verifier: options.deps.approvalVerifier,
      nowMs: () => clock.nowMs(),
      ...(options.conversation === undefined ? {} : { conversation: options.conversation }),
      namespace: options.namespace,
    });
    this.log = componentLogger(options.logger, LogComponent.Grpc);
    this.server.addService(HarnessService, {
      runTurn: (call: RunTurnCall) => this.handle(call),
    });
  }

  /**
   * Binds the listener; resolves with the bound port.
   *
   * @throws Error from grpc-js when the address cannot be bound, or when called twice.
   */
  async start(): Promise<number> {
    if (this.port !== undefined) throw new Error('harness server: start() called twice');
    const host = this.options.host ?? '0.0.0.0';
    const address = `${host.includes(':') ? `[${host}]` : host}:${this.options.port ?? DEFAULT_PORT}`;
    this.port = await new Promise<number>((resolve, reject) => {
      this.server.bindAsync(
        address,
        harnessServerCredentials(this.options.certificate),
        (error, port) => (error === null ? resolve(port) : reject(error)),
      );
    });
    this.log.info({ address, port: this.port }, 'harness server listening');
    return this.port;
  }

  /** True while the server takes turns (bound and not draining): the readiness signal. */
  isServing(): boolean {
    return this.port !== undefined && !this.draining;
  }

  /** The turn in progress, if any. */
  currentTurn(): RunningTurn | undefined {
    const running = this.running;
    return running === undefined
      ? undefined
      : {
          conversationId: running.conversationId,
          turnId: running.turnId,
          attempt: running.attempt,
        };
  }

  /**
   * Graceful stop (SIGTERM): refuse new turns (UNAVAILABLE), let the running turn finish
   * for up to `graceMs`, then cancel it so it still sends a terminal result (`cancelled`,
   * or `ambiguous` if a side-effecting call was in flight) and the control plane's journal
   * stays consistent. If even that stalls (no acks) for `abandonMs`, pending waits fail,
   * the call ends with an error status and the server is forced shut. Idempotent.
   */
  drain(graceMs: number, abandonMs = 5_000): Promise<void> {
    this.stopping ??= this.stop(graceMs, abandonMs);
    return this.stopping;
  }

  /** Stops now: cancels the running turn and shuts the listener. Idempotent. */
  close(): Promise<void> {
    return this.drain(0, 1_000);
  }

  private async stop(graceMs: number, abandonMs: number): Promise<void> {
    this.draining = true;
    const running = this.running;
    if (running !== undefined) {
      this.log.info({ turn: running.turnId, graceMs }, 'waiting for the running turn');
      if (!(await settlesWithin(running.done, graceMs))) {
        this.log.warn({ turn: running.turnId }, 'cancelling the running turn for shutdown');
        running.call.abort(new AppError('cancelled', 'the harness is shutting down'));
        if (!(await settlesWithin(running.done, abandonMs))) {
          const gone = new AppError(
            'unavailable',
            `turn ${running.turnId}: the harness shut down while waiting for the control plane`,
          );
          running.call.closeInput(gone);
          await settlesWithin(running.done, abandonMs);
        }
      }
    }
    await new Promise<void>((resolve) => {
      const force = setTimeout(() => {
        this.server.forceShutdown();
        resolve();
      }, abandonMs);
      this.server.tryShutdown(() => {
        clearTimeout(force);
        resolve();
      });
    });
    this.options.certificate.stop();
    this.log.info('harness server stopped');
  }

  private handle(call: RunTurnCall): void {
    const trace = traceContextFrom(call.metadata);
    const traceFields =
      trace === undefined ? {} : { traceparent: trace.traceparent, traceId: trace.traceId };
    const log = this.log.child(traceFields);
    const admitted = this.binding.admit(call.metadata);
    if (!admitted.ok) {
      log.warn({ reason: admitted.error.message }, 'call rejected: harness credential');
      endWithError(call, admitted.error);
      return;
    }
    if (this.draining) {
      endWithError(call, shuttingDown());
      return;
    }

    let turn: TurnCall | undefined;
    let ended = false;
    const refuse = (error: AppError): void => {
      ended = true;
      clearTimeout(startTimer);
      log.warn({ err: error }, 'turn call refused');
      endWithError(call, error);
    };
    const startTimeoutMs = this.options.startTimeoutMs ?? DEFAULT_START_TIMEOUT_MS;
    const startTimer = setTimeout(() => {
      refuse(
        new AppError(
          'deadline_exceeded',
          `no start message within ${startTimeoutMs} ms; send start first`,
        ),
      );
    }, startTimeoutMs);

    call.on('data', (message: TurnInputMessage) => {
      if (ended) return;
      if (turn !== undefined) {
        turn.onInput(message);
        return;
      }
      clearTimeout(startTimer);
      if (message.input?.$case !== 'start') {
        refuse(new AppError('invalid_argument', 'the first message of a call must be start'));
        return;
      }
      let request: TurnRequest;
      try {
        request = turnRequestFromProto(message.input.value, this.options.toolCatalog, (name) =>
          this.isMcpToolName(name),
        );
      } catch (error) {
        refuse(
          isAppError(error)
            ? error
            : new AppError('invalid_argument', 'start could not be read', { cause: error }),
        );
        return;
      }
      if (request.conversationId !== admitted.conversation) {
        refuse(startMismatch(admitted.conversation, request.conversationId));
        return;
      }
      const busy = this.running;
      if (busy !== undefined) {
        refuse(
          new AppError(
            'failed_precondition',
            `the harness is running turn ${busy.turnId} (attempt ${busy.attempt}) of conversation ${busy.conversationId}; it runs one turn at a time, so wait for that call to end`,
            { details: { runningTurn: busy.turnId, conversation: busy.conversationId } },
          ),
        );
        return;
      }
      if (this.draining) {
        refuse(shuttingDown());
        return;
      }
      turn = this.begin(call, request, log);
    });
    call.on('end', () => {
      clearTimeout(startTimer);
      turn?.closeInput(
        new AppError('unavailable', 'the control plane closed its side of the call mid-turn'),
      );
    });
    call.on('cancelled', () => {
      clearTimeout(startTimer);
      ended = turn === undefined;
      const cancelled = new AppError('cancelled', 'the control plane cancelled the call');
      turn?.abort(cancelled);
      turn?.closeInput(cancelled);
    });
    call.on('error', (error: unknown) => {
      log.debug({ err: error }, 'call stream error');
    });
  }

  /** True when `name` is `<server>/<tool>` of one of the harness's MCP servers. */
  private isMcpToolName(name: string): boolean {
    const source = this.options.mcpTools;
    return source !== undefined && isToolOfServers(name, source.serverNames);
  }

  /**
   * Claims the one turn slot (synchronously, so two calls cannot both win) and runs. MCP
   * tools are listed in `run`, after the claim, because listing waits on I/O.
   */
  private begin(call: RunTurnCall, request: TurnRequest, callLog: Logger): TurnCall {
    const log = callLog.child({
      component: LogComponent.Turn,
      conversation: request.conversationId,
      turn: request.turnId,
      attempt: request.attempt,
    });
    const input = withPolicy(request.input, this.options);
    const turn = new TurnCall({
      call,
      turnId: request.turnId,
      // The control plane's tools only: TurnCall needs them for the effect of a
      // control-plane hosted call, and MCP tools run in the harness.
      tools: input.tools,
      log,
      ...(this.options.metrics === undefined ? {} : { metrics: this.options.metrics }),
    });
    let release = (): void => undefined;
    const done = new Promise<void>((resolve) => {
      release = resolve;
    });
    this.running = {
      conversationId: request.conversationId,
      turnId: request.turnId,
      attempt: request.attempt,
      call: turn,
      done,
    };
    const running = inSpan(
      'polychrome.harness.v1.Harness/RunTurn',
      {
        kind: SpanKind.SERVER,
        parent: extractTraceMetadata(call.metadata),
        attributes: {
          'rpc.system': 'grpc',
          'rpc.service': 'polychrome.harness.v1.Harness',
          'rpc.method': 'RunTurn',
          ...conversationAttributes(request.conversationId),
          'polychrome.turn.id': request.turnId,
          'polychrome.turn.attempt': request.attempt,
        },
      },
      () =>
        runTurnCall(
          {
            options: this.options,
            usedApprovals: this.usedApprovals,
            requestHasher: this.requestHasher,
          },
          call,
          turn,
          request,
          input,
          log,
        ),
    );
    void running.finally(() => {
      this.running = undefined;
      release();
    });
    return turn;
  }
}

function shuttingDown(): AppError {
  return new AppError(
    'unavailable',
    'the harness is shutting down and takes no new turn; dispatch the turn again',
  );
}

async function settlesWithin(promise: Promise<void>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<boolean>((resolve) => {
    timer = setTimeout(() => resolve(false), ms);
  });
  try {
    return await Promise.race([promise.then(() => true), timeout]);
  } finally {
    clearTimeout(timer);
  }
}
