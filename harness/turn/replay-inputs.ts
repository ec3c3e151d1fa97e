import {
  applyMemoryEvent,
  memoryInOrder,
  type MemoryEntry,
  type MemoryEvent,
} from '../../common/memory';
import { hex, type AgentConfig, type EncodedAgentConfig } from './agent-config';
import type { Decoded, JournalTurns } from './journal-turns';
import type { MemoryItem } from './memory-context';
import type { TurnAgent } from './turn-agents';
import type { RequestTime } from './turn-delegation';

/** What the journal recorded besides a turn's own events: configurations and memory. */
export type RecordedInputs = Pick<JournalTurns, 'configs' | 'configPositions' | 'memoryEvents'>;

/**
 * The memory the attempt started from: every memory event before its `turn_dispatched`
 * folded by the one rule (common/memory.ts), oldest set first, as the control plane gave it
 * in `TurnStart.memory`.
 */
export function memoryBefore(
  events: readonly MemoryEvent[],
  dispatchPosition: number,
): MemoryItem[] {
  const entries = new Map<string, MemoryEntry>();
  for (const event of events) {
    if (event.position >= dispatchPosition) break;
    applyMemoryEvent(entries, event);
  }
  return memoryInOrder(entries).map(({ key, value }) => ({ key, value }));
}

/**
 * When each approval and question request before the attempt was committed, as the control
 * plane gave them in `TurnStart.request_times` (a request without a time left out): a
 * delegation thread's deadline leaves the waits for a person out (docs/turns.md, "Delegation").
 */
export function requestTimesBefore(before: readonly Decoded[]): RequestTime[] {
  return before.flatMap((e) =>
    (e.kind === 'approval_request' || e.kind === 'question_request') && e.payload.requestedAtMs > 0
      ? [{ requestId: e.payload.requestId, requestedAtMs: e.payload.requestedAtMs }]
      : [],
  );
}

/**
 * The agents an attempt handed its turn to, from the configurations it committed: the
 * machine commits a target's configuration when the turn moves to it (docs/turns.md,
 * "Handoffs"), so these are exactly the agents that answered besides the first. A target
 * the live turn refused as not given is absent here too, and refused the same way.
 */
export function agentsHandedTo(
  recorded: readonly Decoded[],
  configs: ReadonlyMap<string, EncodedAgentConfig>,
  first: string,
  others: readonly TurnAgent[] = [],
): TurnAgent[] {
  const agents = new Map<string, TurnAgent>();
  for (const e of recorded) {
    if (e.kind !== 'agent_config') continue;
    const config = configs.get(hex(e.payload.sha256))?.config;
    const name = config?.agent ?? '';
    if (config === undefined || name === first || agents.has(name)) continue;
    agents.set(name, turnAgentOf(config));
  }
  for (const other of others) {
    if (other.name !== first && !agents.has(other.name)) agents.set(other.name, other);
  }
  return [...agents.values()];
}

/** The agent a recorded configuration describes. */
export function turnAgentOf(config: AgentConfig): TurnAgent {
  return {
    name: config.agent ?? '',
    ...(config.system === '' ? {} : { system: config.system }),
    tools: config.tools,
    model: config.model,
    ...(config.handoffs === undefined ? {} : { handoffs: config.handoffs }),
    ...(config.delegates === undefined ? {} : { delegates: config.delegates }),
    ...(config.memoryBudgetBytes === undefined
      ? {}
      : { memoryBudgetBytes: config.memoryBudgetBytes }),
  };
}
