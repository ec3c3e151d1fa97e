/**
 * A conversation's memory (docs/turns.md, "Memory"): what the agent keeps across turns with
 * the built-in `memory` tool, folded from the journal's `memory_set` and `memory_cleared`
 * events. One rule for every reader: the control plane's journal view, replay (which
 * rebuilds the memory a turn started from) and the forensics UI. Pure.
 */
import type { MemoryCleared, MemorySet } from '../proto/gen/polychrome/events/v1/events';

/** The limits on what the agent may keep; one place, for the tool and the API. */
export const MEMORY_LIMITS = {
  /** UTF-8 bytes of a key. */
  maxKeyBytes: 128,
  /** UTF-8 bytes of a value. */
  maxValueBytes: 4096,
  /** Keys held at once. */
  maxKeys: 64,
} as const;

/** The name of the built-in tool (conversations enable it in `spec.tools.builtin`). */
export const MEMORY_TOOL = 'memory';

/** Deployment default of the bytes of memory put into a model request. */
export const DEFAULT_MEMORY_BUDGET_BYTES = 8192;

/** One key's current value and where it was set. */
export interface MemoryEntry {
  readonly key: string;
  readonly value: string;
  /** Position of the `memory_set` that set the current value. */
  readonly position: number;
  readonly turnId: string;
  readonly toolCallId: string;
  readonly setAtMs: number;
  /**
   * Positions of every `memory_set` of this key since it was last cleared, oldest first
   * (the current one last): what a clear of the key takes out of memory.
   */
  readonly setPositions: readonly number[];
}

/** A memory event as the fold reads it. */
export type MemoryEvent =
  | {
      readonly kind: 'memory_set';
      readonly position: number;
      readonly key: string;
      readonly value: string;
      readonly turnId: string;
      readonly toolCallId: string;
      readonly setAtMs: number;
    }
  /** An empty key clears every key. */
  | { readonly kind: 'memory_cleared'; readonly position: number; readonly key: string };

/** A `memory_set` or `memory_cleared` at `position` as the memory fold reads it. */
export function memoryEventOf(
  position: number,
  event:
    | { readonly kind: 'memory_set'; readonly payload: MemorySet }
    | { readonly kind: 'memory_cleared'; readonly payload: MemoryCleared },
): MemoryEvent {
  if (event.kind === 'memory_cleared') {
    return { kind: event.kind, position, key: event.payload.key };
  }
  const { key, value, turnId, toolCallId, setAtMs } = event.payload;
  return { kind: event.kind, position, key, value, turnId, toolCallId, setAtMs };
}

/**
 * Applies one event to `entries` (modified in place; callers copy first where a state is
 * shared). A set replaces the key's value; a clear removes the key, or every key.
 */
export function applyMemoryEvent(entries: Map<string, MemoryEntry>, event: MemoryEvent): void {
  if (event.kind === 'memory_cleared') {
    if (event.key === '') entries.clear();
    else entries.delete(event.key);
    return;
  }
  const before = entries.get(event.key);
  entries.set(event.key, {
    key: event.key,
    value: event.value,
    position: event.position,
    turnId: event.turnId,
    toolCallId: event.toolCallId,
    setAtMs: event.setAtMs,
    setPositions: [...(before?.setPositions ?? []), event.position],
  });
}

/** The entries oldest set first (by the position of their current value). */
export function memoryInOrder(entries: ReadonlyMap<string, MemoryEntry>): MemoryEntry[] {
  return [...entries.values()].sort((a, b) => a.position - b.position);
}

/**
 * The `memory_set` positions a clear of `key` (empty: all) takes out of memory, in order:
 * what the `memory_cleared` records.
 */
export function clearedPositions(entries: ReadonlyMap<string, MemoryEntry>, key: string): number[] {
  const cleared = key === '' ? [...entries.values()] : [entries.get(key)].filter((e) => !!e);
  return cleared
    .flatMap((entry) => (entry === undefined ? [] : entry.setPositions))
    .sort((a, b) => a - b);
}

const encoder = new TextEncoder();

/** UTF-8 length of `text`. */
export function utf8Bytes(text: string): number {
  return encoder.encode(text).byteLength;
}

/**
 * Why `key` is not a memory key, or undefined: 1 to {@link MEMORY_LIMITS.maxKeyBytes}
 * bytes, no control characters, no leading or trailing space.
 */
export function memoryKeyProblem(key: string): string | undefined {
  if (key === '') return 'the key is empty; name what you keep (for example "user_city")';
  if (utf8Bytes(key) > MEMORY_LIMITS.maxKeyBytes) {
    return `the key is longer than ${MEMORY_LIMITS.maxKeyBytes} bytes; use a shorter key`;
  }
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f]/u.test(key)) {
    return 'the key holds a control character (a newline or tab); use a key without one';
  }
  if (key.trim() !== key) return 'the key starts or ends with a space; trim it';
  return undefined;
}

/** Why `value` cannot be kept, or undefined. */
export function memoryValueProblem(value: string): string | undefined {
  if (utf8Bytes(value) > MEMORY_LIMITS.maxValueBytes) {
    return `the value is longer than ${MEMORY_LIMITS.maxValueBytes} bytes; keep a shorter summary`;
  }
  return undefined;
}
