import { approvalArgsSha256 } from '../../common/approval-bytes';
import { canonicalJson, isJsonObject } from '../../common/canonical-json';
import { AppError, isAppError, type ErrorCode } from '../../common/errors';
import type {
  ContentBlock,
  Message,
  ModelRequest,
  ModelResponse,
  OutputBlock,
  ToolResultBlock,
  ToolUseBlock,
} from '../../common/model/model-port';
import type { ChargeFacts } from '../../common/payment-approval';
import type { PaymentRequired, ToolCallRequest, ToolOutcome } from './ports/tool-port';
import {
  chargeMismatch,
  chargeRefusedResult,
  chargeUnansweredResult,
  paymentApprovalRequest,
  paymentDeniedResult,
} from './turn-payment';
import {
  verifyApprovalAnswer,
  type ApprovalKeys,
  type ApprovalUse,
  type SignatureVerifier,
} from './approval-token';
import {
  encodeAgentConfig,
  hex,
  modelRequestSha256,
  type EncodedAgentConfig,
  type HashedRequest,
  type RequestHasher,
} from './agent-config';
import { type ModelParameters } from '../../common/model/model-port';
import { MessageList } from './message-list';
import { systemWithSummary } from './summary-context';
import { systemWithMemory, type MemoryItem } from './memory-context';
import type { RequestIds } from '../../common/request-ids';
import { ReservedTool } from './reserved-tools';
import {
  handoffRefusal,
  handoffResult,
  readHandoffAsk,
  type HandoffAsk,
  type TurnAgent,
} from './turn-agents';
import { DELEGATION_DEADLINE_MS } from '../../common/delegation';
import {
  deadlineResult,
  delegationRefusal,
  emptyAnswerResult,
  personWaits,
  readDelegateAsk,
  threadRunMs,
  type DelegateAsk,
  type PersonWait,
  type RequestTime,
} from './turn-delegation';
import { effectiveMaxSteps, type StepBudget } from './step-budget';
import type {
  AgentHandoffRecord,
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
} from './turn-records';

/**
 * The turn loop as a pure state machine (STYLE.md §2): `step(state, event)` returns the
 * next state and the effects the shell must run. No clock, no randomness, no I/O: times
 * arrive inside events, ids come from the injected {@link RequestIds}, signatures are
 * checked through the injected {@link SignatureVerifier}. Replaying the same events gives
 * the same effects, which is what lets a crashed turn resume from its journal.
 *
 * Effect ordering is part of the contract. The shell runs a step's effects in array
 * order; a `commit_step` is a barrier (the shell awaits the append before it looks at the
 * next effect), while `call_model`, `call_tool` and `call_trusted_tool` are started and
 * report back later as events. Every `tool_call` commit precedes the `call_tool` that runs
 * it, so a side-effecting call is durable before it can touch the world.
 */

/** The reply when the budget is spent and the closing call produced no text either. */
export const FALLBACK_REPLY =
  'I could not finish this request within the steps allowed for one turn. Please try again, or rephrase the request with more detail or a narrower scope.';

/** Appended for the closing call; the model may not call tools on that request. */
export const CLOSING_INSTRUCTION =
  'You have used all the tool steps allowed for this turn and cannot call any more tools. Reply to the user now: say what you tried, what you found, and what is still open.';

/** Everything a turn starts from. */
export interface TurnInput {
  readonly turnId: string;
  readonly system?: string;
  /** The committed transcript before this turn. */
  readonly history: readonly Message[];
  readonly userMessage: string;
  /** Tools offered to the model, reserved tools included when they apply. */
  readonly tools: readonly TurnTool[];
  readonly budget: StepBudget;
  /** Steps already committed for this turn (a resumed dispatch), in journal order. */
  readonly recordedSteps: readonly TurnStep[];
  /** Signed answers recorded for this turn's approval requests; verified before use. */
  readonly approvalAnswers: readonly ApprovalAnswer[];
  readonly questionAnswers: readonly QuestionAnswer[];
  /** From the ingress directive; empty means any admin. */
  readonly requiredApprover?: string;
  /**
   * The parameters the model provider sends. When set, the turn is recorded for replay
   * (docs/replay.md): its configuration is committed first unless it is
   * `recordedConfigSha256`, and every `model_call` names it and its request digest.
   */
  readonly model?: ModelParameters;
  /** Lowercase hex SHA-256 of the newest configuration in the journal; absent when none. */
  readonly recordedConfigSha256?: string;
  /** The summary of the turns before `history`, added to the system prompt (summary-context.ts). */
  readonly summary?: string;
  /** The conversation's memory at the dispatch, oldest set first (docs/turns.md, "Memory"). */
  readonly memory?: readonly MemoryItem[];
  /**
   * Bytes of memory the request may carry (memory-context.ts); absent or 0 when the memory
   * tool is not offered: no memory goes into the request.
   */
  readonly memoryBudgetBytes?: number;
  /** The name of the agent the turn starts with (docs/turns.md, "Handoffs"); '' or absent: unnamed. */
  readonly agentName?: string;
  /**
   * Agents the starting agent may hand the turn to. Absent: `__handoff_to` ends the turn
   * with a `handoff` marker (turns recorded before handoffs continued).
   */
  readonly handoffs?: readonly string[];
  /** The other agents the turn may move to, each with its own configuration. */
  readonly agents?: readonly TurnAgent[];
  /** Agents the starting agent may delegate tasks to (docs/turns.md, "Delegation"). */
  readonly delegates?: readonly string[];
  /**
   * The charges committed for this turn (docs/payments.md, "A paid call in a turn"): a
   * recorded call that met a 402 is not run again; it waits for its payment's approval.
   */
  readonly paymentCharges?: readonly ChargeFacts[];
  /**
   * When each of the turn's approval and question requests was committed (the control
   * plane's clock): with the answers' times, how long the turn waited for a person, which a
   * delegation thread's deadline does not count (docs/turns.md, "Delegation"). An answer
   * given as an event (`approval_answered`) makes no wait: the shells resume a paused turn
   * with a new attempt, given the answers and these times.
   */
  readonly requestTimes?: readonly RequestTime[];
}

/** What the machine is told. */
export type TurnEvent =
  | { readonly type: 'turn_started'; readonly input: TurnInput }
  | {
      readonly type: 'model_responded';
      readonly response: ModelResponse;
      readonly startedAtMs: number;
      readonly finishedAtMs: number;
      /** The `call_model` effect's thread; absent for the turn's own (top) thread. */
      readonly thread?: string;
    }
  | {
      readonly type: 'model_failed';
      readonly code: ErrorCode;
      readonly message: string;
      /** The adapter gave up on a transient failure: a later dispatch may succeed. */
      readonly retryable: boolean;
      /** The `call_model` effect's thread; absent for the turn's own (top) thread. */
      readonly thread?: string;
    }
  | { readonly type: 'tool_finished'; readonly toolCallId: string; readonly outcome: ToolOutcome }
  | {
      readonly type: 'trusted_tool_answered';
      readonly toolCallId: string;
      readonly outcome: ToolOutcome;
    }
  /** The control plane's answer to a `request_charge`: the charge it committed, or why not. */
  | {
      readonly type: 'charge_answered';
      readonly toolCallId: string;
      readonly answer: { readonly charge: ChargeFacts } | { readonly refusal: string };
    }
  /** The call may or may not have taken effect (transport broke, timeout, abort). */
  | { readonly type: 'tool_outcome_unknown'; readonly toolCallId: string; readonly reason: string }
  | { readonly type: 'approval_answered'; readonly answer: ApprovalAnswer }
  | { readonly type: 'question_answered'; readonly answer: QuestionAnswer }
  | { readonly type: 'cancelled'; readonly reason: string };

