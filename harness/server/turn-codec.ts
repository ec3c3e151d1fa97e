import type { ApprovalDecision as DomainApprovalDecision } from '../../common/approval-bytes';
import { canonicalJson, isJsonObject, type JsonObject } from '../../common/canonical-json';
import { AppError, isErrorCode } from '../../common/errors';
import {
  ApprovalDecision,
  ToolEffect as ProtoToolEffect,
  type AgentConfig,
  type ApprovalRequest,
  type ApprovalResponse,
  type ContentBlock as ProtoContentBlock,
  type Handoff,
  type ModelCall,
  type QuestionRequest,
  type QuestionResponse,
  type ToolCall,
  type ToolResult,
} from '../../proto/gen/polychrome/events/v1/events';
import {
  Role as ProtoRole,
  ToolHost as ProtoToolHost,
  type HistoryBlock,
  type HistoryMessage,
  type Step,
  type TextDelta as ProtoTextDelta,
  type ToolSpec,
  type TrustedToolCall,
  type TrustedToolResult,
  type TurnOutput,
  type TurnStart,
} from '../../proto/gen/polychrome/harness/v1/harness';
import { StopReason, type ContentBlock, type Message, type Usage } from '../turn/ports/model-port';
import type { ToolCallRequest, ToolOutcome } from '../turn/ports/tool-port';
import type { TextDelta, TurnOutcome } from '../turn/run-turn';
import type { TurnInput } from '../turn/turn-machine';
import type {
  AgentConfigRecord,
  ApprovalAnswer,
  ApprovalRequestRecord,
  HandoffRecord,
  ModelCallRecord,
  QuestionAnswer,
  QuestionRequestRecord,
  RecordedBlock,
  ToolCallRecord,
  ToolEffect,
  ToolResultRecord,
  TurnStep,
  TurnTool,
} from '../turn/turn-records';

/**
 * Proto messages stop here (STYLE.md §1): one `toProto`/`fromProto` pair per message
 * between harness.v1 / events.v1 and the turn loop's domain types. Everything inside the
 * harness speaks domain types. A `fromProto` checks what proto3 cannot (a oneof left
 * empty, an enum left unspecified, JSON text that is not an object) and throws
 * `invalid_argument` naming the field, because the input comes from another process.
 */

/** A turn as the control plane dispatches it: the loop's input plus who and where. */
export interface TurnRequest {
  readonly conversationId: string;
  readonly turnId: string;
  readonly attempt: number;
  /** The model the agent uses; empty lets the harness pick its configured default. */
  readonly model: string;
  readonly input: TurnInput;
  /**
   * By-reference specs `turnRequestFromProto` left for the harness to resolve when the turn
   * runs (tools of its MCP servers, listed then); not in `input.tools`. Absent when none.
   */
  readonly toolReferences?: readonly ToolReference[];
}

/**
 * A tool `start` names by reference (an empty `input_schema_json`) whose definition the
 * harness finds only when the turn runs: what the spec adds is an approval requirement.
 */
export interface ToolReference {
  readonly name: string;
  readonly needsApproval: boolean;
  /** Empty on the wire: unset. */
  readonly approvalReason?: string;
}

/** A call the harness forwards to the control plane (the trusted-tool proxy). */
export interface TrustedCall {
  readonly call: ToolCallRequest;
  readonly effect: ToolEffect;
}

/** The control plane's answer to a trusted call: a known outcome or an unknown one. */
export type TrustedAnswer =
  | { readonly toolCallId: string; readonly known: true; readonly outcome: ToolOutcome }
  | { readonly toolCallId: string; readonly known: false; readonly reason: string };

/** The turn's terminal outcome as a stream message (`paused` or `result`). */
export type TerminalOutput = Extract<
  NonNullable<TurnOutput['output']>,
  { $case: 'paused' | 'result' }
>;

function bad(field: string, why: string): AppError {
  return new AppError('invalid_argument', `${field}: ${why}`, { details: { field } });
}

function bytes(value: Uint8Array): Buffer {
  return Buffer.from(value);
}

