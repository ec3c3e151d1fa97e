import type { Logger } from 'pino';
import { needsApproval } from '../../common/approval-rules';
import { requestIds as defaultRequestIds } from '../../common/request-ids';
import { AppError, isAppError } from '../../common/errors';
import { recordActiveSpanError, setActiveSpanAttributes } from '../../common/tracing';
import { requestedModel, tracedModel } from '../model/traced-model';
import type { McpServerListing } from '../tools/mcp-tools';
import type { PaidToolRunner } from '../turn/ports/payment-port';
import { tracedTools } from '../tools/traced-tools';
import type { RequestHasher } from '../turn/agent-config';
import type { ModelProvider } from '../../common/model/model-port';
import type { AgentModelSettings } from '../model/relayed-model';
import { runTurn } from '../turn/run-turn';
import { type TurnOutcome } from '../turn/turn-outcome';
import type { TurnInput } from '../turn/turn-machine';
import type { TurnTool } from '../turn/turn-records';
import { AgentSpans } from './agent-spans';
import { trustedKeys, type HarnessServerOptions } from './harness-options';
import { observeTurn } from './harness-metrics';
import { endWithError, type RunTurnCall, type TurnCall } from './turn-call';
import { turnOutcomeToProto } from './turn-output-codec';
import type { TurnRequest } from './turn-start-codec';
import { offeredTools, type McpToolSource } from './turn-tools';
import { listAgentMcp } from './agent-mcp-servers';
import type { ToolReference } from './tool-spec-codec';
import type { ToolRunner } from '../turn/ports/tool-port';
import { agentModelSettings, turnModels } from './turn-models';
import type { UsedApprovals } from './used-approvals';

/**
 * One admitted `RunTurn` call run to its end (the server has claimed the turn slot): the
 * deployment's policy and the harness's MCP tools added to the turn's input, the turn loop
 * run against the model and the tools, and the outcome sent back and logged.
 */

/** What running a turn needs of the server that admitted it. */
export interface TurnRunContext {
  readonly options: HarnessServerOptions;
  /** Single-use ids of the approval answers this harness has used (used-approvals.ts). */
  readonly usedApprovals: UsedApprovals;
  /** Request digests across this conversation's turns (the history is hashed once). */
  readonly requestHasher: RequestHasher;
}

/**
 * Runs one admitted turn to its end: its MCP tools listed, the loop run against the
 * model and tools, the outcome sent and logged. A failure of the loop ends the call with
 * its status and is logged, not rethrown.
 */