/** What the machine asks the shell to do. */
export type TurnEffect =
  /** Append to the journal; a barrier: await it before the next effect. */
  | { readonly type: 'commit_step'; readonly step: TurnStep }
  | {
      readonly type: 'call_model';
      readonly step: number;
      readonly closing: boolean;
      readonly request: ModelRequest;
      /** The agent whose model is asked ('' for an unnamed one). */
      readonly agent: string;
      /** The delegation thread asking (its `__delegate_to` call's id); absent at the top. */
      readonly thread?: string;
    }
  | { readonly type: 'call_tool'; readonly call: ToolCallRequest; readonly effect: ToolEffect }
  /** Route to the control plane (tools with `host: 'control_plane'`, payments first). */
  | {
      readonly type: 'call_trusted_tool';
      readonly call: ToolCallRequest;
      readonly effect: ToolEffect;
    }
  /** A tool met a 402: send its challenge to the control plane, which answers `charge_answered`. */
  | {
      readonly type: 'request_charge';
      readonly call: ToolCallRequest;
      readonly challenge: PaymentRequired;
    }
  /**
   * Pay the approved charge of the call: the control plane answers `trusted_tool_answered`
   * with the paid response, or `tool_outcome_unknown` when money may have moved unanswered.
   */
  | {
      readonly type: 'settle_payment';
      readonly call: ToolCallRequest;
      readonly approvalRequestId: string;
    }
  | {
      readonly type: 'pause_for_approval';
      readonly request: ApprovalRequestRecord;
      /** Why a supplied answer was not accepted, when one was. */
      readonly rejection?: string;
    }
  | {
      readonly type: 'pause_for_question';
      readonly request: QuestionRequestRecord;
      readonly rejection?: string;
    }
  | { readonly type: 'handoff'; readonly handoff: HandoffRecord }
  | {
      readonly type: 'finish';
      readonly text: string;
      /** Model round trips in the turn, the closing call included. */
      readonly steps: number;
      /** True when `text` is {@link FALLBACK_REPLY}. */
      readonly fallback: boolean;
    }
  | { readonly type: 'ambiguous'; readonly toolCallId: string; readonly reason: string }
  | {
      readonly type: 'fail';
      readonly code: ErrorCode;
      readonly message: string;
      readonly retryable: boolean;
    }
  | { readonly type: 'cancelled'; readonly reason: string };

/** Effects after which the shell stops feeding events (a pause may be continued in-process). */
export type TerminalEffect = Extract<
  TurnEffect,
  {
    type:
      | 'pause_for_approval'
      | 'pause_for_question'
      | 'handoff'
      | 'finish'
      | 'ambiguous'
      | 'fail'
      | 'cancelled';
  }
>;

/** True for an effect that ends (or pauses) the turn. */
export function isTerminalEffect(effect: TurnEffect): effect is TerminalEffect {
  switch (effect.type) {
    case 'commit_step':
    case 'call_model':
    case 'call_tool':
    case 'call_trusted_tool':
    case 'request_charge':
    case 'settle_payment':
      return false;
    default:
      return true;
  }
}

/** The machine's phase. */
export const TurnPhase = {
  Idle: 'idle',
  AwaitingModel: 'awaiting_model',
  AwaitingTools: 'awaiting_tools',
  Paused: 'paused',
  Done: 'done',
} as const;
export type TurnPhase = (typeof TurnPhase)[keyof typeof TurnPhase];

/** Where one tool call of the current model response stands. */
export type CallStatus =
  | { readonly kind: 'pending' }
  | {
      readonly kind: 'running';
      readonly effect: ToolEffect;
      /** A paid call: its 402 is with the control plane, or its approved payment is being made. */
      readonly payment?: 'charging' | 'settling';
    }
  | { readonly kind: 'done'; readonly content: string; readonly isError: boolean }
  | {
      readonly kind: 'awaiting_approval';
      readonly request: ApprovalRequestRecord;
      readonly rejection?: string;
      /** The approval is of this charge's payment, not of running the call. */
      readonly payment?: ChargeFacts;
    }
  | {
      readonly kind: 'awaiting_answer';
      readonly request: QuestionRequestRecord;
      readonly rejection?: string;
    }
  | { readonly kind: 'handoff'; readonly handoff: HandoffRecord }
  /** A `__delegate_to` call allowed, its thread not started yet (it starts as the reply settles). */
  | { readonly kind: 'delegate_pending'; readonly ask: DelegateAsk }
  /** A `__delegate_to` call whose thread runs (or waits for an answer) as `child`. */
  | { readonly kind: 'delegated'; readonly ask: DelegateAsk; readonly child: TurnState };

/** One tool call of the current model response. */
export interface BatchCall {
  readonly use: ToolUseBlock;
  readonly argsJson: string;
  readonly status: CallStatus;
}

/** The machine's state. Treat as opaque outside tests; never mutated in place. */
export interface TurnState {
  readonly phase: TurnPhase;
  readonly turnId: string;
  readonly system: string | undefined;
  readonly tools: readonly TurnTool[];
  readonly maxSteps: number;
  readonly requiredApprover: string;
  /** The history given at the start, shared, then the turn's own messages. */
  readonly messages: MessageList;
  /** Budgeted model round trips settled so far (replayed ones included). */
  readonly modelSteps: number;
  /** The model call in flight, if any, with its request digest when the turn is recorded. */
  readonly pendingModel:
    | { readonly step: number; readonly closing: boolean; readonly requestSha256?: Uint8Array }
    | undefined;
  /** SHA-256 of the turn's agent configuration; absent when the turn is not recorded. */
  readonly configSha256: Uint8Array | undefined;
  /** The tool calls of the latest model response, in tool_use order, and when it ended. */
  readonly batch:
    | { readonly step: number; readonly finishedAtMs: number; readonly calls: readonly BatchCall[] }
    | undefined;
  readonly recordedModelCalls: ReadonlyMap<number, ModelCallRecord>;
  readonly recordedToolCalls: ReadonlyMap<string, ToolCallRecord>;
  readonly recordedToolResults: ReadonlyMap<string, ToolResultRecord>;
  readonly approvalAnswers: readonly ApprovalAnswer[];
  readonly questionAnswers: readonly QuestionAnswer[];
  /** The agent answering now ('' for an unnamed one); `system`, `tools` and `configSha256` are its. */
  readonly agentName: string;
  /** Whom it may hand off to; undefined: a handoff ends the turn. */
  readonly handoffs: readonly string[] | undefined;
  /** Every agent the turn was given, the starting one included, by name. */
  readonly roster: ReadonlyMap<string, TurnAgent>;
  /** Agents that have answered in this turn, first to last. */
  readonly visited: readonly string[];
  /** Lowercase hex digest of the newest configuration committed or in the journal before the turn. */
  readonly lastConfigHex: string | undefined;
  /** What every agent is given besides its own configuration. */
  readonly shared: SharedContext;
  readonly recordedHandoffs: ReadonlyMap<string, AgentHandoffRecord>;
  /** The answering agent's configuration JSON, committed again when a thread committed another. */
  readonly configJson: string | undefined;
  /** Whom the answering agent may delegate to; undefined: it may not. */
  readonly delegates: readonly string[] | undefined;
  /** This thread's `__delegate_to` call id; '' for the turn's own (top) thread. */
  readonly thread: string;
  /** 0 at the top, 1 for a delegate's thread, and so on. */
  readonly depth: number;
  /** The agents of the threads above this one, outermost first. */
  readonly ancestors: readonly string[];
  /**
   * When a delegate's thread opened: the end of the model reply that asked for it (journal
   * time, ms); its deadline counts from there, waits for a person left out. Absent at the top.
   */
  readonly openedAtMs: number | undefined;
  /** How a thread ended that gives its caller something other than its answer (a deadline). */
  readonly outcome: ToolOutcome | undefined;
}

/** What every agent of a turn is given besides its own configuration. */
export interface SharedContext {
  readonly budget: StepBudget;
  readonly summary?: string;
  readonly memory: readonly MemoryItem[];
  /** Every step recorded for the turn, each thread's included: threads index their own. */
  readonly recordedSteps: readonly TurnStep[];
  /** The turn's committed charges, each thread's included (tool call ids are the turn's). */
  readonly charges: readonly ChargeFacts[];
  /** The turn's recorded waits for a person (answered requests), which no thread's deadline counts. */
  readonly waits: readonly PersonWait[];
}

/** A step's output. */
export interface StepResult {
  readonly state: TurnState;
  readonly effects: readonly TurnEffect[];
}

/** What the machine needs from outside, all pure. */
export interface TurnMachineDeps {
  readonly ids: RequestIds;
  readonly verifier: SignatureVerifier;
  /** The control plane's approval public key (raw 32 bytes), or current and next. */
  readonly approvalPublicKey: ApprovalKeys;
  /**
   * A live harness's use rules for answers (conversation, expiry, single use); absent when
   * a recorded journal is replayed for forensics (approval-token.ts).
   */
  readonly approvalUse?: ApprovalUse;
  /** How request digests are computed (replay caches prefixes). @default modelRequestSha256 */
  readonly requestSha256?: RequestHasher;
}

/** A turn machine bound to its dependencies. */
export interface TurnMachine {
  /** The state before `turn_started`. */
  readonly initialState: TurnState;
  /**
   * Applies one event.
   *
   * @throws AppError `failed_precondition` when the event does not fit the phase (a shell
   *   bug: for example a tool result for a call that is not running, or any event after
   *   the turn ended).
   */
  step(state: TurnState, event: TurnEvent): StepResult;
}