function plainBytes(value: Uint8Array): Uint8Array {
  return new Uint8Array(value);
}

function jsonObject(text: string, field: string): JsonObject {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw bad(field, 'is not valid JSON');
  }
  if (!isJsonObject(value)) throw bad(field, 'is not a JSON object');
  return value;
}

const stopReasons = new Set<string>(Object.values(StopReason));

function isStopReason(value: string): value is StopReason {
  return stopReasons.has(value);
}

// ---- enums ----

/** Domain tool effect to proto. */
export function toolEffectToProto(effect: ToolEffect): ProtoToolEffect {
  return effect === 'pure'
    ? ProtoToolEffect.TOOL_EFFECT_PURE
    : ProtoToolEffect.TOOL_EFFECT_SIDE_EFFECT;
}

/**
 * Proto tool effect to domain.
 *
 * @throws AppError `invalid_argument` for UNSPECIFIED or an unknown value: guessing "pure"
 *   could re-run a side effect.
 */
export function toolEffectFromProto(effect: ProtoToolEffect, field: string): ToolEffect {
  switch (effect) {
    case ProtoToolEffect.TOOL_EFFECT_PURE:
      return 'pure';
    case ProtoToolEffect.TOOL_EFFECT_SIDE_EFFECT:
      return 'side_effect';
    default:
      throw bad(field, 'tool effect must be PURE or SIDE_EFFECT');
  }
}

/** Domain approval decision to proto. */
export function approvalDecisionToProto(decision: DomainApprovalDecision): ApprovalDecision {
  return decision === 'approved'
    ? ApprovalDecision.APPROVAL_DECISION_APPROVED
    : ApprovalDecision.APPROVAL_DECISION_DENIED;
}

/**
 * Proto approval decision to domain.
 *
 * @throws AppError `invalid_argument` for UNSPECIFIED or an unknown value.
 */
export function approvalDecisionFromProto(
  decision: ApprovalDecision,
  field: string,
): DomainApprovalDecision {
  switch (decision) {
    case ApprovalDecision.APPROVAL_DECISION_APPROVED:
      return 'approved';
    case ApprovalDecision.APPROVAL_DECISION_DENIED:
      return 'denied';
    default:
      throw bad(field, 'decision must be APPROVED or DENIED');
  }
}

// ---- steps (events.v1) ----

/** A recorded block to proto `ContentBlock`. */
export function recordedBlockToProto(block: RecordedBlock): ProtoContentBlock {
  return block.type === 'text'
    ? { block: { $case: 'text', value: block.text } }
    : {
        block: {
          $case: 'toolUse',
          value: { toolCallId: block.toolCallId, name: block.name, argsJson: block.argsJson },
        },
      };
}

/**
 * Proto `ContentBlock` to a recorded block.
 *
 * @throws AppError `invalid_argument` when the oneof is empty.
 */
export function recordedBlockFromProto(block: ProtoContentBlock, field: string): RecordedBlock {
  const value = block.block;
  switch (value?.$case) {
    case 'text':
      return { type: 'text', text: value.value };
    case 'toolUse':
      return {
        type: 'tool_use',
        toolCallId: value.value.toolCallId,
        name: value.value.name,
        argsJson: value.value.argsJson,
      };
    default:
      throw bad(field, 'content block has neither text nor tool_use');
  }
}

/** A model call record to proto `ModelCall`. */
export function modelCallToProto(record: ModelCallRecord): ModelCall {
  return {
    turnId: record.turnId,
    step: record.step,
    model: record.model,
    content: record.content.map(recordedBlockToProto),
    stopReason: record.stopReason,
    usage: usageToProto(record.usage),
    startedAtMs: record.startedAtMs,
    finishedAtMs: record.finishedAtMs,
    closing: record.closing,
    configSha256: bytes(record.configSha256 ?? new Uint8Array()),
    requestSha256: bytes(record.requestSha256 ?? new Uint8Array()),
  };
}

/** An agent configuration record to proto `AgentConfig`. */
export function agentConfigToProto(record: AgentConfigRecord): AgentConfig {
  return { turnId: record.turnId, sha256: bytes(record.sha256), configJson: record.configJson };
}

