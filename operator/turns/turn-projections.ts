/**
 * What the harness and the API are given of a journal view (journal-view.ts): the steps,
 * answers and history of a turn's start, the transcript, a turn's reply and its cards; and
 * the API's summary of a conversation.
 * Pure.
 *
 * The committed-turn filter (docs/design.md "One turn, end to end", 6): history and transcript
 * hold only turns with at least one `turn_dispatched`; history holds complete turns only,
 * the transcript also paused (a card, never partial text), ambiguous and handed-off ones.
 */
import { AppError } from '../../common/errors';
import { partitionOf } from '../../common/partition-name';
import {
  ResolveDecision,
  type ApprovalRequest,
  type ApprovalResponse,
  type QuestionResponse,
} from '../../proto/gen/polychrome/events/v1/events';
import { voidedToolCalls } from '../../common/turn-resolution';
import type {
  HistoryMessage,
  RequestTime,
  Role,
  Step,
} from '../../proto/gen/polychrome/harness/v1/harness';
import { ERASED_TEXT, isAnswerErased, isMessageErased } from './erased-entries';
import { hex } from './decoded-event';
import type { JournalView, TurnView } from './journal-view-types';
import { pendingRequest } from './turn-state';
import { historyReply } from './history-window';
import { Visibility } from '../api/v1alpha1/conversation-values';
import { type Conversation } from '../api/v1alpha1/conversation-types';
import {
  TurnStatus,
  type ApprovalCard,
  type ConversationSummary,
  type QuestionCard,
  type TranscriptTurn,
  type TurnOutcome,
  type TurnReply,
} from './turn-service';

// harness.v1 `Role` values, spelled here so this module does not load the generated
// harness file (it pulls in @grpc/grpc-js); journal-view.test.ts pins them.
const ROLE_USER = 1 satisfies Role;
const ROLE_ASSISTANT = 2 satisfies Role;

/**
 * The turn's committed steps as harness `Step`s for `TurnStart.recorded_steps`, in journal
 * order (sequence 0: the harness ignores it there). A side-effecting `tool_call` an admin
 * resolved as `did_not_run` is left out (common/turn-resolution.ts), so the harness runs
 * the call again; the journal keeps it.
 */
export function recordedSteps(turn: TurnView): Step[] {
  const voided = voidedToolCallsOf(turn);
  const steps = voided.size === 0 ? turn.steps : turn.steps.filter((s) => !voided.has(s.position));
  return steps.map((step): Step => {
    switch (step.kind) {
      case 'model_call':
        return {
          sequence: 0,
          step: { $case: 'modelCall', value: step.payload },
          commitWithResult: false,
        };
      case 'tool_call':
        return {
          sequence: 0,
          step: { $case: 'toolCall', value: step.payload },
          commitWithResult: false,
        };
      case 'tool_result':
        return {
          sequence: 0,
          step: { $case: 'toolResult', value: step.payload },
          commitWithResult: false,
        };
      case 'agent_handoff':
        return {
          sequence: 0,
          step: { $case: 'agentHandoff', value: step.payload },
          commitWithResult: false,
        };
    }
  });
}

/** Positions of the turn's `tool_call`s that `did_not_run` resolutions void (common/turn-resolution.ts). */
function voidedToolCallsOf(turn: TurnView): ReadonlySet<number> {
  if (turn.resolutions.length === 0) return new Set();
  return voidedToolCalls(
    turn.resolutions.map(({ position, response }) => ({
      position,
      toolCallId: response.toolCallId,
      didNotRun: response.decision === ResolveDecision.RESOLVE_DECISION_DID_NOT_RUN,
    })),
    turn.steps.flatMap((s) =>
      s.kind === 'tool_call' ? [{ position: s.position, toolCallId: s.payload.toolCallId }] : [],
    ),
  );
}

/** Every approval answer of the turn, in journal order (`TurnStart.approval_answers`). */
export function approvalAnswers(turn: TurnView): ApprovalResponse[] {
  return turn.approvalResponses.map((r) => r.response);
}

/** Every question answer of the turn, in journal order (`TurnStart.question_answers`). */
export function questionAnswers(turn: TurnView): QuestionResponse[] {
  return turn.questionResponses.map((r) => r.response);
}

/**
 * When each approval and question request of the turn was committed, in journal order
 * (`TurnStart.request_times`): the harness leaves the waits for a person out of a
 * delegation thread's deadline (docs/turns.md, "Delegation"). A request recorded without a
 * time is left out.
 */
export function requestTimes(turn: TurnView): RequestTime[] {
  return [...turn.approvalRequests, ...turn.questionRequests]
    .filter(({ request }) => request.requestedAtMs > 0)
    .sort((a, b) => a.position - b.position)
    .map(({ request }) => ({
      requestId: request.requestId,
      requestedAtMs: request.requestedAtMs,
    }));
}

/**
 * The agent's history for `TurnStart.history`: the window the turn's latest dispatch
 * recorded (history-window.ts): for each complete turn that was dispatched (the
 * committed-turn filter) from its `history_from` up to the turn's own message, in order,
 * the user's text and the final reply text. Reads only the window and the turns after it.
 */
export function committedHistory(view: JournalView, turn: TurnView): HistoryMessage[] {
  const from = turn.dispatches.at(-1)?.historyFrom ?? 0;
  const newestFirst: HistoryMessage[] = [];
  for (const earlier of view.newestTurns()) {
    if (earlier.messagePosition >= turn.messagePosition) continue;
    if (earlier.messagePosition < from) break;
    const reply = historyReply(earlier);
    if (reply === undefined) continue;
    newestFirst.push(
      { role: ROLE_ASSISTANT, content: [{ block: { $case: 'text', value: reply } }] },
      { role: ROLE_USER, content: [{ block: { $case: 'text', value: earlier.text } }] },
    );
  }
  return newestFirst.reverse();
}