const idleState: TurnState = {
  phase: TurnPhase.Idle,
  turnId: '',
  system: undefined,
  tools: [],
  maxSteps: 0,
  requiredApprover: '',
  messages: MessageList.of([]),
  modelSteps: 0,
  pendingModel: undefined,
  configSha256: undefined,
  batch: undefined,
  recordedModelCalls: new Map(),
  recordedToolCalls: new Map(),
  recordedToolResults: new Map(),
  approvalAnswers: [],
  questionAnswers: [],
  agentName: '',
  handoffs: undefined,
  roster: new Map(),
  visited: [],
  lastConfigHex: undefined,
  shared: { budget: {}, memory: [], recordedSteps: [], charges: [], waits: [] },
  recordedHandoffs: new Map(),
  configJson: undefined,
  delegates: undefined,
  thread: '',
  depth: 0,
  ancestors: [],
  openedAtMs: undefined,
  outcome: undefined,
};

/** Builds the machine. */
export function createTurnMachine(deps: TurnMachineDeps): TurnMachine {
  return { initialState: idleState, step: (state, event) => step(deps, state, event) };
}

type Effects = TurnEffect[];

function step(deps: TurnMachineDeps, state: TurnState, event: TurnEvent): StepResult {
  if (state.phase === TurnPhase.Done) {
    throw misfit(state, event, 'the turn has ended');
  }
  const thread = threadOf(state, event);
  if (
    thread < 0 &&
    (event.type === 'model_responded' || event.type === 'model_failed') &&
    (event.thread ?? '') !== state.thread
  ) {
    throw misfit(state, event, `no model call of ${threadName(event.thread)} is in flight`);
  }
  if (thread >= 0) {
    const call = callAt(state, thread);
    if (call.status.kind === 'delegated') {
      // The newest configuration is the turn's, not the thread's: threads run side by side.
      const child = { ...call.status.child, lastConfigHex: state.lastConfigHex };
      return absorb(deps, state, thread, step(deps, child, event), []);
    }
  }
  switch (event.type) {
    case 'turn_started':
      if (state.phase !== TurnPhase.Idle) throw misfit(state, event, 'the turn already started');
      return start(deps, event.input);
    case 'model_responded': {
      const pending = state.pendingModel;
      if (state.phase !== TurnPhase.AwaitingModel || pending === undefined) {
        throw misfit(state, event, `no model call of ${threadName(event.thread)} is in flight`);
      }
      return applyResponse(
        deps,
        { ...state, pendingModel: undefined },
        event.response,
        { ...pending, startedAtMs: event.startedAtMs, finishedAtMs: event.finishedAtMs },
        [],
        false,
      );
    }
    case 'model_failed':
      if (state.phase !== TurnPhase.AwaitingModel) {
        throw misfit(state, event, `no model call of ${threadName(event.thread)} is in flight`);
      }
      return end(state, [
        { type: 'fail', code: event.code, message: event.message, retryable: event.retryable },
      ]);
    case 'tool_finished':
    case 'trusted_tool_answered': {
      const index = runningCall(state, event);
      const effects: Effects = [];
      const { paymentRequired } = event.outcome;
      if (paymentRequired !== undefined && runningPhase(state, index) === undefined) {
        return settle(deps, requestCharge(state, index, paymentRequired, effects), effects);
      }
      if (runningPhase(state, index) === 'charging') {
        throw misfit(state, event, `tool call ${event.toolCallId} waits for its charge`);
      }
      const next = completeCall(state, index, event.outcome, false, effects);
      return settle(deps, next, effects);
    }
    case 'charge_answered': {
      const index = runningCall(state, event);
      if (runningPhase(state, index) !== 'charging') {
        throw misfit(state, event, `tool call ${event.toolCallId} asked for no charge`);
      }
      const effects: Effects = [];
      return settle(deps, answerCharge(deps, state, index, event, effects), effects);
    }
    case 'tool_outcome_unknown': {
      const index = runningCall(state, event);
      const call = callAt(state, index);
      const phase = runningPhase(state, index);
      if (phase === 'settling') {
        return end(state, [
          {
            type: 'ambiguous',
            toolCallId: call.use.id,
            reason: `the payment ${call.use.name} asked for may or may not have been made: ${event.reason}`,
          },
        ]);
      }
      if (phase === 'charging') {
        const effects: Effects = [];
        const outcome = {
          content: chargeUnansweredResult(call.use.name, event.reason),
          isError: true,
        };
        return settle(deps, completeCall(state, index, outcome, false, effects), effects);
      }
      if (call.status.kind === 'running' && call.status.effect === 'side_effect') {
        return end(state, [
          {
            type: 'ambiguous',
            toolCallId: call.use.id,
            reason: `side-effecting tool ${call.use.name} may or may not have run: ${event.reason}`,
          },
        ]);
      }
      // A pure call has no outcome to lose: the model sees an error and may try again.
      const effects: Effects = [];
      const outcome = { content: `Tool ${call.use.name} failed: ${event.reason}`, isError: true };
      return settle(deps, completeCall(state, index, outcome, false, effects), effects);
    }
    case 'approval_answered': {
      const index = pausedCall(state, event, 'awaiting_approval');
      const effects: Effects = [];
      const next = decideApproval(deps, state, index, [event.answer], true, effects, effects);
      return settle(deps, next, effects);
    }
    case 'question_answered': {
      const index = pausedCall(state, event, 'awaiting_answer');
      const effects: Effects = [];
      const next = answerQuestion(state, index, [event.answer], true, effects);
      return settle(deps, next, effects);
    }
    case 'cancelled': {
      // A side-effecting call in flight may have acted: say so rather than report a clean stop.
      const inFlight = sideEffectInFlight(state);
      if (inFlight !== undefined) {
        return end(state, [
          {
            type: 'ambiguous',
            toolCallId: inFlight.use.id,
            reason: `turn cancelled while side-effecting tool ${inFlight.use.name} was running: ${event.reason}`,
          },
        ]);
      }
      return end(state, [{ type: 'cancelled', reason: event.reason }]);
    }
    default: {
      const never: never = event;
      return never;
    }
  }
}

function start(deps: TurnMachineDeps, input: TurnInput): StepResult {
  const base: TurnState = { ...idleState, turnId: input.turnId, phase: TurnPhase.AwaitingModel };
  let maxSteps: number;
  try {
    maxSteps = effectiveMaxSteps(input.budget);
  } catch (error) {
    if (!isAppError(error)) throw error;
    return end(base, [
      { type: 'fail', code: error.code, message: error.message, retryable: false },
    ]);
  }
  const stray = input.recordedSteps.find(({ record }) => record.turnId !== input.turnId);
  if (stray !== undefined) {
    return end(base, [
      failure(
        'failed_precondition',
        `turn ${input.turnId}: a recorded ${stray.kind} belongs to turn ${stray.record.turnId}; resume with this turn's steps only`,
      ),
    ]);
  }
  const first: TurnAgent = {
    name: input.agentName ?? '',
    ...(input.system === undefined ? {} : { system: input.system }),
    tools: input.tools,
    ...(input.model === undefined ? {} : { model: input.model }),
    ...(input.handoffs === undefined ? {} : { handoffs: input.handoffs }),
    ...(input.delegates === undefined ? {} : { delegates: input.delegates }),
    ...(input.memoryBudgetBytes ? { memoryBudgetBytes: input.memoryBudgetBytes } : {}),
  };
  const roster = new Map<string, TurnAgent>([[first.name, first]]);
  for (const agent of input.agents ?? []) {
    if (roster.has(agent.name)) {
      return end(base, [
        failure(
          'failed_precondition',
          `turn ${input.turnId}: agent ${agent.name || '(unnamed)'} is given twice; name each agent of a turn once`,
        ),
      ]);
    }
    roster.set(agent.name, agent);
  }
  const effects: Effects = [];
  const state: TurnState = {
    ...base,
    maxSteps,
    requiredApprover: input.requiredApprover ?? '',
    messages: MessageList.of(input.history).append({
      role: 'user',
      content: [{ type: 'text', text: input.userMessage }],
    }),
    ...indexRecorded(input.recordedSteps, ''),
    approvalAnswers: input.approvalAnswers,
    questionAnswers: input.questionAnswers,
    roster,
    lastConfigHex: input.recordedConfigSha256,
    shared: {
      budget: input.budget,
      ...(input.summary === undefined ? {} : { summary: input.summary }),
      memory: input.memory ?? [],
      recordedSteps: input.recordedSteps,
      charges: input.paymentCharges ?? [],
      waits: personWaits(input.turnId, input.requestTimes ?? [], [
        ...input.approvalAnswers,
        ...input.questionAnswers,
      ]),
    },
  };
  const entered = enterAgent(state, first, effects);
  if (!entered.ok) return end(state, [...effects, entered.effect]);
  return nextModelCall(deps, entered.value, effects, false);
}