/** Proto `AgentConfig` to a record (its digest is checked by whoever relies on it). */
export function agentConfigFromProto(config: AgentConfig): AgentConfigRecord {
  return {
    turnId: config.turnId,
    sha256: plainBytes(config.sha256),
    configJson: config.configJson,
  };
}

/**
 * Proto `ModelCall` to a record. An unknown stop reason becomes `other`, as adapters map
 * vendor reasons.
 *
 * @throws AppError `invalid_argument` for an empty content block.
 */
export function modelCallFromProto(call: ModelCall, field = 'model_call'): ModelCallRecord {
  return {
    turnId: call.turnId,
    step: call.step,
    model: call.model,
    content: call.content.map((block, i) =>
      recordedBlockFromProto(block, `${field}.content[${i}]`),
    ),
    stopReason: isStopReason(call.stopReason) ? call.stopReason : StopReason.Other,
    usage: usageFromProto(call.usage),
    startedAtMs: call.startedAtMs,
    finishedAtMs: call.finishedAtMs,
    closing: call.closing,
    // Empty in journals written before recording (docs/replay.md): unset.
    ...(call.configSha256.length === 0 ? {} : { configSha256: plainBytes(call.configSha256) }),
    ...(call.requestSha256.length === 0 ? {} : { requestSha256: plainBytes(call.requestSha256) }),
  };
}

/** Domain usage to proto. */
export function usageToProto(usage: Usage): { inputTokens: number; outputTokens: number } {
  return { inputTokens: usage.inputTokens, outputTokens: usage.outputTokens };
}

/** Proto usage to domain; absent counts as zero tokens. */
export function usageFromProto(
  usage: { inputTokens: number; outputTokens: number } | undefined,
): Usage {
  return { inputTokens: usage?.inputTokens ?? 0, outputTokens: usage?.outputTokens ?? 0 };
}

/** A tool call record to proto `ToolCall`. */
export function toolCallToProto(record: ToolCallRecord): ToolCall {
  return {
    turnId: record.turnId,
    step: record.step,
    toolCallId: record.toolCallId,
    toolName: record.toolName,
    argsJson: record.argsJson,
    effect: toolEffectToProto(record.effect),
    approvalRequestId: record.approvalRequestId,
  };
}

/**
 * Proto `ToolCall` to a record.
 *
 * @throws AppError `invalid_argument` when the effect is unspecified.
 */
export function toolCallFromProto(call: ToolCall, field = 'tool_call'): ToolCallRecord {
  return {
    turnId: call.turnId,
    step: call.step,
    toolCallId: call.toolCallId,
    toolName: call.toolName,
    argsJson: call.argsJson,
    effect: toolEffectFromProto(call.effect, `${field}.effect`),
    approvalRequestId: call.approvalRequestId,
  };
}

/** A tool result record to proto `ToolResult`. */
export function toolResultToProto(record: ToolResultRecord): ToolResult {
  return { ...record };
}

/** Proto `ToolResult` to a record. */
export function toolResultFromProto(result: ToolResult): ToolResultRecord {
  return {
    turnId: result.turnId,
    toolCallId: result.toolCallId,
    content: result.content,
    isError: result.isError,
    denied: result.denied,
  };
}

/**
 * A step to proto `Step`, numbered `sequence` within the call (0 in `start`), to be acked
 * before the turn goes on (`commitWithResult` is set by the caller that carries it).
 */
export function turnStepToProto(step: TurnStep, sequence: number): Step {
  const commitWithResult = false;
  switch (step.kind) {
    case 'model_call':
      return {
        sequence,
        step: { $case: 'modelCall', value: modelCallToProto(step.record) },
        commitWithResult,
      };
    case 'tool_call':
      return {
        sequence,
        step: { $case: 'toolCall', value: toolCallToProto(step.record) },
        commitWithResult,
      };
    case 'tool_result':
      return {
        sequence,
        step: { $case: 'toolResult', value: toolResultToProto(step.record) },
        commitWithResult,
      };
    case 'agent_config':
      return {
        sequence,
        step: { $case: 'agentConfig', value: agentConfigToProto(step.record) },
        commitWithResult,
      };
    default: {
      const never: never = step;
      return never;
    }
  }
}

