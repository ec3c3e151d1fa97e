/**
 * A conversation's events as the UI shows them: grouped by turn, each with who said or did
 * what. Events come from the `log` stream (the server's decoding) until the export is
 * verified, then from the export's bytes decoded in this browser. Pure.
 */
import { StandingState, standingOf, type TurnStanding } from '../common/turn-standing';

/** One journal event; `payload` is its proto3 JSON. */
export interface TimelineEvent {
  readonly position: number;
  readonly kind: string;
  readonly payload: unknown;
  readonly excised?: boolean;
  /** Excised at a person's request (an erasure or a memory clear), not by repair. */
  readonly erased?: boolean;
}

/** Where an event stands after verification in the browser. */
export type Seal = 'sealed' | 'unsealed' | 'failed' | 'unverified';

function field(payload: unknown, name: string): unknown {
  return typeof payload === 'object' && payload !== null
    ? (payload as Record<string, unknown>)[name]
    : undefined;
}

function text(payload: unknown, name: string): string {
  const value = field(payload, name);
  return typeof value === 'string' || typeof value === 'number' || typeof value === 'boolean'
    ? String(value)
    : '';
}

/** The turn an event belongs to, or '' (signed roots, key rotations, excisions). */
export function turnOf(event: TimelineEvent): string {
  return text(event.payload, 'turnId');
}

/** Who acted, as the journal names them. */
export function actorOf(event: TimelineEvent): string {
  const p = event.payload;
  switch (event.kind) {
    case 'message_received':
      return text(field(p, 'attribution'), 'caller') || 'someone';
    case 'memory_cleared':
      // The agent's own delete names its turn; a person's clear names who asked.
      return turnOf(event) === ''
        ? text(field(p, 'attribution'), 'caller') || 'someone'
        : 'assistant';
    case 'memory_set':
      return 'assistant';
    case 'approval_response':
      return text(p, 'answeredBy');
    case 'excision':
    case 'rollback_accepted':
      return text(p, 'actor');
    case 'turn_dispatched':
      return text(p, 'leaseHolder');
    case 'summary':
      return 'control plane';
    case 'turn_complete':
      return 'assistant';
    case 'model_call':
      return text(p, 'agent') || 'assistant';
    case 'agent_handoff':
      return text(p, 'fromAgent') || 'assistant';
    case 'tool_call':
      // Opening a thread is the asking agent's act (docs/turns.md, "Delegation").
      return text(p, 'toolName') === DELEGATE_TOOL ? text(p, 'agent') || 'assistant' : 'tool';
    case 'tool_result':
      return text(p, 'delegate') || 'tool';
    default:
      return '';
  }
}

/** The reserved tool whose call opens a delegation thread. */
const DELEGATE_TOOL = '__delegate_to';

/**
 * The delegation thread an event runs on and its depth: '' and 0 for the turn's own
 * agent. The `__delegate_to` call opening a thread, and the result closing it, are its
 * caller's; the thread's own model and tool calls name it.
 */
export function threadOf(event: TimelineEvent): { thread: string; depth: number } {
  const depth = Number(text(event.payload, 'depth') || '0');
  return { thread: text(event.payload, 'thread'), depth: Number.isFinite(depth) ? depth : 0 };
}

/** Who gave a turn's final answer, and the delegation threads it heard. */
export interface FinalAnswer {
  /** The agent of the turn's last model call on its own thread ('' when none names one). */
  readonly agent: string;
  /** The threads opened in the turn (each `__delegate_to` call's id), in journal order. */
  readonly threads: readonly string[];
}

/**
 * Each turn's {@link FinalAnswer}: the final answer (`turn_complete`) is always the turn's
 * own thread's, never a delegate's (docs/turns.md, "Delegation"), so it is its last model
 * call without a thread that says which agent wrote it.
 */