/**
 * Makes `agent` the one answering: its prompt (with the turn's summary and memory), tools
 * and configuration. The configuration is committed first when it is not the newest one
 * committed, so every `model_call` names a recorded configuration (docs/replay.md).
 */
function enterAgent(state: TurnState, agent: TurnAgent, effects: Effects): Checked<TurnState> {
  let configSha256: Uint8Array | undefined;
  let configJson: string | undefined;
  let lastConfigHex = state.lastConfigHex;
  if (agent.model !== undefined) {
    let encoded: EncodedAgentConfig;
    try {
      encoded = encodeAgentConfig({
        model: agent.model,
        system: agent.system ?? '',
        tools: agent.tools,
        budget: state.shared.budget,
        requiredApprover: state.requiredApprover,
        ...(agent.memoryBudgetBytes ? { memoryBudgetBytes: agent.memoryBudgetBytes } : {}),
        ...(agent.name === '' ? {} : { agent: agent.name }),
        ...(agent.handoffs === undefined ? {} : { handoffs: agent.handoffs }),
        ...(agent.delegates === undefined ? {} : { delegates: agent.delegates }),
      });
    } catch (error) {
      if (!isAppError(error)) throw error;
      return { ok: false, effect: failure(error.code, `turn ${state.turnId}: ${error.message}`) };
    }
    configSha256 = encoded.sha256;
    configJson = encoded.json;
    if (hex(encoded.sha256) !== lastConfigHex) {
      lastConfigHex = hex(encoded.sha256);
      effects.push({
        type: 'commit_step',
        step: {
          kind: 'agent_config',
          record: { turnId: state.turnId, sha256: encoded.sha256, configJson: encoded.json },
        },
      });
    }
  }
  return {
    ok: true,
    value: {
      ...state,
      agentName: agent.name,
      handoffs: agent.handoffs,
      delegates: agent.delegates,
      visited: [...state.visited, agent.name],
      configSha256,
      configJson,
      lastConfigHex,
      system: systemWithMemory(
        systemWithSummary(agent.system, state.shared.summary),
        state.shared.memory,
        agent.memoryBudgetBytes ?? 0,
      ),
      tools: agent.tools,
    },
  };
}

/** Asks for the next model round trip, or replays it from the journal. */
function nextModelCall(
  deps: TurnMachineDeps,
  state: TurnState,
  effects: Effects,
  closing: boolean,
): StepResult {
  const stepNumber = state.modelSteps + 1;
  const messages = closing ? withClosingInstruction(state.messages) : state.messages;
  const next: TurnState = { ...state, messages, batch: undefined };
  const recorded = state.recordedModelCalls.get(stepNumber);
  if (recorded !== undefined) {
    if (recorded.closing !== closing) {
      return end(next, [
        ...effects,
        failure(
          'failed_precondition',
          `turn ${state.turnId}: recorded model call ${stepNumber} has closing=${recorded.closing} but the turn now expects closing=${closing}; the step budget changed between attempts`,
        ),
      ]);
    }
    const response = responseFromRecord(recorded);
    if (!response.ok) return end(next, [...effects, response.effect]);
    const timing = {
      step: stepNumber,
      closing,
      startedAtMs: recorded.startedAtMs,
      finishedAtMs: recorded.finishedAtMs,
    };
    return applyResponse(deps, next, response.value, timing, effects, true);
  }
  const parts: HashedRequest = {
    ...(state.system === undefined ? {} : { system: state.system }),
    messages,
    tools: state.tools.map(({ name, description, inputSchema }) => ({
      name,
      description,
      inputSchema,
    })),
    toolChoice: closing ? 'none' : 'auto',
  };
  const request = requestWithLazyMessages(parts, messages);
  const pendingModel =
    state.configSha256 === undefined
      ? { step: stepNumber, closing }
      : {
          step: stepNumber,
          closing,
          requestSha256: (deps.requestSha256 ?? modelRequestSha256)(parts, state.configSha256),
        };
  return {
    state: { ...next, phase: TurnPhase.AwaitingModel, pendingModel },
    effects: [
      ...effects,
      {
        type: 'call_model',
        step: stepNumber,
        closing,
        request,
        agent: state.agentName,
        ...(state.thread === '' ? {} : { thread: state.thread }),
      },
    ],
  };
}

/**
 * Commits the answering agent's configuration again when another thread committed another
 * since, so the model call about to be committed names the newest one (docs/replay.md).
 */
function reassertConfig(state: TurnState, effects: Effects): TurnState {
  const { configSha256, configJson } = state;
  if (configSha256 === undefined || configJson === undefined) return state;
  if (hex(configSha256) === state.lastConfigHex) return state;
  effects.push({
    type: 'commit_step',
    step: {
      kind: 'agent_config',
      record: { turnId: state.turnId, sha256: configSha256, configJson },
    },
  });
  return { ...state, lastConfigHex: hex(configSha256) };
}

interface ResponseTiming {
  readonly step: number;
  readonly closing: boolean;
  readonly requestSha256?: Uint8Array;
  readonly startedAtMs: number;
  readonly finishedAtMs: number;
}

function applyResponse(
  deps: TurnMachineDeps,
  responded: TurnState,
  response: ModelResponse,
  timing: ResponseTiming,
  effects: Effects,
  replayed: boolean,
): StepResult {
  const blocks = recordBlocks(responded, response.content);
  if (!blocks.ok) return end(responded, [...effects, blocks.effect]);
  const out: Effects = [...effects];
  const state = replayed ? responded : reassertConfig(responded, out);
  if (!replayed) {
    out.push({
      type: 'commit_step',
      step: {
        kind: 'model_call',
        record: {
          turnId: state.turnId,
          step: timing.step,
          model: response.model,
          content: blocks.value,
          stopReason: response.stopReason,
          usage: response.usage,
          startedAtMs: timing.startedAtMs,
          finishedAtMs: timing.finishedAtMs,
          closing: timing.closing,
          ...(state.configSha256 === undefined || timing.requestSha256 === undefined
            ? {}
            : { configSha256: state.configSha256, requestSha256: timing.requestSha256 }),
          ...(state.agentName === '' ? {} : { agent: state.agentName }),
          ...lineageOf(state),
        },
      },
    });
  }
  if (
    state.openedAtMs !== undefined &&
    threadRunMs(state.openedAtMs, timing.finishedAtMs, state.shared.waits) > DELEGATION_DEADLINE_MS
  ) {
    // The thread ran too long (waits for a person left out): its reply is recorded, not
    // acted on, and the caller is told instead.
    return end(
      { ...state, outcome: { content: deadlineResult(state.agentName), isError: true } },
      out,
    );
  }
  // Empty text blocks are dropped: the Messages API refuses them in history.
  const kept = response.content.filter((block) => block.type !== 'text' || block.text !== '');
  const messages =
    kept.length === 0
      ? state.messages
      : state.messages.append({ role: 'assistant', content: kept });
  const text = response.content
    .flatMap((block) => (block.type === 'text' ? [block.text] : []))
    .join('');
  const hasText = text.trim() !== '';

  if (timing.closing) {
    // Tool calls in a closing reply are ignored: the request offered none.
    return end({ ...state, messages }, [
      ...out,
      {
        type: 'finish',
        text: hasText ? text : FALLBACK_REPLY,
        steps: timing.step,
        fallback: !hasText,
      },
    ]);
  }
  const next: TurnState = { ...state, messages, modelSteps: timing.step };
  const uses = response.content.filter((block): block is ToolUseBlock => block.type === 'tool_use');
  if (uses.length === 0) {
    if (hasText) {
      return end(next, [...out, { type: 'finish', text, steps: timing.step, fallback: false }]);
    }
    // An empty reply is treated like a spent budget: one closing call, then the fallback.
    return nextModelCall(deps, next, out, true);
  }
  const calls: BatchCall[] = [];
  for (const block of blocks.value) {
    if (block.type !== 'tool_use') continue;
    const use = uses.find((u) => u.id === block.toolCallId);
    if (use !== undefined)
      calls.push({ use, argsJson: block.argsJson, status: { kind: 'pending' } });
  }
  return startBatch(
    deps,
    { ...next, batch: { step: timing.step, finishedAtMs: timing.finishedAtMs, calls } },
    out,
  );
}