/**
 * Proto `Step` to a committed step (the sequence number is dropped).
 *
 * @throws AppError `invalid_argument` when the oneof is empty or a record is malformed.
 */
export function turnStepFromProto(step: Step, field = 'step'): TurnStep {
  const value = step.step;
  switch (value?.$case) {
    case 'modelCall':
      return { kind: 'model_call', record: modelCallFromProto(value.value, `${field}.model_call`) };
    case 'toolCall':
      return { kind: 'tool_call', record: toolCallFromProto(value.value, `${field}.tool_call`) };
    case 'toolResult':
      return { kind: 'tool_result', record: toolResultFromProto(value.value) };
    case 'agentConfig':
      return { kind: 'agent_config', record: agentConfigFromProto(value.value) };
    default:
      throw bad(field, 'step has no model_call, tool_call, tool_result or agent_config');
  }
}

// ---- requests and answers (events.v1) ----

/** An approval request record to proto. */
export function approvalRequestToProto(record: ApprovalRequestRecord): ApprovalRequest {
  // The control plane stamps requested_at_ms with its own clock when it commits the request.
  return { ...record, argsSha256: bytes(record.argsSha256), requestedAtMs: 0 };
}

/** Proto `ApprovalRequest` to a record. */
export function approvalRequestFromProto(request: ApprovalRequest): ApprovalRequestRecord {
  return {
    turnId: request.turnId,
    requestId: request.requestId,
    toolCallId: request.toolCallId,
    toolName: request.toolName,
    argsJson: request.argsJson,
    argsSha256: plainBytes(request.argsSha256),
    reason: request.reason,
    requiredApprover: request.requiredApprover,
  };
}

/** A signed approval answer to proto `ApprovalResponse`. */
export function approvalAnswerToProto(answer: ApprovalAnswer): ApprovalResponse {
  const { scope, ...rest } = answer;
  return {
    ...rest,
    argsSha256: bytes(answer.argsSha256),
    decision: approvalDecisionToProto(answer.decision),
    signature: bytes(answer.signature),
    selfApproval: answer.selfApproval ?? false,
    conversation: scope?.conversation ?? '',
    expiresAtMs: scope?.expiresAtMs ?? 0,
    approvalId: scope?.approvalId ?? '',
  };
}

/**
 * Proto `ApprovalResponse` to a signed answer (not verified here: the turn machine verifies
 * it against the pending call).
 *
 * @throws AppError `invalid_argument` when the decision is unspecified.
 */
export function approvalAnswerFromProto(
  response: ApprovalResponse,
  field = 'approval_response',
): ApprovalAnswer {
  return {
    turnId: response.turnId,
    requestId: response.requestId,
    toolName: response.toolName,
    argsSha256: plainBytes(response.argsSha256),
    decision: approvalDecisionFromProto(response.decision, `${field}.decision`),
    answeredBy: response.answeredBy,
    keyId: response.keyId,
    signature: plainBytes(response.signature),
    answeredAtMs: response.answeredAtMs,
    comment: response.comment,
    ...(response.selfApproval ? { selfApproval: true } : {}),
    // An answer with an approval id is v2; without one it is v1 (docs/approvals.md).
    ...(response.approvalId === ''
      ? {}
      : {
          scope: {
            conversation: response.conversation,
            expiresAtMs: response.expiresAtMs,
            approvalId: response.approvalId,
          },
        }),
  };
}

/** A question request record to proto. */
export function questionRequestToProto(record: QuestionRequestRecord): QuestionRequest {
  return { ...record };
}

/** Proto `QuestionRequest` to a record. */
export function questionRequestFromProto(request: QuestionRequest): QuestionRequestRecord {
  return {
    turnId: request.turnId,
    requestId: request.requestId,
    toolCallId: request.toolCallId,
    question: request.question,
  };
}

/** A question answer to proto `QuestionResponse`. */
export function questionAnswerToProto(answer: QuestionAnswer): QuestionResponse {
  return { ...answer };
}

