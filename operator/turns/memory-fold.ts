/**
 * The conversation's memory in a journal view (docs/turns.md, "Memory"): each key's current
 * value and the positions of its `memory_set`s, folded incrementally from `memory_set` and
 * `memory_cleared` by the one rule (common/memory.ts). The fold (lazy-view.ts) hands each
 * memory event here; a view's memory is never modified once a view holds it.
 */
import { applyMemoryEvent, type MemoryEntry, type MemoryEvent } from '../../common/memory';

/** A view's memory: key to its current entry. */
export type MemoryState = ReadonlyMap<string, MemoryEntry>;

/** The memory of an empty journal. */
export const EMPTY_MEMORY: MemoryState = new Map();

/**
 * A working copy of a view's memory: the map is copied on the first event that changes it,
 * so a fold over events without memory costs nothing.
 */
export class MemoryFold {
  private copy: Map<string, MemoryEntry> | undefined;

  constructor(private readonly base: MemoryState) {}

  apply(event: MemoryEvent): void {
    this.copy ??= new Map(this.base);
    applyMemoryEvent(this.copy, event);
  }

  build(): MemoryState {
    return this.copy ?? this.base;
  }
}
