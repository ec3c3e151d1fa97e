import { Server } from '@grpc/grpc-js';
import type { Logger } from 'pino';
import { AppError, isAppError } from '../../common/errors';
import { componentLogger, LogComponent } from '../../common/log';
import {
  extractTraceMetadata,
  inSpan,
  recordActiveSpanError,
  setActiveSpanAttributes,
  SpanKind,
} from '../../common/tracing';
import {
  HarnessService,
  type TurnInput as TurnInputMessage,
} from '../../proto/gen/polychrome/harness/v1/harness';
import type { ModelProvider } from '../turn/ports/model-port';
import { tracedModel } from '../model/traced-model';
import { needsApproval } from '../../common/approval-rules';
import type { McpServerListing } from '../tools/mcp-tools';
import type { ToolRunner } from '../turn/ports/tool-port';
import { tracedTools } from '../tools/traced-tools';
import type { SignatureVerifier } from '../turn/approval-token';
import { createHistoryRequestHasher } from '../turn/agent-config';
import { requestIds as defaultRequestIds, type RequestIds } from '../../common/request-ids';
import { runTurn, type Clock, type TurnOutcome } from '../turn/run-turn';
import type { TurnInput } from '../turn/turn-machine';
import { traceContextFrom } from './call-metadata';
import { observeTurn, type HarnessMetrics } from './harness-metrics';
import { endWithError, TurnCall, type RunTurnCall } from './turn-call';
import { turnOutcomeToProto } from './turn-output-codec';
import {
  turnRequestFromProto,
  type ToolCatalog,
  type ToolReference,
  type TurnRequest,
} from './turn-start-codec';
import { isToolOfServers, offeredTools, type McpToolSource } from './turn-tools';
import { UsedApprovals } from './used-approvals';
import { ConversationBinding, startMismatch } from './conversation-binding';
import type { ServingCertificate } from '../../common/serving-certificate';
import { harnessServerCredentials } from './serving-credentials';

/**
 * The harness's gRPC server: `Harness.RunTurn`, one turn per call, one call at a time.
 *
 * Who may call: the listener speaks TLS only, presenting the certificate of the pod's
 * namespace (serving-credentials.ts), and every call must carry a per-conversation
 * credential the control plane minted (conversation-binding.ts), checked before any turn
 * state is touched. The harness serves one conversation: the first valid credential binds
 * it, and every other conversation is refused with PERMISSION_DENIED.
 */

/** What a turn runs against; built once in `main.ts`. */
export interface HarnessTurnDeps {
  /** The model for a turn; `model` is the agent's setting (empty: the harness default). */
  modelFor(model: string): ModelProvider;
  /** Runs built-in and MCP tools. */
  readonly tools: ToolRunner;
  readonly approvalVerifier: SignatureVerifier;
  /** The control plane's approval public key (raw 32 bytes). */
  readonly approvalPublicKey: Uint8Array;
  /**
   * During a key rotation, the control plane's next public key: approvals and credentials
   * signed by either key pass (docs/operator.md, "Rotating the control plane's key").
   */
  readonly approvalNextPublicKey?: Uint8Array;
  /** @default Date.now */
  readonly clock?: Clock;
  /** @default the docs/approvals.md derivation */
  readonly ids?: RequestIds;
}