/** Proto `QuestionResponse` to an answer. */
export function questionAnswerFromProto(response: QuestionResponse): QuestionAnswer {
  return {
    turnId: response.turnId,
    requestId: response.requestId,
    answer: response.answer,
    answeredBy: response.answeredBy,
    answeredAtMs: response.answeredAtMs,
  };
}

/** A handoff record to proto. */
export function handoffToProto(record: HandoffRecord): Handoff {
  return { ...record };
}

/** Proto `Handoff` to a record. */
export function handoffFromProto(handoff: Handoff): HandoffRecord {
  return {
    turnId: handoff.turnId,
    toolCallId: handoff.toolCallId,
    targetAgent: handoff.targetAgent,
    reason: handoff.reason,
  };
}

// ---- start (harness.v1) ----

/**
 * A turn tool to proto `ToolSpec`.
 *
 * @throws AppError `invalid_argument` when the input schema is not JSON-serializable.
 */
export function turnToolToProto(tool: TurnTool): ToolSpec {
  return {
    name: tool.name,
    description: tool.description,
    inputSchemaJson: canonicalJson(tool.inputSchema),
    effect: toolEffectToProto(tool.effect),
    needsApproval: tool.needsApproval,
    approvalReason: tool.approvalReason ?? '',
    host:
      tool.host === 'control_plane'
        ? ProtoToolHost.TOOL_HOST_CONTROL_PLANE
        : ProtoToolHost.TOOL_HOST_HARNESS,
  };
}

/** Tools the harness defines itself, found by name (built-in and reserved tools). */
export type ToolCatalog = (name: string) => TurnTool | undefined;

/**
 * Proto `ToolSpec` to a turn tool. An unspecified host means the harness. A spec with an
 * empty `input_schema_json` names a tool by reference: its definition comes from the
 * harness's `catalog`, and the spec can only add an approval requirement.
 *
 * @throws AppError `invalid_argument` for an empty name, a schema that is not a JSON
 *   object, an unspecified effect, or a reference to a tool the harness does not have.
 */
export function turnToolFromProto(
  spec: ToolSpec,
  field = 'tool',
  catalog: ToolCatalog = () => undefined,
): TurnTool {
  if (spec.name === '') throw bad(`${field}.name`, 'is empty');
  if (spec.inputSchemaJson === '') {
    const known = catalog(spec.name);
    if (known === undefined) {
      throw bad(
        `${field}.input_schema_json`,
        `is empty, and this harness has no tool named ${JSON.stringify(spec.name)} to take it from`,
      );
    }
    return {
      ...known,
      needsApproval: known.needsApproval || spec.needsApproval,
      ...(spec.approvalReason === '' ? {} : { approvalReason: spec.approvalReason }),
    };
  }
  let host: TurnTool['host'];
  switch (spec.host) {
    case ProtoToolHost.TOOL_HOST_UNSPECIFIED:
    case ProtoToolHost.TOOL_HOST_HARNESS:
      host = 'harness';
      break;
    case ProtoToolHost.TOOL_HOST_CONTROL_PLANE:
      host = 'control_plane';
      break;
    default:
      throw bad(`${field}.host`, 'is not a known tool host');
  }
  return {
    name: spec.name,
    description: spec.description,
    inputSchema: jsonObject(spec.inputSchemaJson, `${field}.input_schema_json`),
    effect: toolEffectFromProto(spec.effect, `${field}.effect`),
    needsApproval: spec.needsApproval,
    ...(spec.approvalReason === '' ? {} : { approvalReason: spec.approvalReason }),
    host,
  };
}

