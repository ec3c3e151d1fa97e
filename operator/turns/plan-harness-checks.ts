/**
 * The harness call (docs/turns.md "One message", 6): what the harness is given, and the
 * checks on what it sends before anything of it is committed. Pure.
 */
import {
  chargeFactsOf,
  PAYMENT_APPROVAL_TOOL,
  paymentApprovalArgsJson,
} from '../../common/payment-approval';
import { chargeOfCall } from './plan-payments';
import { approvalArgsSha256 } from '../../common/approval-bytes';
import { needsApproval } from '../../common/approval-rules';
import { DEFAULT_MEMORY_BUDGET_BYTES, MEMORY_TOOL, memoryInOrder } from '../../common/memory';
import { requestIds } from '../../common/request-ids';
import {
  ApprovalDecision as ProtoDecision,
  type ApprovalRequest,
  type QuestionRequest,
  type ToolCall,
} from '../../proto/gen/polychrome/events/v1/events';
import type {
  AgentSettings,
  DispatchedAgent,
  Step,
  ToolSpec,
  TurnStart,
} from '../../proto/gen/polychrome/harness/v1/harness';
import { rosterAgent, type AgentRoster } from './agent-roster';
import {
  checkStepAgent,
  dispatchedAgentsOf,
  inlineToolSpecs,
  settingsOf,
  startingAgent,
  turnRoster,
} from './plan-agents';
import { checkConfigOffered, checkToolOffered, type AgentToolFacts } from './plan-agent-tools';
import { checkLineage } from './plan-lineage';
import { DEFAULT_MAX_STEPS } from '../api/v1alpha1/conversation-values';
import { type Conversation } from '../api/v1alpha1/conversation-types';
import {
  committedHistory,
  committedSummary,
  recordedSteps,
  requestTimes,
} from './turn-projections';
import { type JournalView, type TurnView } from './journal-view-types';
import { hex } from './plan-common';
import { checkRecording, type RecordingFacts } from './recording-check';

/**
 * What the harness is given for a dispatched turn: the committed history (complete turns
 * only), the recorded steps and answers of earlier attempts, the step budget and the tools.
 * Built-in and reserved tools go by reference (the harness holds their definitions): the
 * agent may always ask the user; it may hand off only where targets are set. With the
 * `memory` tool the turn also gets the memory as it stands and the deployment's budget.
 */
export function turnStartOf(
  conversation: Conversation,
  view: JournalView,
  turn: TurnView,
  attempt: number,
  limits: { readonly deploymentMaxSteps?: number; readonly memoryBudgetBytes?: number },
): TurnStart {
  const { deploymentMaxSteps = 0, memoryBudgetBytes = DEFAULT_MEMORY_BUDGET_BYTES } = limits;
  const agents = agentsOfTurn(conversation, view, turn);
  const { starting } = agents;
  return {
    conversationId: conversation.metadata.uid ?? '',
    turnId: turn.turnId,
    attempt,
    agent: starting.settings,
    history: committedHistory(view, turn),
    userMessage: turn.text,
    budget: {
      deploymentMaxSteps,
      conversationMaxSteps: starting.maxSteps,
      directiveMaxSteps: turn.directive?.maxSteps ?? 0,
    },
    tools: starting.tools,
    approvalAnswers: turn.approvalResponses.map((r) => r.response),
    questionAnswers: turn.questionResponses.map((r) => r.response),
    recordedSteps: recordedSteps(turn),
    requiredApprover: turn.directive?.requiredApprover ?? '',
    recordedConfigSha256: Buffer.from(view.newestAgentConfig?.sha256 ?? '', 'hex'),
    summary: committedSummary(view, turn),
    // A call that met a 402 waits for its payment, never runs again (docs/payments.md).
    paymentCharges: turn.payments.map((payment) => payment.charge),
    // Memory goes to the model only with the tool that keeps it (docs/turns.md, "Memory").
    ...(agents.all.some(({ tools }) => tools.some(({ name }) => name === MEMORY_TOOL))
      ? {
          memory: memoryInOrder(view.memory).map(({ key, value }) => ({ key, value })),
          memoryBudgetBytes,
        }
      : { memory: [], memoryBudgetBytes: 0 }),
    agents: agents.dispatched,
    requestTimes: requestTimes(turn),
  };
}