export async function runTurnCall(
  context: TurnRunContext,
  stream: RunTurnCall,
  turn: TurnCall,
  request: TurnRequest,
  policyInput: TurnInput,
  log: Logger,
): Promise<void> {
  const { options, usedApprovals: used, requestHasher } = context;
  const { deps } = options;
  const started = performance.now();
  const seconds = (): number => (performance.now() - started) / 1000;
  const { input, tools, paidTools } = await withMcpTools(
    options,
    policyInput,
    request,
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
  // Each agent's model: the harness's own provider, or relayed through the control plane.
  const ownAgent = request.input.agentName ?? '';
  const settings = agentModelSettings(request);
  const modelOf = turnModels(settings, (name) => deps.modelFor(name), turn.modelChannel, ownAgent);
  const model = modelOf(ownAgent);
  const clock = deps.clock ?? { nowMs: () => Date.now() };
  used.noteHistory(input.recordedSteps, input.approvalAnswers);
  // The turn starts with its agent; a handoff enters the next (AgentSpans.enter).
  const agents = new AgentSpans({
    conversationId: request.conversationId,
    provider: model.genAi?.provider ?? '_OTHER',
    model: requestedModel(model, request.model),
  });
  agents.enter(request.input.agentName);
  let outcome: TurnOutcome;
  try {
    outcome = await runTurn(
      // Recorded for replay when the provider states its parameters (docs/replay.md).
      options.recordAgentConfig === false ? input : withModels(input, modelOf),
      {
        modelFor: tracedModels(modelOf, settings, request.model, agents),
        tools: tracedTools(tools, agents),
        trustedTools: tracedTools(turn.trustedTools, agents),
        payments: turn.payments(paidTools),
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
        ...(options.ackTimeoutMs === undefined ? {} : { commitTimeoutMs: options.ackTimeoutMs }),
        ...(options.toolTimeoutMs === undefined ? {} : { toolTimeoutMs: options.toolTimeoutMs }),
        onTextDelta: (delta) => turn.sendDelta(delta),
        // A handoff moved the turn: the next model calls are the target's (AgentSpans.enter).
        onAgent: (name) => agents.enter(name),
        // A delegate's thread: its span under the asking agent's (AgentSpans.enterThread).
        onThread: (change) =>
          change.kind === 'started'
            ? agents.enterThread(
                change.thread,
                change.agent,
                settings.get(change.agent)?.model ?? '',
                change.parentThread,
              )
            : agents.closeThread(change.thread),
        requestSha256: requestHasher,
      },
      turn.signal,
    );
  } catch (error) {
    agents.end(error);
    const sent = endWithError(stream, turn.protocolViolation ?? error);
    recordActiveSpanError(error);
    if (options.metrics !== undefined) observeTurn(options.metrics, 'error', seconds());
    // Logged here and not rethrown: the status already told the control plane.
    log.error({ err: error, code: sent.code }, 'turn call failed');
    return;
  }
  agents.end(turn.protocolViolation);
  if (turn.protocolViolation !== undefined) {
    endWithError(stream, turn.protocolViolation);
    recordActiveSpanError(turn.protocolViolation);
    if (options.metrics !== undefined) observeTurn(options.metrics, 'error', seconds());
    return;
  }
  turn.finish(turnOutcomeToProto(outcome, request.turnId));
  setActiveSpanAttributes({ 'polychrome.turn.outcome': outcome.kind });
  if (options.metrics !== undefined) {
    observeTurn(options.metrics, outcome.kind, seconds());
  }
  log.info({ outcome: outcome.kind, seconds: seconds() }, 'turn ended');
}

/**
 * Each agent's model with a span around every call (traced-model.ts), built once per
 * agent. An agent requests the model its settings name; one without settings, the turn's.
 */
function tracedModels(
  modelOf: (agent: string) => ModelProvider,
  settings: ReadonlyMap<string, AgentModelSettings>,
  requested: string,
  agents: AgentSpans,
): (agent: string) => ModelProvider {
  const traced = new Map<string, ModelProvider>();
  return (agent) => {
    let model = traced.get(agent);
    if (model === undefined) {
      model = tracedModel(modelOf(agent), settings.get(agent)?.model ?? requested, agents);
      traced.set(agent, model);
    }
    return model;
  };
}

/**
 * The turn's tools plus those of the harness's MCP servers (turn-tools.ts), and each
 * agent's own servers' tools for that agent (agent-mcp-servers.ts); with the runner of the
 * turn's tool calls. Never rejects: a server that cannot be listed is left out of this
 * turn and logged, and the turn runs with the rest.
 */
async function withMcpTools(
  options: HarnessServerOptions,
  input: TurnInput,
  request: Pick<TurnRequest, 'toolReferences' | 'agentToolReferences' | 'agentMcpServers'>,
  signal: AbortSignal,
  log: Logger,
): Promise<{ input: TurnInput; tools: ToolRunner; paidTools: PaidToolRunner | undefined }> {
  const source = options.mcpTools;
  const own = await listAgentMcp(
    options.agentMcp,
    request.agentMcpServers,
    source?.serverNames ?? [],
    signal,
  );
  for (const { agent, server } of own.shadowed) {
    log.warn(
      { agent, server },
      "agent's MCP server left out of this turn: a server of the conversation has its name",
    );
  }
  for (const { agent, server, error } of signal.aborted ? [] : own.unlisted) {
    log.warn(
      { agent, server, reason: error.message, err: error },
      "agent's MCP server left out of this turn: its tools could not be listed",
    );
  }
  const tools = own.route(options.deps.tools);
  const listings = source === undefined ? [] : await listHarnessMcp(source, signal);
  const withOwn = (agent: string, offered: readonly TurnTool[], refs: readonly ToolReference[]) =>
    offeredTools(offered, own.listingsOf(agent), refs, [
      ...(options.requireApproval ?? []),
      ...own.rulesOf(agent),
    ]);
  const references = request.toolReferences ?? [];
  const offered = offeredTools(input.tools, listings, references, options.requireApproval ?? []);
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
  // Every agent of the turn is offered the MCP tools too, under its own references, and
  // its own servers' tools after them.
  const rules = options.requireApproval ?? [];
  const agents = input.agents?.map((agent) => {
    const refs = request.agentToolReferences?.get(agent.name) ?? [];
    const shared = offeredTools(agent.tools, listings, refs, rules).tools;
    return { ...agent, tools: withOwn(agent.name, shared, refs).tools };
  });
  const answering = withOwn(input.agentName ?? '', offered.tools, references).tools;
  return {
    input: { ...input, tools: answering, ...(agents === undefined ? {} : { agents }) },
    tools,
    paidTools: own.routePaid(options.deps.paidTools),
  };
}

/** The harness's own servers' listings; a failure to list gives every server an error listing. */
async function listHarnessMcp(
  source: McpToolSource,
  signal: AbortSignal,
): Promise<readonly McpServerListing[]> {
  try {
    return await source.listToolsByServer(signal);
  } catch (error) {
    const why = isAppError(error)
      ? error
      : new AppError('unavailable', 'the MCP tools could not be listed', { cause: error });
    return source.serverNames.map((server) => ({ server, error: why }));
  }
}

/** Deployment policy on top of what the control plane sent. */
export function withPolicy(input: TurnInput, options: HarnessServerOptions): TurnInput {
  const rules = options.requireApproval ?? [];
  const gate = (tools: readonly TurnTool[]): TurnTool[] =>
    tools.map((tool) =>
      !tool.needsApproval && needsApproval(tool.name, rules)
        ? { ...tool, needsApproval: true }
        : tool,
    );
  return {
    ...input,
    budget: {
      ...input.budget,
      deployment: input.budget.deployment ?? options.defaultMaxSteps,
    },
    tools: gate(input.tools),
    ...(input.agents === undefined
      ? {}
      : { agents: input.agents.map((agent) => ({ ...agent, tools: gate(agent.tools) })) }),
  };
}

/**
 * `input` with the parameters of the provider that answers for each agent of the turn,
 * recorded in its configuration (docs/replay.md); an agent whose provider states none is
 * not recorded for replay.
 */
function withModels(input: TurnInput, modelOf: (agent: string) => ModelProvider): TurnInput {
  const own = modelOf(input.agentName ?? '').parameters;
  return {
    ...input,
    ...(own === undefined ? {} : { model: own }),
    ...(input.agents === undefined
      ? {}
      : {
          agents: input.agents.map((agent) => {
            const model = modelOf(agent.name).parameters;
            return model === undefined ? agent : { ...agent, model };
          }),
        }),
  };
}