/** A tool reference to proto `ToolSpec` (by reference: empty schema, effect unspecified). */
export function toolReferenceToProto(reference: ToolReference): ToolSpec {
  return {
    name: reference.name,
    description: '',
    inputSchemaJson: '',
    effect: ProtoToolEffect.TOOL_EFFECT_UNSPECIFIED,
    needsApproval: reference.needsApproval,
    approvalReason: reference.approvalReason ?? '',
    host: ProtoToolHost.TOOL_HOST_HARNESS,
  };
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
        input: jsonObject(value.value.argsJson, `${field}.tool_use.args_json`),
      };
    case 'toolResult':
      return {
        type: 'tool_result',
        toolUseId: value.value.toolCallId,
        content: value.value.content,
        isError: value.value.isError,
      };
    default:
      throw bad(field, 'block has no text, tool_use or tool_result');
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
      throw bad(`${field}.role`, 'must be USER or ASSISTANT');
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
    agent: { model: request.model, systemPrompt: input.system ?? '' },
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
  if (start.conversationId === '') throw bad('start.conversation_id', 'is empty');
  if (start.turnId === '') throw bad('start.turn_id', 'is empty');
  const budget = start.budget;
  const system = start.agent?.systemPrompt ?? '';
  const tools: TurnTool[] = [];
  const toolReferences: ToolReference[] = [];
  start.tools.forEach((spec, i) => {
    if (
      spec.inputSchemaJson === '' &&
      spec.name !== '' &&
      catalog(spec.name) === undefined &&
      deferred(spec.name)
    ) {
      toolReferences.push({
        name: spec.name,
        needsApproval: spec.needsApproval,
        ...(spec.approvalReason === '' ? {} : { approvalReason: spec.approvalReason }),
      });
    } else {
      tools.push(turnToolFromProto(spec, `start.tools[${i}]`, catalog));
    }
  });
  return {
    conversationId: start.conversationId,
    turnId: start.turnId,
    attempt: start.attempt,
    model: start.agent?.model ?? '',
    input: {
      turnId: start.turnId,
      ...(system === '' ? {} : { system }),
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
    },
    ...(toolReferences.length === 0 ? {} : { toolReferences }),
  };
}

// ---- stream messages (harness.v1) ----

/** A text delta to proto. */
export function textDeltaToProto(delta: TextDelta): ProtoTextDelta {
  return { step: delta.step, text: delta.text };
}

/** Proto `TextDelta` to domain. */
export function textDeltaFromProto(delta: ProtoTextDelta): TextDelta {
  return { step: delta.step, text: delta.text };
}

/** A trusted call to proto `TrustedToolCall`. */
export function trustedCallToProto(trusted: TrustedCall): TrustedToolCall {
  return {
    turnId: trusted.call.turnId,
    step: trusted.call.step,
    toolCallId: trusted.call.toolCallId,
    toolName: trusted.call.name,
    argsJson: trusted.call.argsJson,
    effect: toolEffectToProto(trusted.effect),
  };
}

/**
 * Proto `TrustedToolCall` to a trusted call. `maxSteps` is not on the wire (the control
 * plane knows the budget), so it comes back as 0.
 *
 * @throws AppError `invalid_argument` when the args are not a JSON object or the effect is
 *   unspecified.
 */
export function trustedCallFromProto(call: TrustedToolCall): TrustedCall {
  return {
    call: {
      turnId: call.turnId,
      toolCallId: call.toolCallId,
      name: call.toolName,
      input: jsonObject(call.argsJson, 'trusted_tool_call.args_json'),
      argsJson: call.argsJson,
      step: call.step,
      maxSteps: 0,
    },
    effect: toolEffectFromProto(call.effect, 'trusted_tool_call.effect'),
  };
}

/** A trusted answer to proto `TrustedToolResult`. */
export function trustedAnswerToProto(answer: TrustedAnswer): TrustedToolResult {
  return answer.known
    ? {
        toolCallId: answer.toolCallId,
        content: answer.outcome.content,
        isError: answer.outcome.isError,
        outcomeUnknownReason: '',
      }
    : {
        toolCallId: answer.toolCallId,
        content: '',
        isError: false,
        outcomeUnknownReason: answer.reason,
      };
}

/**
 * Proto `TrustedToolResult` to a trusted answer.
 *
 * @throws AppError `invalid_argument` when the tool call id is empty.
 */