/** The agent a turn starts with, and every agent it may run under, as the harness gets them. */
interface TurnAgents {
  readonly starting: {
    readonly settings: AgentSettings;
    readonly tools: ToolSpec[];
    readonly maxSteps: number;
  };
  readonly all: readonly { readonly tools: readonly ToolSpec[] }[];
  /** `TurnStart.agents`: empty for an inline agent. */
  readonly dispatched: DispatchedAgent[];
}

/**
 * A Conversation that names an Agent: the roster the turn's first dispatch recorded and
 * the agent it starts with (plan-agents.ts). An inline agent: `spec.agent` and
 * `spec.tools`, where `__handoff_to` is offered when targets are set and ends the turn.
 */
function agentsOfTurn(conversation: Conversation, view: JournalView, turn: TurnView): TurnAgents {
  const roster = turnRoster(view, turn);
  if (roster !== undefined) {
    const first = startingAgent(view, turn, roster);
    const dispatched = dispatchedAgentsOf(roster);
    const own = dispatched.find(({ name }) => name === first.name);
    return {
      starting: {
        settings: own?.settings ?? settingsOf(first),
        tools: own?.tools ?? [],
        maxSteps: first.maxSteps,
      },
      all: dispatched,
      dispatched,
    };
  }
  const spec = conversation.spec;
  const tools = inlineToolSpecs(spec);
  const settings = {
    model: spec.agent?.model ?? '',
    systemPrompt: spec.agent?.systemPrompt ?? '',
    name: spec.agent?.name ?? '',
    // The runner marks a relayed agent (plan-model-request.ts relayedStart).
    relayModelCalls: false,
    provider: '',
    maxTokens: 0,
  };
  const starting = { settings, tools, maxSteps: spec.agent?.maxSteps ?? DEFAULT_MAX_STEPS };
  return { starting, all: [starting], dispatched: [] };
}

// ---- what the harness sends ----

/** The control plane's facts about a dispatched turn that the harness must agree with. */
export interface DispatchedTurn extends RecordingFacts, AgentToolFacts {
  readonly turn: TurnView;
  readonly conversation: Conversation;
  /** The roster the turn runs under (plan-agents.ts `turnRoster`); absent: an inline agent. */
  readonly roster?: AgentRoster;
}

/**
 * Why a step the harness asks to commit is not what this turn can have produced, or
 * `undefined` when it is acceptable. The harness is less trusted than the control plane:
 * ids, tool names, argument digests and approvals it names are checked against the
 * dispatched turn and its recorded answers before anything is committed.
 */
export function checkStep(dispatched: DispatchedTurn, step: Step): string | undefined {
  const { turn } = dispatched;
  const content = step.step;
  if (content === undefined) return `step ${step.sequence} has no content`;
  const unrecorded = checkRecording(dispatched, step);
  if (unrecorded !== undefined) return unrecorded;
  const turnId = content.value.turnId;
  if (turnId !== turn.turnId) {
    return `a ${stepKind(content.$case)} step names turn ${turnId || '(none)'}, but turn ${turn.turnId} was dispatched`;
  }
  const stray =
    checkStepAgent(dispatched.roster, turn.turnId, content) ?? checkLineage(turn, content);
  if (stray !== undefined) return stray;
  switch (content.$case) {
    case 'modelCall':
    case 'agentHandoff':
      return undefined;
    case 'agentConfig':
      return checkConfigOffered(dispatched, content.value);
    case 'toolCall':
      return (
        checkToolOffered(dispatched, content.value) ?? checkToolCall(dispatched, content.value)
      );
    case 'toolResult': {
      const result = content.value;
      if (!result.denied) return undefined;
      const deniedCall = turn.approvalRequests.some(
        ({ request }) =>
          request.toolCallId === result.toolCallId &&
          turn.approvalResponses.some(
            ({ response }) =>
              response.requestId === request.requestId &&
              response.decision === ProtoDecision.APPROVAL_DECISION_DENIED,
          ),
      );
      return deniedCall
        ? undefined
        : `tool_result ${result.toolCallId} says it was denied, but no denial was given for it`;
    }
  }
}

