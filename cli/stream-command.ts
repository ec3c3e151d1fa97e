import type { Env } from '../common/config';
import {
  ExitCode,
  Format,
  formatOptions,
  noExtra,
  parse,
  parseFormat,
  stringValue,
  UsageError,
  write,
  type CliIo,
} from './cli-support';
import type { CommandDoor } from './command-door';
import { formatEventLine } from './conversation-format';
import { followEvents, type StreamEvent, type TextDelta } from './event-follower';

/*
 * `stream ID` (`logs NAME -f` on the Kubernetes door): the conversation's committed events
 * and the live text of a running turn, until Ctrl-C (docs/api.md, "Streaming (Server-Sent Events)").
 */

const CURSOR = /^[0-9]{1,15}$/u;

function cursorOf(values: Record<string, unknown>, flag: string): number | undefined {
  const text = stringValue(values[flag]);
  if (text === undefined) return undefined;
  if (!CURSOR.test(text)) {
    throw new UsageError(
      `--${flag} must be a journal position (0 or more, at most 15 digits), got ${JSON.stringify(text)}`,
    );
  }
  return Number(text);
}

/** `stream`: prints the events until `io.signal` aborts; a dropped connection is resumed. */
export async function stream(
  door: CommandDoor,
  args: readonly string[],
  env: Env | undefined,
  io: CliIo,
): Promise<ExitCode> {
  const { values, positionals } = parse(args, {
    ...door.options,
    ...formatOptions,
    since: { type: 'string' },
    'last-event-id': { type: 'string' },
  });
  const format = parseFormat(values);
  const [id, ...extra] = positionals;
  const conversationId = door.conversation(id, door.streamVerb);
  noExtra(extra, door.streamVerb, `one ${door.noun}`);
  const since = cursorOf(values, 'since');
  const lastEventId = cursorOf(values, 'last-event-id');
  if (since !== undefined && lastEventId !== undefined) {
    throw new UsageError('give --since N (from N) or --last-event-id N (after N), not both');
  }
  const api = await door.connect(values, env);
  const signal = io.signal ?? new AbortController().signal;
  // The delta line still open (its turn and step), closed before anything else prints.
  let openDelta: string | undefined;
  const closeDelta = async (): Promise<void> => {
    if (openDelta === undefined) return;
    openDelta = undefined;
    await write(io.stdout, '\n');
  };
  await followEvents({
    client: api.client,
    conversationId,
    start: {
      ...(since === undefined ? {} : { since }),
      ...(lastEventId === undefined ? {} : { lastEventId }),
    },
    signal,
    onEvent: async (event: StreamEvent) => {
      if (format === Format.Json) {
        await write(io.stdout, `${JSON.stringify(event)}\n`);
        return;
      }
      await closeDelta();
      await write(io.stdout, formatEventLine(event));
    },
    onDelta: async (delta: TextDelta) => {
      if (format === Format.Json) {
        await write(io.stdout, `${JSON.stringify({ kind: 'delta', ...delta })}\n`);
        return;
      }
      const which = `${delta.turnId}/${delta.thread ?? ''}/${String(delta.step)}`;
      if (openDelta !== which) {
        await closeDelta();
        const where = delta.thread === undefined ? '' : ` thread ${delta.thread}`;
        await write(io.stdout, `[live${where}] step ${String(delta.step)}: `);
        openDelta = which;
      }
      await write(io.stdout, delta.text);
    },
    onNotice: async (text: string) => {
      await closeDelta();
      await write(io.stderr, `polychrome: ${text}\n`);
    },
  });
  await closeDelta();
  return ExitCode.Ok;
}