/** Starts every call of a fresh batch, then settles. */
function startBatch(deps: TurnMachineDeps, state: TurnState, effects: Effects): StepResult {
  const batch = state.batch;
  if (batch === undefined) return settle(deps, state, effects);
  // Check for a lost side effect before starting anything: nothing may run in an ambiguous turn.
  for (const call of batch.calls) {
    const recordedCall = state.recordedToolCalls.get(call.use.id);
    if (
      recordedCall !== undefined &&
      recordedCall.effect === 'side_effect' &&
      !state.recordedToolResults.has(call.use.id) &&
      chargeOf(state, call.use.id) === undefined
    ) {
      return end(state, [
        ...effects,
        {
          type: 'ambiguous',
          toolCallId: call.use.id,
          reason: `side-effecting tool ${call.use.name} was committed in step ${recordedCall.step} but has no result; it may or may not have run, so it is not run again`,
        },
      ]);
    }
  }
  // tool_call commits go before every call they guard; results are committed as they settle.
  const commits: Effects = [];
  const calls: Effects = [];
  let next = state;
  for (let index = 0; index < batch.calls.length; index++) {
    next = resolveCall(deps, next, index, commits, calls);
  }
  return settle(deps, next, [...effects, ...commits, ...calls]);
}

/** Decides one pending call: reuse, run, pause, refuse or hand off. */
function resolveCall(
  deps: TurnMachineDeps,
  state: TurnState,
  index: number,
  commits: Effects,
  calls: Effects,
): TurnState {
  const call = callAt(state, index);
  const { use } = call;
  const recordedResult = state.recordedToolResults.get(use.id);
  if (use.name === ReservedTool.HandoffTo && state.handoffs !== undefined) {
    const refusal = decideHandoff(state, index);
    if (typeof refusal !== 'string') return setStatus(state, index, refusal);
    if (recordedResult === undefined) {
      return completeCall(state, index, { content: refusal, isError: true }, false, commits);
    }
  }
  if (recordedResult !== undefined) {
    return setStatus(state, index, {
      kind: 'done',
      content: recordedResult.content,
      isError: recordedResult.isError,
    });
  }
  const tool = state.tools.find((t) => t.name === use.name);
  if (tool === undefined) {
    return completeCall(
      state,
      index,
      { content: `Tool ${use.name} is not available in this conversation.`, isError: true },
      false,
      commits,
    );
  }
  if (use.name === ReservedTool.DelegateTo) return decideDelegation(state, index, commits);
  if (use.name === ReservedTool.HandoffTo) {
    const agent = use.input.agent;
    const reason = use.input.reason ?? '';
    if (typeof agent !== 'string' || agent === '' || typeof reason !== 'string') {
      return completeCall(
        state,
        index,
        badArgs(use.name, '{ agent: string, reason?: string }'),
        false,
        commits,
      );
    }
    return setStatus(state, index, {
      kind: 'handoff',
      handoff: { turnId: state.turnId, toolCallId: use.id, targetAgent: agent, reason },
    });
  }
  if (use.name === ReservedTool.AskUser) {
    const question = use.input.question;
    if (typeof question !== 'string' || question.trim() === '') {
      return completeCall(state, index, badArgs(use.name, '{ question: string }'), false, commits);
    }
    const request: QuestionRequestRecord = {
      turnId: state.turnId,
      requestId: deps.ids.questionRequestId(state.turnId, use.id),
      toolCallId: use.id,
      question,
    };
    const asked = setStatus(state, index, { kind: 'awaiting_answer', request });
    return answerQuestion(asked, index, state.questionAnswers, false, commits);
  }
  const charge = chargeOf(state, use.id);
  if (charge !== undefined && state.recordedToolCalls.has(use.id)) {
    // It met a 402 and its charge is committed: it waits for the payment, never runs again.
    return awaitPayment(deps, state, index, charge, commits, calls);
  }
  if (state.recordedToolCalls.has(use.id)) {
    // Committed, no result, and pure (side effects were refused in startBatch): run it again.
    return runCall(state, index, tool, '', false, commits, calls);
  }
  if (tool.needsApproval) {
    const argsSha256 = approvalArgsSha256(call.argsJson);
    const request: ApprovalRequestRecord = {
      turnId: state.turnId,
      requestId: deps.ids.approvalRequestId(state.turnId, use.id),
      toolCallId: use.id,
      toolName: use.name,
      argsJson: call.argsJson,
      argsSha256,
      reason: tool.approvalReason ?? `${use.name} needs approval before it runs.`,
      requiredApprover: state.requiredApprover,
    };
    const waiting = setStatus(state, index, { kind: 'awaiting_approval', request });
    // Answers for this request, and any answer from another turn so a replay is reported.
    const candidates = state.approvalAnswers.filter(
      (a) => a.requestId === request.requestId || a.turnId !== state.turnId,
    );
    return decideApproval(deps, waiting, index, candidates, false, commits, calls);
  }
  return runCall(state, index, tool, '', true, commits, calls);
}

function runCall(
  state: TurnState,
  index: number,
  tool: TurnTool,
  approvalRequestId: string,
  commitCall: boolean,
  commits: Effects,
  calls: Effects,
): TurnState {
  const batch = state.batch;
  const call = callAt(state, index);
  if (batch === undefined) return state;
  if (commitCall) {
    commits.push({
      type: 'commit_step',
      step: {
        kind: 'tool_call',
        record: {
          turnId: state.turnId,
          step: batch.step,
          toolCallId: call.use.id,
          toolName: call.use.name,
          argsJson: call.argsJson,
          effect: tool.effect,
          approvalRequestId,
          ...(state.agentName === '' ? {} : { agent: state.agentName }),
          ...lineageOf(state),
        },
      },
    });
  }
  calls.push({
    type: tool.host === 'control_plane' ? 'call_trusted_tool' : 'call_tool',
    call: toolRequest(state, batch.step, call),
    effect: tool.effect,
  });
  return setStatus(state, index, { kind: 'running', effect: tool.effect });
}

/** The shell's view of a call of the batch of round trip `step`. */
function toolRequest(state: TurnState, step: number, call: BatchCall): ToolCallRequest {
  return {
    turnId: state.turnId,
    toolCallId: call.use.id,
    name: call.use.name,
    input: call.use.input,
    argsJson: call.argsJson,
    step,
    maxSteps: state.maxSteps,
    ...(state.thread === '' ? {} : { thread: state.thread }),
  };
}

/** The charge committed for tool call `id` of the turn, if one is. */
function chargeOf(state: TurnState, id: string): ChargeFacts | undefined {
  return state.shared.charges.find((charge) => charge.toolCallId === id);
}

/** Where a running call's payment stands; undefined for a call without one. */
function runningPhase(state: TurnState, index: number): 'charging' | 'settling' | undefined {
  const { status } = callAt(state, index);
  return status.kind === 'running' ? status.payment : undefined;
}

/** The call met a 402: its challenge goes to the control plane. */
function requestCharge(
  state: TurnState,
  index: number,
  challenge: PaymentRequired,
  effects: Effects,
): TurnState {
  const call = callAt(state, index);
  const step = state.batch?.step ?? 0;
  effects.push({ type: 'request_charge', call: toolRequest(state, step, call), challenge });
  // Nothing is paid while the control plane reads the challenge: the call's own effect holds.
  const effect = call.status.kind === 'running' ? call.status.effect : 'pure';
  return setStatus(state, index, { kind: 'running', effect, payment: 'charging' });
}

/** The control plane's answer to a charge: a refusal ends the call, a charge awaits approval. */
function answerCharge(
  deps: TurnMachineDeps,
  state: TurnState,
  index: number,
  event: Extract<TurnEvent, { type: 'charge_answered' }>,
  effects: Effects,
): TurnState {
  const call = callAt(state, index);
  if ('refusal' in event.answer) {
    const content = chargeRefusedResult(call.use.name, event.answer.refusal);
    return completeCall(state, index, { content, isError: true }, false, effects);
  }
  const { charge } = event.answer;
  const mismatch = chargeMismatch(charge, {
    turnId: state.turnId,
    toolCallId: call.use.id,
    requestId: deps.ids.paymentApprovalRequestId(state.turnId, call.use.id),
  });
  if (mismatch !== undefined) {
    throw misfit(state, event, `${mismatch}, not tool call ${call.use.id}'s`);
  }
  return awaitPayment(deps, state, index, charge, effects, effects);
}

/** The call waits for its charge's approval; a recorded answer decides it at once. */
function awaitPayment(
  deps: TurnMachineDeps,
  state: TurnState,
  index: number,
  charge: ChargeFacts,
  commits: Effects,
  calls: Effects,
): TurnState {
  const call = callAt(state, index);
  const request = paymentApprovalRequest(charge, call.use.name, state.requiredApprover);
  const waiting = setStatus(state, index, { kind: 'awaiting_approval', request, payment: charge });
  const candidates = state.approvalAnswers.filter(
    (a) => a.requestId === request.requestId || a.turnId !== state.turnId,
  );
  return decideApproval(deps, waiting, index, candidates, false, commits, calls);
}