/** Why a `tool_call` the harness sends runs a gated tool without its approval. */
function checkToolCall(
  { turn, conversation, roster }: DispatchedTurn,
  call: ToolCall,
): string | undefined {
  if (call.approvalRequestId === '') {
    // The harness's own rule (common/approval-rules.ts): `server/*` gates every tool of
    // that server, so an exact-name check here would let such a call through unpaused.
    // Under a roster the calling agent's rules hold (its Agent's and the Conversation's).
    const gated =
      roster === undefined
        ? (conversation.spec.tools?.requireApproval ?? [])
        : (rosterAgent(roster, call.agent)?.requireApproval ?? []);
    const where =
      roster === undefined ? 'spec.tools.requireApproval' : `agent ${call.agent}'s rules`;
    return needsApproval(call.toolName, gated)
      ? `tool_call ${call.toolCallId} runs ${call.toolName}, which needs approval under ${where}, without one`
      : undefined;
  }
  const expected = requestIds.approvalRequestId(turn.turnId, call.toolCallId);
  if (call.approvalRequestId !== expected) {
    return `tool_call ${call.toolCallId} names approval ${call.approvalRequestId}, but its approval id is ${expected}`;
  }
  const digest = hex(approvalArgsSha256(call.argsJson));
  const approved = turn.approvalResponses.some(
    ({ response }) =>
      response.requestId === call.approvalRequestId &&
      response.decision === ProtoDecision.APPROVAL_DECISION_APPROVED &&
      response.toolName === call.toolName &&
      hex(response.argsSha256) === digest,
  );
  return approved
    ? undefined
    : `tool_call ${call.toolCallId} claims approval ${call.approvalRequestId} for ${call.toolName} with these arguments, but no such approval was given`;
}

function stepKind(kind: NonNullable<Step['step']>['$case']): string {
  return kind.replace(/[A-Z]/g, (letter) => `_${letter.toLowerCase()}`);
}

/** Why an approval request the harness paused with is not this turn's to make. */
export function checkApprovalRequest(
  dispatched: DispatchedTurn,
  request: ApprovalRequest,
): string | undefined {
  const { turn } = dispatched;
  if (request.turnId !== turn.turnId) {
    return `approval_request ${request.requestId} names turn ${request.turnId || '(none)'}, but turn ${turn.turnId} was dispatched`;
  }
  const payment = request.toolName === PAYMENT_APPROVAL_TOOL;
  const expected = payment
    ? requestIds.paymentApprovalRequestId(turn.turnId, request.toolCallId)
    : requestIds.approvalRequestId(turn.turnId, request.toolCallId);
  if (request.requestId !== expected) {
    return `approval_request ${request.requestId} for tool call ${request.toolCallId} should have id ${expected}`;
  }
  const unpaid = payment ? paymentRequestProblem(turn, request) : undefined;
  if (unpaid !== undefined) return unpaid;
  if (hex(request.argsSha256) !== hex(approvalArgsSha256(request.argsJson))) {
    return `approval_request ${request.requestId}: args_sha256 is not the SHA-256 of its args_json`;
  }
  try {
    JSON.parse(request.argsJson);
  } catch {
    return `approval_request ${request.requestId}: args_json is not JSON`;
  }
  const approver = turn.directive?.requiredApprover ?? '';
  if (request.requiredApprover !== approver) {
    return `approval_request ${request.requestId} names required approver ${request.requiredApprover || '(none)'}, but the turn's directive names ${approver || 'none'}`;
  }
  return undefined;
}

/**
 * A payment's approval request shows exactly the committed charge of its call (the rule in
 * common/payment-approval.ts): a harness cannot ask a person to approve other fields.
 */
function paymentRequestProblem(turn: TurnView, request: ApprovalRequest): string | undefined {
  const charged = chargeOfCall(turn, request.toolCallId);
  if (charged === undefined) {
    return `approval_request ${request.requestId} asks for a payment of tool call ${request.toolCallId}, which has no committed charge`;
  }
  return request.argsJson === paymentApprovalArgsJson(chargeFactsOf(charged.charge))
    ? undefined
    : `approval_request ${request.requestId} shows other fields than the committed charge of tool call ${request.toolCallId}`;
}

export function checkQuestionRequest(
  dispatched: DispatchedTurn,
  request: QuestionRequest,
): string | undefined {
  const { turn } = dispatched;
  if (request.turnId !== turn.turnId) {
    return `question_request ${request.requestId} names turn ${request.turnId || '(none)'}, but turn ${turn.turnId} was dispatched`;
  }
  const expected = requestIds.questionRequestId(turn.turnId, request.toolCallId);
  return request.requestId === expected
    ? undefined
    : `question_request ${request.requestId} for tool call ${request.toolCallId} should have id ${expected}`;
}