export function finalAnswersOf(events: readonly TimelineEvent[]): Map<string, FinalAnswer> {
  const answers = new Map<string, { agent: string; threads: string[] }>();
  for (const event of [...events].sort((a, b) => a.position - b.position)) {
    const turnId = turnOf(event);
    if (turnId === '') continue;
    const answer = answers.get(turnId) ?? { agent: '', threads: [] };
    answers.set(turnId, answer);
    const p = event.payload;
    if (event.kind === 'model_call' && text(p, 'thread') === '') answer.agent = text(p, 'agent');
    if (event.kind === 'tool_call' && text(p, 'toolName') === DELEGATE_TOOL) {
      answer.threads.push(text(p, 'toolCallId'));
    }
  }
  return answers;
}

/** How the timeline says who gave a turn's final answer, when the turn had threads. */
export function finalAnswerNote(answer: FinalAnswer | undefined): string {
  if (answer === undefined || answer.threads.length === 0) return '';
  const threads = `thread${answer.threads.length === 1 ? '' : 's'} ${answer.threads.join(', ')}`;
  return ` — the final answer, by ${answer.agent || 'the turn agent'} on the turn's own thread, after ${threads}`;
}

/** Where a step ran, when on a delegate's thread. */
function onThread(p: unknown): string {
  const thread = text(p, 'thread');
  return thread === '' ? '' : ` on thread ${thread} (depth ${text(p, 'depth') || '1'})`;
}

/** A `__delegate_to` call's ask: the agent and the task. */
function delegationAsk(p: unknown): string {
  try {
    const args = JSON.parse(text(p, 'argsJson')) as { agent?: unknown; task?: unknown };
    return `asks ${String(args.agent)} on thread ${text(p, 'toolCallId')}: ${String(args.task)}`;
  } catch {
    return `asks another agent with ${text(p, 'argsJson')}`;
  }
}

/** A one-line account of what the event says. */
export function summaryOf(event: TimelineEvent): string {
  const p = event.payload;
  if (event.erased === true) return 'erased: only its leaf digest is kept';
  if (event.excised === true) return 'excised by repair: only its leaf digest is kept';
  switch (event.kind) {
    case 'message_received':
      return `said: ${text(p, 'text')}`;
    case 'turn_dispatched':
      return `turn dispatched (attempt ${text(p, 'attempt') || '0'})${text(p, 'summaryPosition') === '' ? '' : `, given the summary at ${text(p, 'summaryPosition')}`}`;
    case 'summary':
      return `summary of the turns from ${text(p, 'fromPosition') || '0'} to ${text(p, 'toPosition') || '0'} by ${text(p, 'model') || 'the model'}: ${text(p, 'text')}`;
    case 'model_call':
      return `model call to ${text(p, 'model') || 'the model'}, step ${text(p, 'step') || '0'}${onThread(p)}${text(p, 'stopReason') === '' ? '' : `, stopped: ${text(p, 'stopReason')}`}`;
    case 'agent_config':
      return `agent configuration recorded: ${text(p, 'configJson').slice(0, 160)}`;
    case 'agent_handoff':
      return `handed the turn to ${text(p, 'toAgent')}${text(p, 'reason') === '' ? '' : `: ${text(p, 'reason')}`}`;
    case 'tool_call':
      return text(p, 'toolName') === DELEGATE_TOOL
        ? `${delegationAsk(p)}${onThread(p)}`
        : `calls ${text(p, 'toolName')} with ${text(p, 'argsJson') || '{}'}${onThread(p)}`;
    case 'tool_result':
      return text(p, 'delegate') === ''
        ? `${text(p, 'denied') === 'true' ? 'denied' : text(p, 'isError') === 'true' ? 'error' : 'result'}: ${text(p, 'content')}${onThread(p)}`
        : `${text(p, 'isError') === 'true' ? 'thread closed without an answer' : 'answered'} on thread ${text(p, 'toolCallId')}: ${text(p, 'content')}`;
    case 'approval_request':
      return `asks approval to run ${text(p, 'toolName')} with exactly ${text(p, 'argsJson') || '{}'}${text(p, 'reason') === '' ? '' : ` (${text(p, 'reason')})`}${text(p, 'requiredApprover') === '' ? '' : `, approver ${text(p, 'requiredApprover')}`}; request ${text(p, 'requestId')}`;
    case 'approval_response':
      return `answered ${text(p, 'decision') || 'unknown'} to ${text(p, 'toolName')}, request ${text(p, 'requestId')}${text(p, 'comment') === '' ? '' : `: ${text(p, 'comment')}`}`;
    case 'question_request':
      return `asks: ${text(p, 'question')}`;
    case 'question_response':
      return `answers: ${text(p, 'answer')}`;
    case 'turn_complete':
      return `replied: ${text(p, 'text')}`;
    case 'turn_ambiguous':
      return `QUARANTINED: ${text(p, 'reason')} (tool call ${text(p, 'toolCallId')})`;
    case 'signed_root':
      return `signed root over ${text(p, 'leafCount') || '0'} events, key ${text(p, 'keyId')}`;
    case 'key_rotated':
      return 'signing key rotated';
    case 'excision':
      return `excised position ${text(p, 'position') || '0'}: ${text(p, 'reason')}`;
    case 'memory_set':
      return `kept in memory: ${JSON.stringify(text(p, 'key'))} = ${JSON.stringify(text(p, 'value'))}`;
    case 'memory_cleared':
      return text(p, 'key') === ''
        ? 'cleared all memory'
        : `cleared memory ${JSON.stringify(text(p, 'key'))}`;
    case 'rollback_accepted':
      return `ROLLBACK ACCEPTED: the state plane had lost entries ${text(p, 'journalHead') || '0'} to ${String(Number(text(p, 'checkpointHead') || '0') - 1)} that the status had recorded; the journal goes on from ${text(p, 'journalHead') || '0'}: ${text(p, 'reason')}`;
    default:
      return JSON.stringify(p ?? null).slice(0, 200);
  }
}