/** Options of {@link HarnessServer}. */
export interface HarnessServerOptions {
  /** @default '0.0.0.0' */
  readonly host?: string;
  /** 0 lets the system pick (tests). @default 7070 */
  readonly port?: number;
  /**
   * The serving certificate of the pod's namespace (serving-credentials.ts), read again
   * while the server runs; the server stops reading it when it closes. There is no
   * plaintext listener.
   */
  readonly certificate: ServingCertificate;
  /**
   * Keys the per-conversation credential may be signed with (conversation-binding.ts):
   * the current control-plane key and, during a rotation, the next.
   * @default the approval key and, in a rotation, the next one
   */
  readonly credentialKeys?: readonly Uint8Array[];
  /** The conversation uid the pod was started for; absent: bind to the first valid call. */
  readonly conversation?: string;
  /** The pod's namespace (`HARNESS_NAMESPACE`): credentials for another are refused. */
  readonly namespace: string;
  readonly deps: HarnessTurnDeps;
  /** The root logger; the server makes its `grpc` and `turn` children. */
  readonly logger: Logger;
  readonly metrics?: HarnessMetrics;
  /** Used when `start` sets no deployment limit. @default 8 */
  readonly defaultMaxSteps?: number;
  /**
   * Deployment approval rules (`name`, `server/tool`, `server/*`; see
   * tools/approval-policy.ts): matching tools need approval whatever `start` says. They can
   * only add approvals.
   */
  readonly requireApproval?: readonly string[];
  /**
   * Tools `start` may name by reference (an empty schema): the built-in and reserved
   * tools, so the control plane need not know their definitions.
   */
  readonly toolCatalog?: ToolCatalog;
  /**
   * The harness's own MCP servers: every turn also offers their tools (turn-tools.ts),
   * listed when the turn runs. `start` may name them by reference to require approval.
   */
  readonly mcpTools?: McpToolSource;
  /** How long the first message (`start`) may take. @default 10000 */
  readonly startTimeoutMs?: number;
  /** How long one step ack (the journal append) may take. @default 30000 */
  readonly ackTimeoutMs?: number;
  /** @default 60000 */
  readonly toolTimeoutMs?: number;
  /**
   * Record the agent configuration and each model request's digest (docs/replay.md).
   * @default true
   */
  readonly recordAgentConfig?: boolean;
}

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
    const input = this.withPolicy(request.input);
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
          'polychrome.conversation.id': request.conversationId,
          'polychrome.turn.id': request.turnId,
          'polychrome.turn.attempt': request.attempt,
        },
      },
      () => this.run(call, turn, request, input, log),
    );
    void running.finally(() => {
      this.running = undefined;
      release();
    });
    return turn;
  }

  private async run(
    stream: RunTurnCall,
    turn: TurnCall,
    request: TurnRequest,
    policyInput: TurnInput,
    log: Logger,
  ): Promise<void> {
    const { deps } = this.options;
    const started = performance.now();
    const seconds = (): number => (performance.now() - started) / 1000;
    const input = await this.withMcpTools(
      policyInput,
      request.toolReferences ?? [],
      turn.signal,
      log,
    );
    log.info(
      {
        recordedSteps: input.recordedSteps.length,
        tools: input.tools.length,
        mcpTools: input.tools.length - policyInput.tools.length,
      },
      'turn started',
    );
    const model = deps.modelFor(request.model);
    const clock = deps.clock ?? { nowMs: () => Date.now() };
    const used = this.usedApprovals;
    used.noteHistory(input.recordedSteps, input.approvalAnswers);
    let outcome: TurnOutcome;
    try {
      outcome = await runTurn(
        // Recorded for replay when the provider states its parameters (docs/replay.md).
        model.parameters === undefined || this.options.recordAgentConfig === false
          ? input
          : { ...input, model: model.parameters },
        {
          model: tracedModel(model, request.model),
          tools: tracedTools(deps.tools),
          trustedTools: tracedTools(turn.trustedTools),
          steps: {
            commit: async (step, options) => {
              await turn.sink.commit(step, options);
              used.noteStep(step, input.approvalAnswers);
            },
            ...(turn.sink.carry === undefined ? {} : { carry: turn.sink.carry.bind(turn.sink) }),
          },
          clock,
          ids: deps.ids ?? defaultRequestIds,
          approvalVerifier: deps.approvalVerifier,
          approvalPublicKey: trustedKeys(deps),
          approvalUse: used.useFor(request.conversationId, clock.nowMs()),
          ...(this.options.ackTimeoutMs === undefined
            ? {}
            : { commitTimeoutMs: this.options.ackTimeoutMs }),
          ...(this.options.toolTimeoutMs === undefined
            ? {}
            : { toolTimeoutMs: this.options.toolTimeoutMs }),
          onTextDelta: (delta) => turn.sendDelta(delta),
          requestSha256: this.requestHasher,
        },
        turn.signal,
      );
    } catch (error) {
      const sent = endWithError(stream, turn.protocolViolation ?? error);
      recordActiveSpanError(error);
      if (this.options.metrics !== undefined) observeTurn(this.options.metrics, 'error', seconds());
      // Logged here and not rethrown: the status already told the control plane.
      log.error({ err: error, code: sent.code }, 'turn call failed');
      return;
    }
    if (turn.protocolViolation !== undefined) {
      endWithError(stream, turn.protocolViolation);
      recordActiveSpanError(turn.protocolViolation);
      if (this.options.metrics !== undefined) observeTurn(this.options.metrics, 'error', seconds());
      return;
    }
    turn.finish(turnOutcomeToProto(outcome, request.turnId));
    setActiveSpanAttributes({ 'polychrome.turn.outcome': outcome.kind });
    if (this.options.metrics !== undefined) {
      observeTurn(this.options.metrics, outcome.kind, seconds());
    }
    log.info({ outcome: outcome.kind, seconds: seconds() }, 'turn ended');
  }

  /**
   * The turn's tools plus those of the harness's MCP servers (turn-tools.ts). Never
   * rejects: a server that cannot be listed is left out of this turn and logged, and the
   * turn runs with the rest.
   */
  private async withMcpTools(
    input: TurnInput,
    references: readonly ToolReference[],
    signal: AbortSignal,
    log: Logger,
  ): Promise<TurnInput> {
    const source = this.options.mcpTools;
    if (source === undefined) return input;
    let listings: readonly McpServerListing[];
    try {
      listings = await source.listToolsByServer(signal);
    } catch (error) {
      const why = isAppError(error)
        ? error
        : new AppError('unavailable', 'the MCP tools could not be listed', { cause: error });
      listings = source.serverNames.map((server) => ({ server, error: why }));
    }
    const offered = offeredTools(
      input.tools,
      listings,
      references,
      this.options.requireApproval ?? [],
    );
    // A cancelled turn fails its listings too; runTurn reports the cancel, so no warning.
    if (!signal.aborted) {
      for (const { server, error } of offered.unlisted) {
        log.warn(
          { server, reason: error.message, err: error },
          'MCP server left out of this turn: its tools could not be listed',
        );
      }
      for (const reference of offered.unresolved) {
        log.warn(
          { tool: reference.name },
          'tool named by reference left out of this turn: no listed MCP server has it',
        );
      }
    }
    return { ...input, tools: offered.tools };
  }

  /** Deployment policy on top of what the control plane sent. */
  private withPolicy(input: TurnInput): TurnInput {
    const rules = this.options.requireApproval ?? [];
    return {
      ...input,
      budget: {
        ...input.budget,
        deployment: input.budget.deployment ?? this.options.defaultMaxSteps,
      },
      tools: input.tools.map((tool) =>
        !tool.needsApproval && needsApproval(tool.name, rules)
          ? { ...tool, needsApproval: true }
          : tool,
      ),
    };
  }
}

/** The control plane's keys the harness trusts: the current one and, in a rotation, the next. */
function trustedKeys(deps: HarnessTurnDeps): readonly Uint8Array[] {
  const next = deps.approvalNextPublicKey;
  return next === undefined ? [deps.approvalPublicKey] : [deps.approvalPublicKey, next];
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