export function trustedAnswerFromProto(result: TrustedToolResult): TrustedAnswer {
  if (result.toolCallId === '') throw bad('trusted_tool_result.tool_call_id', 'is empty');
  return result.outcomeUnknownReason === ''
    ? {
        toolCallId: result.toolCallId,
        known: true,
        outcome: { content: result.content, isError: result.isError },
      }
    : { toolCallId: result.toolCallId, known: false, reason: result.outcomeUnknownReason };
}

/** A turn outcome to its terminal stream message: `paused` for a pause, else `result`. */
export function turnOutcomeToProto(outcome: TurnOutcome, turnId: string): TerminalOutput {
  switch (outcome.kind) {
    case 'completed':
      return {
        $case: 'result',
        value: {
          outcome: {
            $case: 'complete',
            value: {
              turnId,
              text: outcome.text,
              steps: outcome.steps,
              completedAtMs: outcome.completedAtMs,
              fallback: outcome.fallback,
            },
          },
        },
      };
    case 'awaiting_approval':
      return {
        $case: 'paused',
        value: {
          request: { $case: 'approvalRequest', value: approvalRequestToProto(outcome.request) },
          rejection: outcome.rejection ?? '',
        },
      };
    case 'awaiting_answer':
      return {
        $case: 'paused',
        value: {
          request: { $case: 'questionRequest', value: questionRequestToProto(outcome.request) },
          rejection: outcome.rejection ?? '',
        },
      };
    case 'handed_off':
      return {
        $case: 'result',
        value: { outcome: { $case: 'handoff', value: handoffToProto(outcome.handoff) } },
      };
    case 'ambiguous':
      return {
        $case: 'result',
        value: {
          outcome: {
            $case: 'ambiguous',
            value: {
              turnId,
              toolCallId: outcome.toolCallId,
              reason: outcome.reason,
              detectedAtMs: outcome.detectedAtMs,
            },
          },
        },
      };
    case 'failed':
      return {
        $case: 'result',
        value: {
          outcome: {
            $case: 'failed',
            value: { code: outcome.code, message: outcome.message, retryable: outcome.retryable },
          },
        },
      };
    case 'cancelled':
      return {
        $case: 'result',
        value: { outcome: { $case: 'cancelled', value: { reason: outcome.reason } } },
      };
    default: {
      const never: never = outcome;
      return never;
    }
  }
}

/**
 * A terminal stream message to the outcome it reports (the control plane's side).
 *
 * @throws AppError `invalid_argument` when a oneof is empty or a failure names an unknown
 *   error code.
 */
export function turnOutcomeFromProto(output: TerminalOutput): TurnOutcome {
  if (output.$case === 'paused') {
    const request = output.value.request;
    const rejection = output.value.rejection === '' ? {} : { rejection: output.value.rejection };
    switch (request?.$case) {
      case 'approvalRequest':
        return {
          kind: 'awaiting_approval',
          request: approvalRequestFromProto(request.value),
          ...rejection,
        };
      case 'questionRequest':
        return {
          kind: 'awaiting_answer',
          request: questionRequestFromProto(request.value),
          ...rejection,
        };
      default:
        throw bad('paused', 'has no approval_request or question_request');
    }
  }
  const outcome = output.value.outcome;
  switch (outcome?.$case) {
    case 'complete':
      return {
        kind: 'completed',
        text: outcome.value.text,
        steps: outcome.value.steps,
        fallback: outcome.value.fallback,
        completedAtMs: outcome.value.completedAtMs,
      };
    case 'handoff':
      return { kind: 'handed_off', handoff: handoffFromProto(outcome.value) };
    case 'ambiguous':
      return {
        kind: 'ambiguous',
        toolCallId: outcome.value.toolCallId,
        reason: outcome.value.reason,
        detectedAtMs: outcome.value.detectedAtMs,
      };
    case 'failed': {
      const code = outcome.value.code;
      if (!isErrorCode(code))
        throw bad('result.failed.code', `${JSON.stringify(code)} is not an error code`);
      return {
        kind: 'failed',
        code,
        message: outcome.value.message,
        retryable: outcome.value.retryable,
      };
    }
    case 'cancelled':
      return { kind: 'cancelled', reason: outcome.value.reason };
    default:
      throw bad('result', 'has no outcome');
  }
}