/**
 * Applies the first acceptable answer to the call awaiting approval at `index`; keeps it
 * waiting (with the last rejection) when none is. A live answer passes one list as both
 * `commits` and `calls`, which keeps the tool_call commit before its call.
 */
function decideApproval(
  deps: TurnMachineDeps,
  state: TurnState,
  index: number,
  answers: readonly ApprovalAnswer[],
  live: boolean,
  commits: Effects,
  calls: Effects,
): TurnState {
  const call = callAt(state, index);
  if (call.status.kind !== 'awaiting_approval') return state;
  const { request } = call.status;
  let rejection: string | undefined;
  for (const answer of answers) {
    const verdict = verifyApprovalAnswer(
      answer,
      request,
      deps.verifier,
      deps.approvalPublicKey,
      deps.approvalUse,
    );
    if (!verdict.ok) {
      rejection = verdict.reason;
      continue;
    }
    const charge = call.status.payment;
    if (charge !== undefined) {
      if (answer.decision === 'denied') {
        const content = paymentDeniedResult(call.use.name, answer);
        return completeCall(state, index, { content, isError: false }, true, commits);
      }
      // Approved: the control plane pays, with the wallet only it holds.
      const step = state.batch?.step ?? 0;
      calls.push({
        type: 'settle_payment',
        call: toolRequest(state, step, call),
        approvalRequestId: request.requestId,
      });
      return setStatus(state, index, {
        kind: 'running',
        effect: 'side_effect',
        payment: 'settling',
      });
    }
    if (answer.decision === 'denied') {
      const note = answer.comment === '' ? '' : ` Their note: ${answer.comment}`;
      return completeCall(
        state,
        index,
        {
          content: `The call to ${request.toolName} was denied by ${answer.answeredBy || 'an approver'} and did not run.${note} Do not retry it with the same arguments; continue without it or tell the user.`,
          isError: false,
        },
        true,
        commits,
      );
    }
    const tool = state.tools.find((t) => t.name === request.toolName);
    if (tool === undefined) return state;
    return runCall(state, index, tool, request.requestId, true, commits, calls);
  }
  if (rejection === undefined && !live) return state;
  return setStatus(state, index, {
    kind: 'awaiting_approval',
    request,
    ...(rejection === undefined ? {} : { rejection }),
    ...(call.status.payment === undefined ? {} : { payment: call.status.payment }),
  });
}

/** Applies an answer to the question awaited at `index`, if one fits. */
function answerQuestion(
  state: TurnState,
  index: number,
  answers: readonly QuestionAnswer[],
  live: boolean,
  effects: Effects,
): TurnState {
  const call = callAt(state, index);
  if (call.status.kind !== 'awaiting_answer') return state;
  const { request } = call.status;
  const answer = answers.find(
    (a) => a.requestId === request.requestId && a.turnId === request.turnId,
  );
  if (answer !== undefined) {
    return completeCall(state, index, { content: answer.answer, isError: false }, false, effects);
  }
  if (!live) return state;
  const [first] = answers;
  const rejection =
    first === undefined
      ? 'no answer given'
      : `answer is for request ${first.requestId} of turn ${first.turnId}, not ${request.requestId} of turn ${request.turnId}`;
  return setStatus(state, index, { kind: 'awaiting_answer', request, rejection });
}

/** Marks the call at `index` done and commits its result. */
function completeCall(
  state: TurnState,
  index: number,
  outcome: ToolOutcome,
  denied: boolean,
  effects: Effects,
  delegate?: string,
): TurnState {
  const call = callAt(state, index);
  effects.push({
    type: 'commit_step',
    step: {
      kind: 'tool_result',
      record: {
        turnId: state.turnId,
        toolCallId: call.use.id,
        content: outcome.content,
        isError: outcome.isError,
        denied,
        ...(state.thread === '' ? {} : { thread: state.thread }),
        ...(delegate === undefined ? {} : { delegate }),
      },
    },
  });
  return setStatus(state, index, {
    kind: 'done',
    content: outcome.content,
    isError: outcome.isError,
  });
}

/** After any change to the batch: wait, pause, hand off, or go back to the model. */
function settle(deps: TurnMachineDeps, state: TurnState, effects: Effects): StepResult {
  const batch = state.batch;
  if (batch === undefined) return { state, effects };
  // Threads start at once, side by side, in the order the model asked for them (each
  // start settles again and so starts the next); the reply's other calls run meanwhile.
  const pending = batch.calls.findIndex((call) => call.status.kind === 'delegate_pending');
  if (pending >= 0) return startThread(deps, state, pending, effects);
  if (batch.calls.some((call) => call.status.kind === 'running' || isActiveThread(call))) {
    return { state: { ...state, phase: TurnPhase.AwaitingTools }, effects };
  }
  const pause = pauseOf(state);
  if (pause !== undefined) {
    return { state: { ...state, phase: TurnPhase.Paused }, effects: [...effects, pause] };
  }
  // The handoff waits for its siblings so the target agent sees their results.
  for (let index = 0; index < batch.calls.length; index++) {
    const status = callAt(state, index).status;
    if (status.kind !== 'handoff') continue;
    if (state.handoffs === undefined) {
      return end(state, [...effects, { type: 'handoff', handoff: status.handoff }]);
    }
    return handOver(deps, state, index, status.handoff, effects);
  }
  return toolResultsToModel(deps, state, effects);
}

/**
 * Decides a `__handoff_to` call when handoffs continue the turn: the call's handoff status,
 * or the refusal its model reads as the call's result.
 */
function decideHandoff(state: TurnState, index: number): CallStatus | string {
  const { use } = callAt(state, index);
  if (state.thread !== '') {
    return `Handoff refused: you are doing a task ${state.ancestors.at(-1) || 'another agent'} delegated to you. Answer it yourself: your answer goes back to that agent.`;
  }
  const ask = readHandoffAsk(use.input);
  if (typeof ask === 'string') return ask;
  const earlier = state.batch?.calls.slice(0, index).find((call) => call.status.kind === 'handoff');
  const refusal = handoffRefusal(
    {
      agent: state.agentName,
      allowed: state.handoffs ?? [],
      visited: state.visited,
      roster: state.roster,
      ...(earlier?.status.kind === 'handoff'
        ? { earlierHandoff: earlier.status.handoff.targetAgent }
        : {}),
    },
    ask,
  );
  if (refusal !== undefined) return refusal;
  return {
    kind: 'handoff',
    handoff: {
      turnId: state.turnId,
      toolCallId: use.id,
      targetAgent: ask.target,
      reason: ask.reason,
    },
  };
}

/**
 * Moves the turn to the handoff's target once every other call of the reply has settled:
 * the handing-off call's result, the `agent_handoff` step, the target's configuration when
 * it is new, then the target's model call, under the same turn id and step budget.
 */
function handOver(
  deps: TurnMachineDeps,
  state: TurnState,
  index: number,
  handoff: HandoffRecord,
  effects: Effects,
): StepResult {
  const batch = state.batch;
  const target = state.roster.get(handoff.targetAgent);
  if (batch === undefined || target === undefined) {
    return end(state, [
      ...effects,
      failure('internal', `turn ${state.turnId}: handoff to ${handoff.targetAgent} has no agent`),
    ]);
  }
  const out: Effects = [...effects];
  const ask: HandoffAsk = { target: handoff.targetAgent, reason: handoff.reason };
  const recordedResult = state.recordedToolResults.get(handoff.toolCallId);
  const settled =
    recordedResult === undefined
      ? completeCall(
          state,
          index,
          { content: handoffResult(state.agentName, ask), isError: false },
          false,
          out,
        )
      : setStatus(state, index, {
          kind: 'done',
          content: recordedResult.content,
          isError: recordedResult.isError,
        });
  const recorded = state.recordedHandoffs.get(handoff.toolCallId);
  if (recorded !== undefined && recorded.toAgent !== handoff.targetAgent) {
    return end(state, [
      ...out,
      failure(
        'failed_precondition',
        `turn ${state.turnId}: recorded handoff ${handoff.toolCallId} went to ${recorded.toAgent} but the turn now hands off to ${handoff.targetAgent}; the agents' configuration changed between attempts`,
      ),
    ]);
  }
  if (recorded === undefined) {
    out.push({
      type: 'commit_step',
      step: {
        kind: 'agent_handoff',
        record: {
          turnId: state.turnId,
          step: batch.step,
          toolCallId: handoff.toolCallId,
          fromAgent: state.agentName,
          toAgent: handoff.targetAgent,
          reason: handoff.reason,
        },
      },
    });
  }
  const entered = enterAgent(settled, target, out);
  if (!entered.ok) return end(settled, [...out, entered.effect]);
  return toolResultsToModel(deps, entered.value, out);
}