/**
 * The summary the turn's latest dispatch recorded (`summary_position`), for
 * `TurnStart.summary`: empty when it recorded none, or when the summary has been erased
 * since (an erasure takes it out of every later request).
 */
export function committedSummary(view: JournalView, turn: TurnView): string {
  const position = turn.dispatches.at(-1)?.summaryPosition ?? 0;
  return position === 0 ? '' : (view.summaryAt(position)?.text ?? '');
}

/**
 * The transcript: complete, paused, ambiguous and handed-off turns that were dispatched,
 * oldest first. Orphans (in flight or crashed) and never-dispatched turns are absent.
 */
export function transcriptTurns(view: JournalView): TranscriptTurn[] {
  const out: TranscriptTurn[] = [];
  for (const turn of view.turns) {
    if (turn.dispatches.length === 0) continue;
    const outcome = outcomeOf(turn);
    if (outcome === undefined) continue;
    out.push({
      turnId: turn.turnId,
      position: turn.messagePosition,
      user: {
        text: isMessageErased(turn) ? ERASED_TEXT : turn.text,
        caller: turn.attribution.caller,
        receivedAtMs: turn.receivedAtMs,
      },
      ...outcome,
    });
  }
  return out;
}

/**
 * The reply for a settled or paused turn (`undefined` for an orphan or a never-dispatched
 * turn); `requestedAt` is the position of its message.
 */
export function turnReplyOf(conversationId: string, turn: TurnView): TurnReply | undefined {
  const outcome = outcomeOf(turn);
  if (outcome === undefined) return undefined;
  return { conversationId, turnId: turn.turnId, requestedAt: turn.messagePosition, ...outcome };
}

/**
 * The reply of a turn that must have settled or paused by now.
 *
 * @throws AppError `unavailable` when it has not (a retry with the same key is safe).
 */
export function settledReplyOf(conversationId: string, turn: TurnView): TurnReply {
  const reply = turnReplyOf(conversationId, turn);
  if (reply === undefined) {
    throw new AppError(
      'unavailable',
      `turn ${turn.turnId} has not settled; post again with the same idempotency key`,
      { details: { turnId: turn.turnId } },
    );
  }
  return reply;
}

/**
 * The card for an approval request: what the approver sees and the hash they bind. The
 * required approver is the request's, else the turn directive's, else empty (any admin).
 */
export function approvalCardOf(turn: TurnView, request: ApprovalRequest): ApprovalCard {
  return {
    requestId: request.requestId,
    toolCallId: request.toolCallId,
    toolName: request.toolName,
    // Checked to be JSON when the event was applied.
    args: JSON.parse(request.argsJson),
    argsSha256: hex(request.argsSha256),
    reason: request.reason,
    requiredApprover:
      request.requiredApprover !== ''
        ? request.requiredApprover
        : (turn.directive?.requiredApprover ?? ''),
    ...askedBy(turn, request.toolCallId),
  };
}

/**
 * Who made the call `toolCallId` of a turn, and on which thread: the `agent` and `thread`
 * of the latest model call that asked for it, each only when it names one.
 */
function askedBy(turn: TurnView, toolCallId: string): { agent?: string; thread?: string } {
  const asked = turn.steps.findLast(
    (step) =>
      step.kind === 'model_call' &&
      step.payload.content.some(
        ({ block }) => block?.$case === 'toolUse' && block.value.toolCallId === toolCallId,
      ),
  );
  if (asked?.kind !== 'model_call') return {};
  const { agent, thread } = asked.payload;
  return { ...(agent === '' ? {} : { agent }), ...(thread === '' ? {} : { thread }) };
}

function outcomeOf(turn: TurnView): TurnOutcome | undefined {
  const terminal = turn.terminal;
  switch (terminal?.kind) {
    case 'turn_complete':
      return {
        status: TurnStatus.Complete,
        reply: isAnswerErased(turn) ? ERASED_TEXT : terminal.payload.text,
        fallback: terminal.payload.fallback,
      };
    case 'turn_ambiguous':
      return {
        status: TurnStatus.Ambiguous,
        ambiguous: { toolCallId: terminal.payload.toolCallId, reason: terminal.payload.reason },
      };
    case 'handoff':
      return {
        status: TurnStatus.Handoff,
        handoff: { targetAgent: terminal.payload.targetAgent, reason: terminal.payload.reason },
      };
    case undefined:
      break;
  }
  const pending = pendingRequest(turn);
  if (pending === undefined) return undefined;
  if (pending.type === 'approval') {
    return { status: TurnStatus.Paused, approval: approvalCardOf(turn, pending.request) };
  }
  const question: QuestionCard = {
    requestId: pending.request.requestId,
    question: pending.request.question,
    ...askedBy(turn, pending.request.toolCallId),
  };
  return { status: TurnStatus.Paused, question };
}

/** The API's summary of a conversation (`GET /v1/conversations/{id}`). */
export function conversationSummary(conversation: Conversation): ConversationSummary {
  const status = conversation.status;
  const ready = status?.conditions?.find((c) => c.type === 'Ready')?.status === 'True';
  return {
    conversationId: conversation.metadata.uid ?? '',
    namespace: conversation.metadata.namespace ?? '',
    name: conversation.metadata.name ?? '',
    partition: partitionOf(conversation.metadata.uid ?? ''),
    phase: status?.phase ?? 'Pending',
    ready,
    owner: conversation.spec.owner ?? '',
    visibility: conversation.spec.visibility ?? Visibility.Private,
    ...(status?.currentTurn === undefined || status.currentTurn === ''
      ? {}
      : { currentTurn: status.currentTurn }),
  };
}
