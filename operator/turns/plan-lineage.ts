import type { Step } from '../../proto/gen/polychrome/harness/v1/harness';
import type { ToolCall } from '../../proto/gen/polychrome/events/v1/events';
import type { TurnView } from './journal-view-types';
import { DELEGATE_TOOL } from './plan-common';

/**
 * Why a step's delegation lineage is not one the turn's committed steps give it
 * (docs/turns.md, "Delegation"), or undefined. The harness is less trusted than the control
 * plane: a thread, depth or agent it names is recomputed from the `__delegate_to` call that
 * opened the thread, so a delegate cannot claim the asking agent's name (and its approval
 * rules or delegates), escape the depth limit, or go on after its thread closed. Pure.
 *
 * - A step at the top (no thread) has depth 0.
 * - A step on thread T: T is a committed `__delegate_to` call of this turn whose thread is
 *   not closed; its depth is that call's plus one; a model or tool call names the agent
 *   that call asked.
 * - A result closing a thread (the `tool_result` of a `__delegate_to` call that opened one)
 *   names that agent as its `delegate`, and no other result names one.
 */
export function checkLineage(turn: TurnView, step: NonNullable<Step['step']>): string | undefined {
  switch (step.$case) {
    case 'modelCall':
    case 'toolCall': {
      const { thread, depth, agent } = step.value;
      const kind = step.$case === 'modelCall' ? 'model_call' : 'tool_call';
      const what = `${kind} of turn ${turn.turnId} by ${agent || '(unnamed)'}`;
      if (thread === '') {
        return depth === 0 ? undefined : `${what} claims depth ${depth} outside any thread`;
      }
      const opened = openThread(turn, thread);
      if (typeof opened === 'string') return `${what} ${opened}`;
      if (depth !== opened.depth + 1) {
        return `${what} claims depth ${depth} on thread ${thread}, which is ${opened.depth + 1} deep`;
      }
      if (agent !== opened.target) {
        return `${what} is on thread ${thread}, which asked ${opened.target || '(nobody)'}`;
      }
      return undefined;
    }
    case 'toolResult': {
      const { thread, toolCallId, delegate } = step.value;
      const what = `tool_result ${toolCallId} of turn ${turn.turnId}`;
      if (thread !== '') {
        const opened = openThread(turn, thread);
        if (typeof opened === 'string') return `${what} ${opened}`;
      }
      const closes = openerOf(turn, toolCallId);
      if (closes === undefined) {
        return delegate === ''
          ? undefined
          : `${what} names delegate ${delegate}, but ${toolCallId} opened no thread`;
      }
      return delegate === closes.target
        ? undefined
        : `${what} closes the thread that asked ${closes.target || '(nobody)'}, but names delegate ${delegate || '(none)'}`;
    }
    default:
      return undefined;
  }
}

interface Opener {
  /** The depth of the `__delegate_to` call itself (its thread is one deeper). */
  readonly depth: number;
  /** The agent it asked. */
  readonly target: string;
}

/** The call that opened `thread`, or why steps may not be on it. */
function openThread(turn: TurnView, thread: string): Opener | string {
  const opener = openerOf(turn, thread);
  if (opener === undefined) {
    return `names thread ${thread}, which no committed __delegate_to call of the turn opened`;
  }
  const closed = turn.steps.some(
    (s) => s.kind === 'tool_result' && s.payload.toolCallId === thread,
  );
  return closed ? `is on thread ${thread}, which its result already closed` : opener;
}

/** The committed `__delegate_to` call `toolCallId`, as an opener, or undefined. */
function openerOf(turn: TurnView, toolCallId: string): Opener | undefined {
  for (const recorded of turn.steps) {
    if (recorded.kind !== 'tool_call') continue;
    const call: ToolCall = recorded.payload;
    if (call.toolCallId !== toolCallId || call.toolName !== DELEGATE_TOOL) continue;
    return { depth: call.depth, target: targetOf(call) };
  }
  return undefined;
}

function targetOf(call: ToolCall): string {
  try {
    const agent: unknown = (JSON.parse(call.argsJson) as { agent?: unknown }).agent;
    return typeof agent === 'string' ? agent : '';
  } catch {
    return '';
  }
}
