import type { Env } from '../common/config';
import type { Memory, MemoryCleared } from './api-answers';
import {
  ExitCode,
  Format,
  formatOptions,
  noExtra,
  parse,
  parseFormat,
  UsageError,
  write,
  type CliIo,
} from './cli-support';
import type { CommandDoor } from './command-door';

/*
 * `memory NAME list` and `memory NAME clear [KEY]` (docs/kubectl.md): what the agent keeps
 * across turns with its `memory` tool, read and cleared through a door (command-door.ts).
 * Reading needs what the transcript needs; a clear is recorded in the journal with who
 * asked (docs/api.md, "Memory").
 */

/** The `memory` command over `door`. */
export async function memoryCommand(
  door: CommandDoor,
  args: readonly string[],
  env: Env | undefined,
  io: CliIo,
): Promise<ExitCode> {
  const { values, positionals } = parse(args, { ...door.options, ...formatOptions });
  const format = parseFormat(values);
  const [id, action, ...extra] = positionals;
  const conversationId = door.conversation(id, 'memory');
  if (action === 'list' || action === undefined) {
    noExtra(extra, 'memory list', `one ${door.noun}`);
    const api = await door.connect(values, env);
    const result = await api.client.memory(conversationId, io.signal);
    await write(
      io.stdout,
      format === Format.Json ? `${JSON.stringify(result.raw)}\n` : formatMemory(result.value),
    );
    return ExitCode.Ok;
  }
  if (action !== 'clear') {
    throw new UsageError(
      `memory takes "list" or "clear [KEY]" after the ${door.noun}, not ${JSON.stringify(action)}`,
    );
  }
  const [key, ...more] = extra;
  noExtra(more, 'memory clear', `one ${door.noun} and at most one key`);
  const api = await door.connect(values, env);
  const result = await api.client.clearMemory(conversationId, key, io.signal);
  await write(
    io.stdout,
    format === Format.Json ? `${JSON.stringify(result.raw)}\n` : formatCleared(result.value),
  );
  return ExitCode.Ok;
}

/** One line per entry: the key, its value as JSON, and where it was set. */
export function formatMemory(memory: Memory): string {
  if (memory.entries.length === 0) return 'memory is empty\n';
  return memory.entries
    .map(
      (entry) =>
        `${entry.key} = ${JSON.stringify(entry.value)}  (set at position ${entry.position}, turn ${entry.turnId}, ${new Date(entry.setAtMs).toISOString()})\n`,
    )
    .join('');
}

function formatCleared(cleared: MemoryCleared): string {
  if (cleared.cleared.length === 0) {
    return `nothing to clear${cleared.key === undefined ? ': memory is empty' : `: no memory under ${JSON.stringify(cleared.key)}`}; nothing was recorded\n`;
  }
  return `cleared ${cleared.cleared.map((k) => JSON.stringify(k)).join(', ')} (memory_cleared at position ${cleared.position ?? '?'}, recorded as asked by ${cleared.clearedBy})\n`;
}
