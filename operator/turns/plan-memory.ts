/**
 * Memory (docs/turns.md, "Memory"): what the control plane commits for the agent's
 * `memory` tool call (the trusted-tool proxy) and for a person's clear through an API.
 * Pure: the runner and memory-service.ts commit what is planned here.
 */
import { isJsonObject } from '../../common/canonical-json';
import {
  clearedPositions,
  MEMORY_LIMITS,
  MEMORY_TOOL,
  memoryKeyProblem,
  memoryValueProblem,
  type MemoryEntry,
} from '../../common/memory';
import { EventKind } from '../../common/event-kinds';
import type { Attribution } from '../../proto/gen/polychrome/events/v1/events';
import type {
  TrustedToolCall,
  TrustedToolResult,
} from '../../proto/gen/polychrome/harness/v1/harness';
import type { Conversation } from '../api/v1alpha1/conversation-types';
import type { TurnView } from './journal-view-types';
import { planned, type PlannedEvent } from './plan-common';

/** What the control plane does with a trusted `memory` call. */
export type MemoryCallPlan =
  /** Commit `events` (none when the call's event is already in the journal), then answer. */
  | {
      readonly kind: 'answer';
      readonly events: readonly PlannedEvent[];
      readonly result: TrustedToolResult;
    }
  /** The harness asked for what the turn cannot have produced: the turn is quarantined. */
  | { readonly kind: 'forged'; readonly reason: string };

/** The facts a memory call is checked against. */
export interface MemoryCallFacts {
  readonly turn: TurnView;
  readonly conversation: Conversation;
  readonly memory: ReadonlyMap<string, MemoryEntry>;
  readonly nowMs: number;
}

/** True when the conversation offers the memory tool (`spec.tools.builtin`). */
export function offersMemory(conversation: Conversation): boolean {
  return (conversation.spec.tools?.builtin ?? []).includes(MEMORY_TOOL);
}

/**
 * Plans a trusted `memory` call. The harness is less trusted than the control plane: the
 * call must name the dispatched turn, a tool the conversation offers, and the `tool_call`
 * already committed for it with the same arguments and no result yet. A bad argument (an
 * unknown action, a key or value over the limits, one key too many) is the model's mistake:
 * it gets an error result and nothing is committed. A call whose `memory_set` is already
 * the key's current value (the harness ran it again after a crash) is answered without a
 * second event.
 */
export function planMemoryCall(facts: MemoryCallFacts, call: TrustedToolCall): MemoryCallPlan {
  const forged = checkMemoryCall(facts, call);
  if (forged !== undefined) return { kind: 'forged', reason: forged };
  const args: unknown = JSON.parse(call.argsJson);
  const action = isJsonObject(args) ? args.action : undefined;
  const key = isJsonObject(args) ? args.key : undefined;
  const value = isJsonObject(args) ? args.value : undefined;
  const fail = (content: string) => answer(call, [], `memory: ${content}`, true);
  if (action !== 'set' && action !== 'delete') {
    return fail('action must be "set" or "delete"');
  }
  if (typeof key !== 'string') return fail('key must be a string');
  const keyProblem = memoryKeyProblem(key);
  if (keyProblem !== undefined) return fail(keyProblem);
  const { turn, memory, nowMs } = facts;
  const attribution: Attribution = turn.attribution;
  const ids = { turnId: turn.turnId, toolCallId: call.toolCallId };
  if (action === 'delete') {
    if (!memory.has(key)) return answer(call, [], `nothing was kept under ${JSON.stringify(key)}`);
    const event = planned(EventKind.MemoryCleared, {
      key,
      attribution,
      clearedAtMs: nowMs,
      setPositions: clearedPositions(memory, key),
      ...ids,
    });
    return answer(call, [event], `deleted ${JSON.stringify(key)} from memory`);
  }
  if (typeof value !== 'string') return fail('value must be a string for action "set"');
  const valueProblem = memoryValueProblem(value);
  if (valueProblem !== undefined) return fail(valueProblem);
  const current = memory.get(key);
  const kept = `kept ${JSON.stringify(key)} for later turns`;
  if (current?.turnId === turn.turnId && current.toolCallId === call.toolCallId) {
    return answer(call, [], kept);
  }
  if (current === undefined && memory.size >= MEMORY_LIMITS.maxKeys) {
    return fail(
      `memory holds ${MEMORY_LIMITS.maxKeys} keys, the most it may; delete one you no longer need, or replace one`,
    );
  }
  const event = planned(EventKind.MemorySet, { key, value, attribution, setAtMs: nowMs, ...ids });
  return answer(call, [event], kept);
}

/** Why the call is not one this turn can have made, or undefined. */
function checkMemoryCall(facts: MemoryCallFacts, call: TrustedToolCall): string | undefined {
  const { turn, conversation } = facts;
  const id = call.toolCallId;
  if (call.turnId !== turn.turnId) {
    return `trusted tool call ${id} names turn ${call.turnId || '(none)'}, but turn ${turn.turnId} was dispatched`;
  }
  if (!offersMemory(conversation)) {
    return `trusted tool call ${id} runs ${MEMORY_TOOL}, which spec.tools.builtin does not offer`;
  }
  const committed = turn.steps.find(
    (step) => step.kind === 'tool_call' && step.payload.toolCallId === id,
  );
  if (committed?.kind !== 'tool_call') {
    return `trusted tool call ${id} has no committed tool_call`;
  }
  if (
    committed.payload.toolName !== call.toolName ||
    committed.payload.argsJson !== call.argsJson
  ) {
    return `trusted tool call ${id} differs from its committed tool_call (name or arguments)`;
  }
  if (turn.steps.some((step) => step.kind === 'tool_result' && step.payload.toolCallId === id)) {
    return `trusted tool call ${id} already has a committed tool_result`;
  }
  try {
    JSON.parse(call.argsJson);
  } catch {
    return `trusted tool call ${id}: args_json is not JSON`;
  }
  return undefined;
}

function answer(
  call: TrustedToolCall,
  events: readonly PlannedEvent[],
  content: string,
  isError = false,
): MemoryCallPlan {
  return {
    kind: 'answer',
    events,
    result: { toolCallId: call.toolCallId, content, isError, outcomeUnknownReason: '' },
  };
}

/**
 * A person's clear through an API: one `memory_cleared` naming who asked and the
 * `memory_set` positions it takes out of memory (so a later erasure can find them). A
 * clear of a key memory does not hold commits nothing.
 */
export function planMemoryClear(
  memory: ReadonlyMap<string, MemoryEntry>,
  key: string,
  attribution: Attribution,
  nowMs: number,
): readonly PlannedEvent[] {
  if (key === '' ? memory.size === 0 : !memory.has(key)) return [];
  const setPositions = clearedPositions(memory, key);
  return [planned(EventKind.MemoryCleared, { key, attribution, clearedAtMs: nowMs, setPositions })];
}