/**
 * Decides a `__delegate_to` call (docs/turns.md, "Delegation"): the refusal its model reads
 * as the call's result, or a thread to start once the reply's other calls have settled.
 */
function decideDelegation(state: TurnState, index: number, commits: Effects): TurnState {
  const { use } = callAt(state, index);
  const ask = readDelegateAsk(use.input);
  const refusal =
    typeof ask === 'string'
      ? ask
      : delegationRefusal(
          {
            agent: state.agentName,
            allowed: state.delegates ?? [],
            ancestors: state.ancestors,
            depth: state.depth,
            roster: state.roster,
          },
          ask,
        );
  if (refusal !== undefined || typeof ask === 'string') {
    return completeCall(state, index, { content: refusal ?? '', isError: true }, false, commits);
  }
  return setStatus(state, index, { kind: 'delegate_pending', ask });
}

/**
 * Starts the thread of the `__delegate_to` call at `index`: its `tool_call` is committed
 * first (the thread's intent, with the caller's lineage), then the delegate enters with
 * the task as its only message, its own configuration, the turn's step budget and its
 * recorded steps, and asks its model. It may not hand off, and gets neither the
 * conversation's history, summary nor memory: only the task.
 */
function startThread(
  deps: TurnMachineDeps,
  parent: TurnState,
  index: number,
  effects: Effects,
): StepResult {
  const call = callAt(parent, index);
  const batch = parent.batch;
  const status = call.status;
  const target =
    status.kind === 'delegate_pending' ? parent.roster.get(status.ask.target) : undefined;
  if (batch === undefined || status.kind !== 'delegate_pending' || target === undefined) {
    return end(parent, [
      ...effects,
      failure('internal', `turn ${parent.turnId}: delegation ${call.use.id} has no agent`),
    ]);
  }
  const out: Effects = [...effects];
  if (!parent.recordedToolCalls.has(call.use.id)) {
    out.push({
      type: 'commit_step',
      step: {
        kind: 'tool_call',
        record: {
          turnId: parent.turnId,
          step: batch.step,
          toolCallId: call.use.id,
          toolName: call.use.name,
          argsJson: call.argsJson,
          effect: 'pure',
          approvalRequestId: '',
          ...(parent.agentName === '' ? {} : { agent: parent.agentName }),
          ...lineageOf(parent),
        },
      },
    });
  }
  const thread = call.use.id;
  const base: TurnState = {
    ...idleState,
    phase: TurnPhase.AwaitingModel,
    turnId: parent.turnId,
    maxSteps: parent.maxSteps,
    requiredApprover: parent.requiredApprover,
    messages: MessageList.of([]).append({
      role: 'user',
      content: [{ type: 'text', text: status.ask.task }],
    }),
    ...indexRecorded(parent.shared.recordedSteps, thread),
    approvalAnswers: parent.approvalAnswers,
    questionAnswers: parent.questionAnswers,
    roster: parent.roster,
    lastConfigHex: parent.lastConfigHex,
    shared: {
      budget: parent.shared.budget,
      memory: [],
      recordedSteps: parent.shared.recordedSteps,
      charges: parent.shared.charges,
      waits: parent.shared.waits,
    },
    thread,
    depth: parent.depth + 1,
    ancestors: [...parent.ancestors, parent.agentName],
    openedAtMs: batch.finishedAtMs,
  };
  const childEffects: Effects = [];
  const entered = enterAgent(base, target, childEffects);
  const started = entered.ok
    ? nextModelCall(deps, { ...entered.value, handoffs: [] }, childEffects, false)
    : end(base, [...childEffects, entered.effect]);
  return absorb(deps, parent, index, started, out);
}

/**
 * Takes in what a delegate's thread did: its commits and calls go out as they are; its
 * answer (or the reason it has none) becomes the `__delegate_to` call's result; its pause
 * pauses the whole turn, with the same request; its failure, ambiguity or cancellation
 * ends the whole turn, as the same at the top would.
 */
function absorb(
  deps: TurnMachineDeps,
  parent: TurnState,
  index: number,
  result: StepResult,
  effects: Effects,
): StepResult {
  const child = result.state;
  const call = callAt(parent, index);
  const ask =
    call.status.kind === 'delegated' || call.status.kind === 'delegate_pending'
      ? call.status.ask
      : { target: child.agentName, task: '' };
  const out: Effects = [...effects];
  let terminal: TerminalEffect | undefined;
  for (const effect of result.effects) {
    if (isTerminalEffect(effect)) terminal ??= effect;
    else out.push(effect);
  }
  const next = setStatus({ ...parent, lastConfigHex: child.lastConfigHex }, index, {
    kind: 'delegated',
    ask,
    child,
  });
  if (terminal === undefined) {
    if (child.phase !== TurnPhase.Done) return settle(deps, next, out);
    const outcome = child.outcome ?? { content: emptyAnswerResult(ask.target), isError: true };
    return settle(deps, completeCall(next, index, outcome, false, out, ask.target), out);
  }
  switch (terminal.type) {
    case 'finish': {
      const outcome = terminal.fallback
        ? { content: emptyAnswerResult(ask.target), isError: true }
        : { content: terminal.text, isError: false };
      return settle(deps, completeCall(next, index, outcome, false, out, ask.target), out);
    }
    case 'pause_for_approval':
    case 'pause_for_question':
      return settle(deps, next, out);
    default:
      return end(next, [...out, terminal]);
  }
}

/** The index of the delegated call whose thread `event` belongs to, or -1 when it is this one's. */
function threadOf(state: TurnState, event: TurnEvent): number {
  const calls = state.batch?.calls ?? [];
  switch (event.type) {
    case 'model_responded':
    case 'model_failed': {
      const thread = event.thread ?? '';
      return thread === state.thread ? -1 : calls.findIndex((call) => holdsThread(call, thread));
    }
    case 'tool_finished':
    case 'trusted_tool_answered':
    case 'charge_answered':
    case 'tool_outcome_unknown': {
      const id = event.toolCallId;
      return calls.some((c) => c.use.id === id && c.status.kind === 'running')
        ? -1
        : calls.findIndex((call) => runsTool(call, id));
    }
    case 'approval_answered':
    case 'question_answered': {
      const index = firstWait(state);
      return index >= 0 && callAt(state, index).status.kind === 'delegated' ? index : -1;
    }
    default:
      return -1;
  }
}

/** True when `thread` is the delegated call's own thread or one under it. */
function holdsThread(call: BatchCall, thread: string): boolean {
  const { status } = call;
  if (status.kind !== 'delegated') return false;
  return (
    status.child.thread === thread ||
    (status.child.batch?.calls.some((inner) => holdsThread(inner, thread)) ?? false)
  );
}

/** True when the tool call `id` runs in the delegated call's thread or one under it. */
function runsTool(call: BatchCall, id: string): boolean {
  const { status } = call;
  if (status.kind !== 'delegated') return false;
  return (
    status.child.batch?.calls.some(
      (inner) => (inner.use.id === id && inner.status.kind === 'running') || runsTool(inner, id),
    ) ?? false
  );
}

/**
 * The model call `thread` ('' for the turn's own) has in flight, however deep the thread:
 * replay checks its digest. Threads run side by side, so several may be in flight at once.
 */
export function pendingModelCall(state: TurnState, thread = ''): TurnState['pendingModel'] {
  if (state.thread === thread) return state.pendingModel;
  const holder = state.batch?.calls.find((call) => holdsThread(call, thread));
  return holder?.status.kind === 'delegated'
    ? pendingModelCall(holder.status.child, thread)
    : undefined;
}

/** A delegated call whose thread waits for its model or its tools. */
function isActiveThread(call: BatchCall): boolean {
  const { status } = call;
  return (
    status.kind === 'delegated' &&
    (status.child.phase === TurnPhase.AwaitingModel ||
      status.child.phase === TurnPhase.AwaitingTools)
  );
}

/** The first call, in the reply's order, that waits for a person: itself or inside its thread. */
function firstWait(state: TurnState): number {
  return (
    state.batch?.calls.findIndex(
      ({ status }) =>
        status.kind === 'awaiting_approval' ||
        status.kind === 'awaiting_answer' ||
        (status.kind === 'delegated' && status.child.phase === TurnPhase.Paused),
    ) ?? -1
  );
}

/** The pause the turn shows for its first waiting call, however deep its thread. */
function pauseOf(state: TurnState): TurnEffect | undefined {
  const index = firstWait(state);
  if (index < 0) return undefined;
  const { status } = callAt(state, index);
  switch (status.kind) {
    case 'awaiting_approval':
    case 'awaiting_answer':
      return {
        type: status.kind === 'awaiting_approval' ? 'pause_for_approval' : 'pause_for_question',
        request: status.request,
        ...(status.rejection === undefined ? {} : { rejection: status.rejection }),
      } as TurnEffect;
    case 'delegated':
      return pauseOf(status.child);
    default:
      return undefined;
  }
}