/** The events in turn groups, in journal order: a group starts where its turn first appears. */
export function groupByTurn(
  events: readonly TimelineEvent[],
): { turnId: string; events: TimelineEvent[] }[] {
  const groups: { turnId: string; events: TimelineEvent[] }[] = [];
  for (const event of [...events].sort((a, b) => a.position - b.position)) {
    const turnId = turnOf(event);
    const last = groups[groups.length - 1];
    if (last !== undefined && (last.turnId === turnId || turnId === '')) last.events.push(event);
    else groups.push({ turnId, events: [event] });
  }
  return groups;
}

/**
 * Where each turn stands, over all of its events (a turn resolved after other turns ran
 * shows in two groups), by the one rule (common/turn-standing.ts).
 */
export function standingsByTurn(events: readonly TimelineEvent[]): Map<string, TurnStanding> {
  const byTurn = new Map<string, TimelineEvent[]>();
  for (const event of [...events].sort((a, b) => a.position - b.position)) {
    const turnId = turnOf(event);
    if (turnId === '' || event.excised === true) continue;
    const list = byTurn.get(turnId);
    if (list === undefined) byTurn.set(turnId, [event]);
    else list.push(event);
  }
  return new Map([...byTurn].map(([turnId, list]) => [turnId, standingOf(list)]));
}

/** How the timeline says where a turn stands. */
export function standingLabel(standing: TurnStanding): string {
  switch (standing.state) {
    case StandingState.Received:
      return 'received';
    case StandingState.Running:
      return 'running';
    case StandingState.AwaitingApproval:
      return 'waiting for approval';
    case StandingState.AwaitingAnswer:
      return 'waiting for an answer';
    case StandingState.HandedOff:
      return `handed off to ${standing.targetAgent || 'another agent'}`;
    case StandingState.Quarantined:
      return 'quarantined';
    case StandingState.Resolved:
      return 'quarantine resolved, to run again';
    case StandingState.Complete:
      return standing.afterResolution ? 'complete, after a resolved quarantine' : 'complete';
    case StandingState.Failed:
      return 'failed: the fallback reply';
    case StandingState.Cancelled:
      return 'cancelled';
  }
}
