/**
 * The harness call (docs/turns.md "One message", 6): what the harness is given, and the
 * checks on what it sends before anything of it is committed. Pure.
 */
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
import {
  ToolHost,
  type Step,
  type ToolSpec,
  type TurnStart,
} from '../../proto/gen/polychrome/harness/v1/harness';
import { DEFAULT_MAX_STEPS } from '../api/v1alpha1/conversation-values';
import { type Conversation } from '../api/v1alpha1/conversation-types';
import { committedHistory, committedSummary, recordedSteps } from './turn-projections';
import { type JournalView, type TurnView } from './journal-view-types';
import { ASK_USER_TOOL, HANDOFF_TOOL, hex } from './plan-common';
import { checkRecording, type RecordingFacts } from './recording-check';
import type { ModelRoute } from './model-relay-port';

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
  const spec = conversation.spec;
  const rules = spec.tools?.requireApproval ?? [];
  const names = [
    ...(spec.tools?.builtin ?? []),
    ASK_USER_TOOL,
    ...((spec.agent?.handoffTargets ?? []).length > 0 ? [HANDOFF_TOOL] : []),
  ];
  const tools: ToolSpec[] = names.map((name) => ({
    name,
    description: '',
    inputSchemaJson: '',
    effect: 0,
    needsApproval: needsApproval(name, rules),
    approvalReason: '',
    host: ToolHost.TOOL_HOST_HARNESS,
  }));
  return {
    conversationId: conversation.metadata.uid ?? '',
    turnId: turn.turnId,
    attempt,
    agent: {
      model: spec.agent?.model ?? '',
      systemPrompt: spec.agent?.systemPrompt ?? '',
      name: spec.agent?.name ?? '',
      // The runner marks a relayed agent (model-routes.ts relayedStart).
      relayModelCalls: false,
      provider: '',
      maxTokens: 0,
    },
    history: committedHistory(view, turn),
    userMessage: turn.text,
    budget: {
      deploymentMaxSteps,
      conversationMaxSteps: spec.agent?.maxSteps ?? DEFAULT_MAX_STEPS,
      directiveMaxSteps: turn.directive?.maxSteps ?? 0,
    },
    tools,
    approvalAnswers: turn.approvalResponses.map((r) => r.response),
    questionAnswers: turn.questionResponses.map((r) => r.response),
    recordedSteps: recordedSteps(turn),
    requiredApprover: turn.directive?.requiredApprover ?? '',
    recordedConfigSha256: Buffer.from(view.newestAgentConfig?.sha256 ?? '', 'hex'),
    summary: committedSummary(view, turn),
    // Memory goes to the model only with the tool that keeps it (docs/turns.md, "Memory").
    ...(names.includes(MEMORY_TOOL)
      ? {
          memory: memoryInOrder(view.memory).map(({ key, value }) => ({ key, value })),
          memoryBudgetBytes,
        }
      : { memory: [], memoryBudgetBytes: 0 }),
  };
}

// ---- what the harness sends ----

/** The control plane's facts about a dispatched turn that the harness must agree with. */
export interface DispatchedTurn extends RecordingFacts {
  readonly turn: TurnView;
  readonly conversation: Conversation;
  /** The agents whose model calls the control plane makes (plan-model-request.ts); absent: none. */
  readonly modelRoutes?: ReadonlyMap<string, ModelRoute>;
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
  switch (content.$case) {
    case 'modelCall':
    case 'agentConfig':
      return undefined;
    case 'toolCall':
      return checkToolCall(dispatched, content.value);
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
    case 'agentHandoff': {
      // The control plane gives a turn no agents to hand off to yet, so a harness that
      // moves a turn to another agent made the agent up (docs/turns.md, "Handoffs").
      const handoff = content.value;
      return `agent_handoff ${handoff.toolCallId} moves turn ${turn.turnId} from ${handoff.fromAgent || '(unnamed)'} to ${handoff.toAgent || '(unnamed)'}, but this turn was dispatched with no agent to hand off to`;
    }
  }
}

/** Why a `tool_call` the harness sends runs a gated tool without its approval. */
function checkToolCall({ turn, conversation }: DispatchedTurn, call: ToolCall): string | undefined {
  if (call.approvalRequestId === '') {
    // The harness's own rule (common/approval-rules.ts): `server/*` gates every tool of
    // that server, so an exact-name check here would let such a call through unpaused.
    const gated = conversation.spec.tools?.requireApproval ?? [];
    return needsApproval(call.toolName, gated)
      ? `tool_call ${call.toolCallId} runs ${call.toolName}, which needs approval under spec.tools.requireApproval, without one`
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
  const expected = requestIds.approvalRequestId(turn.turnId, request.toolCallId);
  if (request.requestId !== expected) {
    return `approval_request ${request.requestId} for tool call ${request.toolCallId} should have id ${expected}`;
  }
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
