import type { ApprovalCard, Transcript, TranscriptTurn, TurnReply } from './api-answers';
import type { StreamEvent } from './event-follower';

/*
 * How the conversation commands print, as pure functions of what the API answered: the
 * text people read (the JSON form is the API's own body). Kept apart from the I/O so the
 * wording is tested once.
 */

/** Longest excerpt of tool arguments, results and model text in one-line summaries. */
export const EXCERPT_CHARS = 160;

/** `text` on one line (runs of white space, newlines included, become one space). */
export function oneLine(text: string): string {
  return text.replace(/\s+/gu, ' ').trim();
}

/** {@link oneLine}, cut to `max` characters (code points) with an ellipsis. */
export function excerpt(text: string, max: number = EXCERPT_CHARS): string {
  const flat = [...oneLine(text)];
  return flat.length <= max ? flat.join('') : `${flat.slice(0, max - 1).join('')}…`;
}

/** `word` as a POSIX shell word: unchanged when it is safe, single-quoted otherwise. */
export function shellWord(word: string): string {
  return /^[A-Za-z0-9._:/=@%+,-]+$/u.test(word) ? word : `'${word.replace(/'/gu, `'\\''`)}'`;
}

/** Arguments as compact JSON (they arrive as any JSON value). */
function argsText(args: unknown): string {
  return JSON.stringify(args) ?? 'null';
}

/** How the printed follow-up commands are spelled. */
export interface CommandContext {
  readonly conversationId: string;
  /** Flags every printed command needs, e.g. `['--api', URL]` when --api was given. */
  readonly extraFlags?: readonly string[];
  /** The words a printed command starts with. @default ['polychrome'] */
  readonly program?: readonly string[];
}

function command(context: CommandContext, words: readonly string[]): string {
  return [...(context.program ?? ['polychrome']), ...words, ...(context.extraFlags ?? [])]
    .map(shellWord)
    .join(' ');
}

/** The exact commands that approve and deny `card`. */
export function approveCommands(
  context: CommandContext,
  card: Pick<ApprovalCard, 'requestId'>,
): { approve: string; deny: string } {
  return {
    approve: command(context, ['approve', context.conversationId, card.requestId]),
    deny: command(context, ['approve', context.conversationId, card.requestId, '--deny']),
  };
}

/** The card's `  asked by:` line, when a turn's Agent (on a delegation thread) made the call. */
function askedByLine(card: { readonly agent?: string; readonly thread?: string }): string {
  if (card.agent === undefined && card.thread === undefined) return '';
  const thread = card.thread === undefined ? '' : ` on thread ${card.thread}`;
  return `  asked by:  ${card.agent ?? 'an agent'}${thread}\n`;
}

function approverText(requiredApprover: string): string {
  return requiredApprover === '' ? 'an admin' : requiredApprover;
}

/** What a settled turn means for the exit code. */
export const TurnOutcome = {
  /** complete, handoff: the turn is done. */
  Done: 'done',
  /** paused: it waits for a person (approval or answer). */
  Waiting: 'waiting',
  /** ambiguous: quarantined until an admin resolves it. */
  Quarantined: 'quarantined',
} as const;
export type TurnOutcome = (typeof TurnOutcome)[keyof typeof TurnOutcome];

/**
 * A settled turn as text: the reply; the approval card with the commands that answer it;
 * the question with the command that answers it; the quarantine notice; the handoff.
 */
export function formatTurnReply(
  reply: TurnReply,
  context: CommandContext,
): { text: string; outcome: TurnOutcome } {
  switch (reply.status) {
    case 'complete':
      return {
        text:
          `${reply.reply ?? ''}\n` +
          (reply.fallback === true
            ? `(the fixed fallback reply: turn ${reply.turnId} ran out of steps or failed for good)\n`
            : ''),
        outcome: TurnOutcome.Done,
      };
    case 'handoff':
      return {
        text:
          `Turn ${reply.turnId} was handed off to agent ${reply.handoff?.targetAgent ?? '?'}` +
          `${reply.handoff?.reason ? `: ${reply.handoff.reason}` : ''}\n`,
        outcome: TurnOutcome.Done,
      };
    case 'ambiguous':
      return {
        text:
          `Turn ${reply.turnId} is QUARANTINED: the outcome of tool call ` +
          `${reply.ambiguous?.toolCallId ?? '?'} is unknown` +
          `${reply.ambiguous?.reason ? ` (${reply.ambiguous.reason})` : ''}.\n` +
          'The tool may or may not have run; it is not run again. An admin must resolve the turn ' +
          'before the conversation goes on.\n',
        outcome: TurnOutcome.Quarantined,
      };
    case 'paused': {
      if (reply.approval !== undefined) {
        const card = reply.approval;
        const commands = approveCommands(context, card);
        return {
          text:
            `Turn ${reply.turnId} is waiting for approval.\n` +
            `  tool:      ${card.toolName}\n` +
            askedByLine(card) +
            `  args:      ${argsText(card.args)}\n` +
            `  reason:    ${card.reason === '' ? '(none given)' : card.reason}\n` +
            `  approver:  ${approverText(card.requiredApprover)}\n` +
            `  request:   ${card.requestId}\n` +
            `approve:  ${commands.approve}\n` +
            `deny:     ${commands.deny}\n`,
          outcome: TurnOutcome.Waiting,
        };
      }
      if (reply.question !== undefined) {
        const card = reply.question;
        return {
          text:
            `Turn ${reply.turnId} asks: ${card.question}\n` +
            askedByLine(card) +
            `  request:   ${card.requestId}\n` +
            `answer:   ${command(context, ['answer', context.conversationId, card.requestId])} <your answer>\n`,
          outcome: TurnOutcome.Waiting,
        };
      }
      return { text: `Turn ${reply.turnId} is paused.\n`, outcome: TurnOutcome.Waiting };
    }
  }
}

function field(payload: unknown, name: string): unknown {
  return typeof payload === 'object' && payload !== null ? Reflect.get(payload, name) : undefined;
}

function str(payload: unknown, name: string): string {
  const value = field(payload, name);
  return typeof value === 'string' ? value : '';
}

/** proto3 JSON leaves defaults out and spells 64-bit numbers as strings. */
function num(payload: unknown, name: string): string {
  const value = field(payload, name);
  return typeof value === 'number' || typeof value === 'string' ? String(value) : '0';
}

function flag(payload: unknown, name: string): boolean {
  return field(payload, name) === true;
}

function modelCallSummary(payload: unknown): string {
  const content = field(payload, 'content');
  const blocks: unknown[] = Array.isArray(content) ? content : [];
  const texts = blocks.map((b) => str(b, 'text')).filter((t) => t !== '');
  const tools = blocks.map((b) => str(field(b, 'toolUse'), 'name')).filter((t) => t !== '');
  const stop = str(payload, 'stopReason');
  return (
    `step ${num(payload, 'step')}, ${str(payload, 'model') || 'model'}` +
    (stop === '' ? '' : ` (${stop})`) +
    (texts.length === 0 ? '' : `: ${excerpt(texts.join(' '))}`) +
    (tools.length === 0 ? '' : ` → ${tools.join(', ')}`)
  );
}

/**
 * One line about a committed event: the user text for message_received, the reply for
 * turn_complete, the tool for tool_call, and so on; the kind's own fields otherwise.
 */
export function summarizeEvent(event: StreamEvent): string {
  const p = event.payload;
  switch (event.kind) {
    case 'message_received':
      return `${str(field(p, 'attribution'), 'caller') || '?'}: ${oneLine(str(p, 'text'))}`;
    case 'ingress_directive': {
      const parts = [
        num(p, 'maxSteps') === '0' ? '' : `max steps ${num(p, 'maxSteps')}`,
        str(p, 'requiredApprover') === '' ? '' : `approver ${str(p, 'requiredApprover')}`,
      ].filter((t) => t !== '');
      return parts.join(', ') || 'no limits';
    }
    case 'turn_dispatched':
      return `turn ${str(p, 'turnId')} attempt ${num(p, 'attempt')} to ${str(p, 'leaseHolder') || '?'}`;
    case 'model_call':
      return `${onThread(p)}${modelCallSummary(p)}`;
    case 'tool_call':
      return `${onThread(p)}${str(p, 'toolName')} ${excerpt(str(p, 'argsJson'))}`;
    case 'tool_result':
      return (
        `${onThread(p)}${str(p, 'toolCallId')}` +
        (str(p, 'delegate') === '' ? '' : ` answered by ${str(p, 'delegate')}`) +
        `${flag(p, 'denied') ? ' (denied)' : flag(p, 'isError') ? ' (error)' : ''}: ` +
        excerpt(str(p, 'content'))
      );
    case 'approval_request':
      return (
        `${str(p, 'toolName')} ${excerpt(str(p, 'argsJson'))} needs approval by ` +
        `${approverText(str(p, 'requiredApprover'))} (request ${str(p, 'requestId')})`
      );
    case 'approval_response':
      return (
        `${str(p, 'decision') === 'APPROVAL_DECISION_DENIED' ? 'denied' : 'approved'} by ` +
        `${str(p, 'answeredBy') || '?'} (request ${str(p, 'requestId')})` +
        (str(p, 'comment') === '' ? '' : `: ${excerpt(str(p, 'comment'))}`)
      );
    case 'question_request':
      return `${oneLine(str(p, 'question'))} (request ${str(p, 'requestId')})`;
    case 'question_response':
      return `${str(p, 'answeredBy') || '?'}: ${oneLine(str(p, 'answer'))}`;
    case 'request_cancelled':
      return (
        `request ${str(p, 'requestId')} cancelled by ${str(p, 'cancelledBy') || '?'}` +
        (str(p, 'comment') === '' ? '' : `: ${excerpt(str(p, 'comment'))}`)
      );
    case 'approval_expired':
      return `request ${str(p, 'requestId')} expired unanswered after ${num(p, 'ttlMs')} ms`;
    case 'handoff':
      return `to agent ${str(p, 'targetAgent')}: ${excerpt(str(p, 'reason'))}`;
    case 'turn_complete':
      return `${oneLine(str(p, 'text'))}${flag(p, 'fallback') ? ' (fallback reply)' : ''}`;
    case 'turn_ambiguous':
      return `QUARANTINED: tool call ${str(p, 'toolCallId')}: ${excerpt(str(p, 'reason'))}`;
    case 'turn_resolved':
      return (
        `resolved by ${str(p, 'actor') || '?'}: ` +
        (str(p, 'decision') === 'RESOLVE_DECISION_RAN'
          ? `tool call ${str(p, 'toolCallId')} ran${flag(p, 'resultUnknown') ? ', result unknown' : ''}`
          : `tool call ${str(p, 'toolCallId')} did not run; the turn runs it again`)
      );
    case 'payment_charge':
      return `${num(p, 'amountMinor')} ${str(p, 'currency')} (minor units) to ${str(p, 'payee')}`;
    case 'outbound_payment_receipt':
      return `receipt ${str(p, 'receiptId')}: ${num(p, 'amountMinor')} ${str(p, 'currency')}`;
    case 'memory_set':
      return `${str(p, 'key')} = ${excerpt(str(p, 'value'))}`;
    case 'memory_cleared':
      return str(p, 'key') === '' ? 'all memory' : str(p, 'key');
    case 'conversation_closed':
      return str(p, 'reason') || 'closed';
    case 'conversation_reopened':
      return `by ${str(field(p, 'attribution'), 'caller') || '?'}`;
    case 'key_rotated':
      return `${str(p, 'oldKeyId')} → ${str(p, 'newKeyId')}`;
    case 'signed_root':
      return `covers ${num(p, 'leafCount')} events, key ${str(p, 'keyId')}`;
    default:
      return p === null
        ? `(a kind this control plane does not decode; ${String(Buffer.from(event.payloadBase64 ?? '', 'base64').length)} bytes)`
        : excerpt(JSON.stringify(p) ?? '');
  }
}

/** `[thread T] ` before a step of a delegate's thread (docs/turns.md, "Delegation"). */
function onThread(p: unknown): string {
  const thread = str(p, 'thread');
  return thread === '' ? '' : `[thread ${thread}] `;
}

/** One event as a line of `polychrome stream`. */
export function formatEventLine(event: StreamEvent): string {
  return `[${String(event.position)}] ${event.kind}: ${summarizeEvent(event)}\n`;
}

function turnLines(turn: TranscriptTurn, context: CommandContext): string {
  const when = new Date(turn.user.receivedAtMs).toISOString();
  const head = `[${String(turn.position)}] ${turn.user.caller} (${when}): ${turn.user.text}\n`;
  switch (turn.status) {
    case 'complete':
      return `${head}  agent: ${turn.reply ?? ''}${turn.fallback === true ? ' (fallback reply)' : ''}\n`;
    case 'handoff':
      return `${head}  handed off to ${turn.handoff?.targetAgent ?? '?'}: ${turn.handoff?.reason ?? ''}\n`;
    case 'ambiguous':
      return (
        `${head}  QUARANTINED: tool call ${turn.ambiguous?.toolCallId ?? '?'}: ` +
        `${turn.ambiguous?.reason ?? ''}\n`
      );
    case 'paused':
      if (turn.approval !== undefined) {
        return (
          `${head}  waiting for approval: ${turn.approval.toolName} ${argsText(turn.approval.args)}` +
          ` (request ${turn.approval.requestId}): ${approveCommands(context, turn.approval).approve}\n`
        );
      }
      if (turn.question !== undefined) {
        return `${head}  asks: ${turn.question.question} (request ${turn.question.requestId})\n`;
      }
      return `${head}  paused\n`;
  }
}

/** The transcript as text, oldest turn first. */
export function formatTranscript(transcript: Transcript, context: CommandContext): string {
  const count = transcript.turns.length;
  return (
    `conversation ${transcript.conversationId}: ${String(count)} turn${count === 1 ? '' : 's'}` +
    ` (journal head ${String(transcript.head)})\n` +
    transcript.turns.map((turn) => turnLines(turn, context)).join('')
  );
}
