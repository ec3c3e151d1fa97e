import {
  applyMemoryEvent,
  memoryInOrder,
  type MemoryEntry,
  type MemoryEvent,
} from '../../common/memory';
import type { JournalTurns } from './journal-turns';
import type { MemoryItem } from './memory-context';

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
