/**
 * The delegation threads of a turn on the stream (docs/api.md, "Streaming"; docs/turns.md,
 * "Delegation"): `thread_started` after the `tool_call` that opens a thread, and
 * `thread_closed` after the `tool_result` that closes it, each in the same frame and with
 * the same id as the committed event it is derived from. Derived from that one event
 * alone, so every replica and every `Last-Event-ID` resume shows them at the same place.
 * Pure.
 */
import { DELEGATE_TOOL } from '../turns/plan-common';
import type { EventData } from './event-json';

/** `thread_started`: an agent asked another to do a task on a thread of its own. */
export interface ThreadStartedData {
  /** The `tool_call`'s position. */
  readonly position: number;
  readonly turnId: string;
  /** The thread's id: the `__delegate_to` call's id, which its steps name in `thread`. */
  readonly thread: string;
  /** The agent asked (the delegate). */
  readonly agent: string;
  readonly task: string;
  /** The agent that asked. */
  readonly by: string;
  /** The thread the asking agent runs on; '' for the turn's own. */
  readonly parentThread: string;
  /** The new thread's depth (1 for a delegate of the turn's own agent). */
  readonly depth: number;
}

/** `thread_closed`: the delegate answered (or could not), and its answer went to the caller. */
export interface ThreadClosedData {
  /** The `tool_result`'s position. */
  readonly position: number;
  readonly turnId: string;
  readonly thread: string;
  /** The agent that answered on the thread. */
  readonly agent: string;
  /** The answer, as the asking agent got it (or why there is none, when `isError`). */
  readonly answer: string;
  readonly isError: boolean;
}

/** A derived event: its name and its `data`. */
export type ThreadEvent =
  | { readonly event: 'thread_started'; readonly data: ThreadStartedData }
  | { readonly event: 'thread_closed'; readonly data: ThreadClosedData };

/** The thread event `data` is the source of, if any. */
export function threadEventOf(data: EventData): ThreadEvent | undefined {
  const payload = data.payload;
  if (typeof payload !== 'object' || payload === null) return undefined;
  const field = (name: string): unknown => Reflect.get(payload, name);
  const text = (name: string): string => {
    const value = field(name);
    return typeof value === 'string' ? value : '';
  };
  if (data.kind === 'tool_call' && text('toolName') === DELEGATE_TOOL) {
    const args = argsOf(text('argsJson'));
    const depth = field('depth');
    return {
      event: 'thread_started',
      data: {
        position: data.position,
        turnId: text('turnId'),
        thread: text('toolCallId'),
        agent: typeof args.agent === 'string' ? args.agent : '',
        task: typeof args.task === 'string' ? args.task : '',
        by: text('agent'),
        parentThread: text('thread'),
        depth: (typeof depth === 'number' ? depth : 0) + 1,
      },
    };
  }
  if (data.kind === 'tool_result' && text('delegate') !== '') {
    return {
      event: 'thread_closed',
      data: {
        position: data.position,
        turnId: text('turnId'),
        thread: text('toolCallId'),
        agent: text('delegate'),
        answer: text('content'),
        isError: field('isError') === true,
      },
    };
  }
  return undefined;
}

function argsOf(json: string): Record<string, unknown> {
  try {
    const parsed: unknown = JSON.parse(json);
    return typeof parsed === 'object' && parsed !== null ? (parsed as Record<string, unknown>) : {};
  } catch {
    return {};
  }
}
