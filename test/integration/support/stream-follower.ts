/**
 * A client of the public API's journal stream (docs/api.md, "Streaming") that behaves as
 * `EventSource` does: it reconnects when the stream ends (`shutdown`, a dropped
 * connection, a replica that is gone) with `Last-Event-ID` set to the last id it got, to
 * whichever replica answers, until it has seen what it waits for.
 */

/** One SSE event as the client got it. */
export interface StreamEvent {
  /** The `id:` field, when the event had one. */
  readonly id: string | undefined;
  readonly event: string;
  readonly data: unknown;
}

export interface FollowOptions {
  /** The replicas' API base URLs, tried in turn at each reconnect. */
  readonly apiUrls: () => readonly string[];
  readonly token: string;
  readonly conversationId: string;
  /** Done when this returns true for the events so far. */
  readonly until: (events: readonly StreamEvent[]) => boolean;
  /** @default 120_000 */
  readonly timeoutMs?: number;
}

/** What a follow saw. */
export interface FollowResult {
  readonly events: StreamEvent[];
  /** Connections opened (1 when the stream never ended). */
  readonly connections: number;
}

/**
 * Follows the conversation's stream from position 0 until `until` holds.
 *
 * @throws Error when the time is up, naming what was seen.
 */
export async function followStream(options: FollowOptions): Promise<FollowResult> {
  const events: StreamEvent[] = [];
  const deadline = Date.now() + (options.timeoutMs ?? 120_000);
  let lastId: string | undefined;
  let connections = 0;
  for (let turn = 0; Date.now() < deadline; turn++) {
    const urls = options.apiUrls();
    const url = urls[turn % Math.max(1, urls.length)];
    if (url === undefined) {
      // None serves right now (a restart): wait, as EventSource does.
      await new Promise((resolve) => setTimeout(resolve, 500));
      continue;
    }
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(), Math.max(0, deadline - Date.now()));
    try {
      connections += 1;
      const response = await fetch(`${url}/v1/conversations/${options.conversationId}/stream`, {
        headers: {
          authorization: `Bearer ${options.token}`,
          ...(lastId === undefined ? {} : { 'last-event-id': lastId }),
        },
        signal: controller.signal,
      });
      if (response.status === 200 && response.body !== null) {
        const decoder = new TextDecoder();
        let buffer = '';
        for await (const chunk of response.body) {
          buffer += decoder.decode(chunk as Uint8Array, { stream: true });
          let end: number;
          while ((end = buffer.indexOf('\n\n')) >= 0) {
            const parsed = parseFrame(buffer.slice(0, end));
            buffer = buffer.slice(end + 2);
            if (parsed === undefined) continue;
            if (parsed.id !== undefined) lastId = parsed.id;
            events.push(parsed);
          }
          if (options.until(events)) {
            controller.abort();
            return { events, connections };
          }
        }
      }
    } catch {
      // A dropped connection or a replica that is gone: reconnect, as EventSource does.
    } finally {
      clearTimeout(timer);
      controller.abort();
    }
    if (options.until(events)) return { events, connections };
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  throw new Error(
    `the stream of ${options.conversationId} did not show what was awaited; it saw ${events
      .filter((e) => e.event !== 'signed_root')
      .map((e) => e.event)
      .join(', ')}`,
  );
}

function parseFrame(frame: string): StreamEvent | undefined {
  let id: string | undefined;
  let event: string | undefined;
  let data: string | undefined;
  for (const line of frame.split('\n')) {
    if (line.startsWith(':')) continue;
    const colon = line.indexOf(':');
    const field = colon < 0 ? line : line.slice(0, colon);
    const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /u, '');
    if (field === 'id') id = value;
    else if (field === 'event') event = value;
    else if (field === 'data') data = value;
  }
  if (event === undefined || data === undefined) return undefined;
  return { id, event, data: JSON.parse(data) as unknown };
}
