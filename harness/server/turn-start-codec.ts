import { chargeFactsOf, chargeProtoOf } from '../../common/payment-approval';
import {
  Role as ProtoRole,
  type HistoryBlock,
  type HistoryMessage,
  type TurnStart,
} from '../../proto/gen/polychrome/harness/v1/harness';
import { canonicalJson } from '../../common/canonical-json';
import type { ContentBlock, Message } from '../../common/model/model-port';
import { invalidField, jsonObjectField } from '../turn/proto-fields';
import {
  approvalAnswerFromProto,
  approvalAnswerToProto,
  questionAnswerFromProto,
  questionAnswerToProto,
} from '../turn/request-codec';
import { turnStepFromProto, turnStepToProto } from '../turn/step-codec';
import type { TurnInput } from '../turn/turn-machine';
import {
  toolReferenceToProto,
  toolsFromProto,
  turnToolToProto,
  type ToolCatalog,
  type ToolReference,
} from './tool-spec-codec';
import {
  agentsFromProto,
  agentsToProto,
  agentCatalog,
  type AgentsOfRequest,
} from './turn-agents-codec';
import type { RelaySettings } from '../model/relayed-model';
import { relaySettingsFromProto, relaySettingsToProto } from './relay-codec';

/**
 * The `start` of a `Harness.RunTurn` call (harness.v1 `TurnStart`: the turn's input, its
 * history and its tools) to and from the turn loop's input: one `toProto`/`fromProto` pair
 * per message (STYLE.md §1). A `fromProto` checks what proto3 cannot and throws
 * `invalid_argument` naming the field, because the input comes from another process.
 */

/**
 * A turn as the control plane dispatches it: the loop's input plus who and where; for a
 * turn dispatched with agents (`TurnStart.agents`), each agent's MCP tool references and
 * model settings (absent for a single inline agent).
 */
export interface TurnRequest extends AgentsOfRequest {
  readonly conversationId: string;
  readonly turnId: string;
  readonly attempt: number;
  /** The model the agent uses; empty lets the harness pick its configured default. */
  readonly model: string;
  /** Present: the control plane makes the agent's model calls (AgentSettings fields 4 to 6). */
  readonly relay?: RelaySettings;
  readonly input: TurnInput;
  /**
   * By-reference specs `turnRequestFromProto` left for the harness to resolve when the turn
   * runs (tools of its MCP servers, listed then); not in `input.tools`. Absent when none.
   */
  readonly toolReferences?: readonly ToolReference[];
}

/**
 * A history block to proto.
 *
 * @throws AppError `invalid_argument` when tool input cannot be written as JSON.
 */
export function historyBlockToProto(block: ContentBlock): HistoryBlock {
  switch (block.type) {
    case 'text':
      return { block: { $case: 'text', value: block.text } };
    case 'tool_use':
      return {
        block: {
          $case: 'toolUse',
          value: { toolCallId: block.id, name: block.name, argsJson: canonicalJson(block.input) },
        },
      };
    case 'tool_result':
      return {
        block: {
          $case: 'toolResult',
          value: { toolCallId: block.toolUseId, content: block.content, isError: block.isError },
        },
      };
    default: {
      const never: never = block;
      return never;
    }
  }
}

/**
 * Proto `HistoryBlock` to a content block.
 *
 * @throws AppError `invalid_argument` when the oneof is empty or tool args are not a JSON object.
 */
export function historyBlockFromProto(block: HistoryBlock, field: string): ContentBlock {
  const value = block.block;
  switch (value?.$case) {
    case 'text':
      return { type: 'text', text: value.value };
    case 'toolUse':
      return {
        type: 'tool_use',
        id: value.value.toolCallId,
        name: value.value.name,
        input: jsonObjectField(value.value.argsJson, `${field}.tool_use.args_json`),
      };
    case 'toolResult':
      return {
        type: 'tool_result',
        toolUseId: value.value.toolCallId,
        content: value.value.content,
        isError: value.value.isError,
      };
    default:
      throw invalidField(field, 'block has no text, tool_use or tool_result');
  }
}

/**
 * A history message to proto.
 *
 * @throws AppError `invalid_argument` when tool input cannot be written as JSON.
 */
export function messageToProto(message: Message): HistoryMessage {
  return {
    role: message.role === 'user' ? ProtoRole.ROLE_USER : ProtoRole.ROLE_ASSISTANT,
    content: message.content.map(historyBlockToProto),
  };
}

/**
 * Proto `HistoryMessage` to a message.
 *
 * @throws AppError `invalid_argument` for an unspecified role or a malformed block.
 */
export function messageFromProto(message: HistoryMessage, field = 'message'): Message {
  let role: Message['role'];
  switch (message.role) {
    case ProtoRole.ROLE_USER:
      role = 'user';
      break;
    case ProtoRole.ROLE_ASSISTANT:
      role = 'assistant';
      break;
    default:
      throw invalidField(`${field}.role`, 'must be USER or ASSISTANT');
  }
  return {
    role,
    content: message.content.map((block, i) =>
      historyBlockFromProto(block, `${field}.content[${i}]`),
    ),
  };
}

/**
 * A turn request to proto `TurnStart`. Tool references follow the full tools.
 *
 * @throws AppError `invalid_argument` when tool schemas or inputs cannot be written as JSON.
 */