/** A side-effecting call running in this thread or any thread under it. */
function sideEffectInFlight(state: TurnState): BatchCall | undefined {
  for (const call of state.batch?.calls ?? []) {
    const { status } = call;
    if (status.kind === 'running' && status.effect === 'side_effect') return call;
    if (status.kind === 'delegated') {
      const inner = sideEffectInFlight(status.child);
      if (inner !== undefined) return inner;
    }
  }
  return undefined;
}

/** The recorded steps of one thread ('' for the top), keyed as the loop looks them up. */
function indexRecorded(
  steps: readonly TurnStep[],
  thread: string,
): Pick<
  TurnState,
  'recordedModelCalls' | 'recordedToolCalls' | 'recordedToolResults' | 'recordedHandoffs'
> {
  const recordedModelCalls = new Map<number, ModelCallRecord>();
  const recordedToolCalls = new Map<string, ToolCallRecord>();
  const recordedToolResults = new Map<string, ToolResultRecord>();
  const recordedHandoffs = new Map<string, AgentHandoffRecord>();
  for (const recorded of steps) {
    switch (recorded.kind) {
      case 'model_call':
        if ((recorded.record.thread ?? '') === thread) {
          recordedModelCalls.set(recorded.record.step, recorded.record);
        }
        break;
      case 'tool_call':
        if ((recorded.record.thread ?? '') === thread) {
          recordedToolCalls.set(recorded.record.toolCallId, recorded.record);
        }
        break;
      case 'tool_result':
        if ((recorded.record.thread ?? '') === thread) {
          recordedToolResults.set(recorded.record.toolCallId, recorded.record);
        }
        break;
      case 'agent_handoff':
        if (thread === '') recordedHandoffs.set(recorded.record.toolCallId, recorded.record);
        break;
      case 'agent_config':
        // Not a step of the loop: each agent's configuration is decided from the input.
        break;
    }
  }
  return { recordedModelCalls, recordedToolCalls, recordedToolResults, recordedHandoffs };
}

/** The lineage a thread's `model_call` and `tool_call` carry; nothing at the top. */
function lineageOf(state: TurnState): { thread?: string; depth?: number } {
  return state.thread === '' ? {} : { thread: state.thread, depth: state.depth };
}

/** Every call of the reply is done: their results go to the model in one user message. */
function toolResultsToModel(deps: TurnMachineDeps, state: TurnState, effects: Effects): StepResult {
  const batch = state.batch;
  if (batch === undefined) return { state, effects };
  const results: ToolResultBlock[] = [];
  for (const call of batch.calls) {
    if (call.status.kind !== 'done') {
      // Unreachable: every other status returned above.
      return end(state, [
        ...effects,
        failure('internal', `turn ${state.turnId}: tool call ${call.use.id} did not settle`),
      ]);
    }
    results.push({
      type: 'tool_result',
      toolUseId: call.use.id,
      content: call.status.content,
      isError: call.status.isError,
    });
  }
  const next: TurnState = {
    ...state,
    batch: undefined,
    messages: state.messages.append({ role: 'user', content: results }),
  };
  return nextModelCall(deps, next, effects, next.modelSteps >= next.maxSteps);
}

function withClosingInstruction(messages: MessageList): MessageList {
  const instruction: ContentBlock = { type: 'text', text: CLOSING_INSTRUCTION };
  const last = messages.at(-1);
  // Merged into the tool results' user message: roles must alternate.
  if (last !== undefined && last.role === 'user') {
    return messages.replaceLast({ role: 'user', content: [...last.content, instruction] });
  }
  return messages.append({ role: 'user', content: [instruction] });
}

/**
 * The request of a `call_model` effect: `parts` whose `messages` array is built from
 * `list` on first read, once. Replay reads only the digest, so it never builds the array;
 * a provider reads it once per model call.
 */
function requestWithLazyMessages(parts: HashedRequest, list: MessageList): ModelRequest {
  let built: readonly Message[] | undefined;
  const request = { ...parts } as Omit<ModelRequest, 'messages'>;
  return Object.defineProperty(request, 'messages', {
    enumerable: true,
    get: () => (built ??= list.toArray()),
  }) as ModelRequest;
}

type Checked<T> = { ok: true; value: T } | { ok: false; effect: TurnEffect };

function recordBlocks(state: TurnState, content: readonly OutputBlock[]): Checked<RecordedBlock[]> {
  const seen = new Set<string>();
  const blocks: RecordedBlock[] = [];
  for (const block of content) {
    if (block.type === 'text') {
      blocks.push({ type: 'text', text: block.text });
      continue;
    }
    if (seen.has(block.id)) {
      return {
        ok: false,
        effect: failure(
          'internal',
          `turn ${state.turnId}: the model returned tool call id ${block.id} twice in one response`,
        ),
      };
    }
    seen.add(block.id);
    let argsJson: string;
    try {
      argsJson = canonicalJson(block.input);
    } catch (error) {
      if (!isAppError(error)) throw error;
      return {
        ok: false,
        effect: failure(
          'internal',
          `turn ${state.turnId}: tool call ${block.id} has arguments that are not JSON: ${error.message}`,
        ),
      };
    }
    blocks.push({ type: 'tool_use', toolCallId: block.id, name: block.name, argsJson });
  }
  return { ok: true, value: blocks };
}

function responseFromRecord(record: ModelCallRecord): Checked<ModelResponse> {
  const content: OutputBlock[] = [];
  for (const block of record.content) {
    if (block.type === 'text') {
      content.push(block);
      continue;
    }
    let input: unknown;
    try {
      input = JSON.parse(block.argsJson);
    } catch {
      input = undefined;
    }
    if (!isJsonObject(input)) {
      return {
        ok: false,
        effect: failure(
          'data_loss',
          `turn ${record.turnId}: recorded tool call ${block.toolCallId} in step ${record.step} has arguments that are not a JSON object; verify the journal`,
        ),
      };
    }
    content.push({ type: 'tool_use', id: block.toolCallId, name: block.name, input });
  }
  return {
    ok: true,
    value: { model: record.model, content, stopReason: record.stopReason, usage: record.usage },
  };
}

function callAt(state: TurnState, index: number): BatchCall {
  const call = state.batch?.calls[index];
  if (call === undefined) {
    throw new AppError('internal', `turn ${state.turnId}: no tool call at index ${index}`);
  }
  return call;
}

function setStatus(state: TurnState, index: number, status: CallStatus): TurnState {
  const batch = state.batch;
  if (batch === undefined) return state;
  const calls = batch.calls.map((call, i) => (i === index ? { ...call, status } : call));
  return { ...state, batch: { ...batch, calls } };
}

function runningCall(state: TurnState, event: Extract<TurnEvent, { toolCallId: string }>): number {
  const index =
    state.batch?.calls.findIndex(
      (call) => call.use.id === event.toolCallId && call.status.kind === 'running',
    ) ?? -1;
  if (state.phase !== TurnPhase.AwaitingTools || index < 0) {
    throw misfit(state, event, `tool call ${event.toolCallId} is not running`);
  }
  return index;
}

function pausedCall(
  state: TurnState,
  event: TurnEvent,
  kind: 'awaiting_approval' | 'awaiting_answer',
): number {
  // The pause names the first waiting call; answers go to it.
  const index = state.batch?.calls.findIndex((call) => call.status.kind === kind) ?? -1;
  const first = firstWait(state);
  if (state.phase !== TurnPhase.Paused || index < 0 || index !== first) {
    throw misfit(state, event, `the turn is not paused for ${kind.replace('_', ' ')}`);
  }
  return index;
}

function threadName(thread: string | undefined): string {
  return thread === undefined || thread === '' ? 'the turn' : `thread ${thread}`;
}

function end(state: TurnState, effects: Effects): StepResult {
  return { state: { ...state, phase: TurnPhase.Done, pendingModel: undefined }, effects };
}

function failure(code: ErrorCode, message: string): TurnEffect {
  return { type: 'fail', code, message, retryable: false };
}

function badArgs(name: string, shape: string): ToolOutcome {
  return { content: `${name} needs arguments of the form ${shape}.`, isError: true };
}

function misfit(state: TurnState, event: TurnEvent, why: string): AppError {
  return new AppError(
    'failed_precondition',
    `turn ${state.turnId || '(not started)'}: cannot apply ${event.type} in phase ${state.phase}: ${why}`,
    { details: { turn: state.turnId, phase: state.phase, event: event.type } },
  );
}
