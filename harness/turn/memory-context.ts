import { utf8Bytes } from '../../common/memory';

/**
 * How a conversation's memory goes into the model request (docs/turns.md, "Memory"): a
 * block after the system prompt, fixed byte for byte, so replay rebuilds the exact request
 * from the journal. Pure.
 */

/** A key and its value, as the turn is given them (oldest set first). */
export interface MemoryItem {
  readonly key: string;
  readonly value: string;
}

/** The first line of the block. */
export const MEMORY_HEADER =
  'Memory: facts you kept with the memory tool in earlier turns of this conversation, one JSON object per line, oldest first. Use them; update or delete one with the memory tool when it changes.';

/**
 * The line of one entry: `{"key":…,"value":…}` with JSON string escapes, so no value can
 * end the block or fake another entry.
 */
export function memoryLine(item: MemoryItem): string {
  return `{"key":${JSON.stringify(item.key)},"value":${JSON.stringify(item.value)}}`;
}

/**
 * The entries that go into the request: the newest (last in `items`) whose lines, counted
 * in UTF-8 bytes with their newline, fit `budgetBytes` together, in their given order. The
 * cut stops at the first entry that does not fit, so an older small entry never displaces a
 * newer one.
 */
export function memoryWithinBudget(
  items: readonly MemoryItem[],
  budgetBytes: number,
): { readonly kept: readonly MemoryItem[]; readonly left: number } {
  let used = 0;
  let first = items.length;
  for (let i = items.length - 1; i >= 0; i--) {
    const item = items[i];
    if (item === undefined) break;
    const size = utf8Bytes(memoryLine(item)) + 1;
    if (used + size > budgetBytes) break;
    used += size;
    first = i;
  }
  return { kept: items.slice(first), left: first };
}

/**
 * The system prompt with the memory block after it (a blank line between), or `system`
 * unchanged when no entry fits (no memory, or a budget of 0): a conversation without
 * memory sends the same request as before memory existed.
 *
 * Block: the header line, one line per kept entry, and, when older entries were left out,
 * `(N older entries left out: over the memory budget of B bytes)`.
 */
export function systemWithMemory(
  system: string | undefined,
  items: readonly MemoryItem[],
  budgetBytes: number,
): string | undefined {
  const { kept, left } = memoryWithinBudget(items, budgetBytes);
  if (kept.length === 0) return system;
  const lines = [MEMORY_HEADER, ...kept.map(memoryLine)];
  if (left > 0) {
    lines.push(
      `(${left} older ${left === 1 ? 'entry' : 'entries'} left out: over the memory budget of ${budgetBytes} bytes)`,
    );
  }
  const block = lines.join('\n');
  return system === undefined || system === '' ? block : `${system}\n\n${block}`;
}