export function turnRequestToProto(request: TurnRequest): TurnStart {
  const { input } = request;
  return {
    conversationId: request.conversationId,
    turnId: request.turnId,
    attempt: request.attempt,
    agent: {
      model: request.model,
      systemPrompt: input.system ?? '',
      name: request.input.agentName ?? '',
      ...relaySettingsToProto(request.relay),
    },
    history: input.history.map(messageToProto),
    userMessage: input.userMessage,
    budget: {
      deploymentMaxSteps: input.budget.deployment ?? 0,
      conversationMaxSteps: input.budget.conversation ?? 0,
      directiveMaxSteps: input.budget.directive ?? 0,
    },
    tools: [
      ...input.tools.map(turnToolToProto),
      ...(request.toolReferences ?? []).map(toolReferenceToProto),
    ],
    approvalAnswers: input.approvalAnswers.map(approvalAnswerToProto),
    questionAnswers: input.questionAnswers.map(questionAnswerToProto),
    recordedSteps: input.recordedSteps.map((step) => turnStepToProto(step, 0)),
    requiredApprover: input.requiredApprover ?? '',
    recordedConfigSha256: Buffer.from(input.recordedConfigSha256 ?? '', 'hex'),
    summary: input.summary ?? '',
    memory: (input.memory ?? []).map(({ key, value }) => ({ key, value })),
    memoryBudgetBytes: input.memoryBudgetBytes ?? 0,
    agents: agentsToProto(request),
    paymentCharges: (input.paymentCharges ?? []).map(chargeProtoOf),
    requestTimes: (input.requestTimes ?? []).map(({ requestId, requestedAtMs }) => ({
      requestId,
      requestedAtMs,
    })),
  };
}

/**
 * Proto `TurnStart` to a turn request. Budget limits of 0 and an empty system prompt or
 * required approver are unset. A by-reference tool spec is taken from `catalog`; one the
 * catalog lacks but `deferred` accepts (a tool of the harness's MCP servers, known only
 * once they are listed) goes to `toolReferences` instead of failing.
 *
 * @throws AppError `invalid_argument` naming the first malformed field (empty ids, a
 *   recorded step of another turn is left to the turn machine, which reports it as a
 *   failed turn).
 */
export function turnRequestFromProto(
  start: TurnStart,
  catalog: ToolCatalog = () => undefined,
  deferred: (name: string) => boolean = () => false,
): TurnRequest {
  if (start.conversationId === '') throw invalidField('start.conversation_id', 'is empty');
  if (start.turnId === '') throw invalidField('start.turn_id', 'is empty');
  const budget = start.budget;
  const system = start.agent?.systemPrompt ?? '';
  const agentName = start.agent?.name ?? '';
  const relay = relaySettingsFromProto(start.agent, 'start.agent');
  const roster = agentsFromProto(start, catalog, deferred);
  const { tools, toolReferences } = toolsFromProto(
    start.tools,
    'start.tools',
    agentCatalog(catalog, roster.targetsOf(agentName), roster.delegatesOf(agentName)),
    deferred,
  );
  return {
    conversationId: start.conversationId,
    turnId: start.turnId,
    attempt: start.attempt,
    model: start.agent?.model ?? '',
    ...(relay === undefined ? {} : { relay }),
    input: {
      turnId: start.turnId,
      ...(system === '' ? {} : { system }),
      // The Conversation's `spec.agent.name`: every step the agent commits names it
      // (docs/turns.md, "Handoffs"), and so does its invoke_agent span.
      ...(agentName === '' ? {} : { agentName }),
      history: start.history.map((message, i) => messageFromProto(message, `start.history[${i}]`)),
      userMessage: start.userMessage,
      tools,
      budget: {
        ...(budget === undefined || budget.deploymentMaxSteps === 0
          ? {}
          : { deployment: budget.deploymentMaxSteps }),
        ...(budget === undefined || budget.conversationMaxSteps === 0
          ? {}
          : { conversation: budget.conversationMaxSteps }),
        ...(budget === undefined || budget.directiveMaxSteps === 0
          ? {}
          : { directive: budget.directiveMaxSteps }),
      },
      recordedSteps: start.recordedSteps.map((step, i) =>
        turnStepFromProto(step, `start.recorded_steps[${i}]`),
      ),
      approvalAnswers: start.approvalAnswers.map((answer, i) =>
        approvalAnswerFromProto(answer, `start.approval_answers[${i}]`),
      ),
      questionAnswers: start.questionAnswers.map(questionAnswerFromProto),
      ...(start.requiredApprover === '' ? {} : { requiredApprover: start.requiredApprover }),
      ...(start.recordedConfigSha256.length === 0
        ? {}
        : { recordedConfigSha256: Buffer.from(start.recordedConfigSha256).toString('hex') }),
      ...(start.summary === '' ? {} : { summary: start.summary }),
      ...(start.memoryBudgetBytes === 0
        ? {}
        : {
            memoryBudgetBytes: start.memoryBudgetBytes,
            memory: start.memory.map(({ key, value }) => ({ key, value })),
          }),
      ...roster.input(agentName),
      ...(start.paymentCharges.length === 0
        ? {}
        : { paymentCharges: start.paymentCharges.map(chargeFactsOf) }),
      ...(start.requestTimes.length === 0
        ? {}
        : {
            requestTimes: start.requestTimes.map(({ requestId, requestedAtMs }) => ({
              requestId,
              requestedAtMs,
            })),
          }),
    },
    ...(toolReferences.length === 0 ? {} : { toolReferences }),
    ...roster.request(),
  };
}
