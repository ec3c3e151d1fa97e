/**
 * One Server-Sent Events message, as the HTML standard's "dispatch the event" step makes
 * it (https://html.spec.whatwg.org/multipage/server-sent-events.html#event-stream-interpretation).
 */
export interface SseMessage {
  /** `event:`; `message` when the block named none. */
  readonly event: string;
  /** The `data:` lines joined with "\n". */
  readonly data: string;
  /**
   * `id:` when this block carried one. Unlike EventSource, a block without an id does not
   * inherit the previous one: the API sends uncommitted deltas without an id on purpose.
   */
  readonly id: string | undefined;
}

/**
 * Incremental, pure parser of a `text/event-stream` body: feed it text as it arrives (in
 * any split, CR/LF/CRLF line ends, a CRLF torn across two chunks included) and get the
 * messages each blank line completes. `retry:` values are kept in {@link retryMs}.
 * Comments (`: keep-alive`) only count as activity.
 */
export class SseParser {
  /** The last valid `retry:` value, in milliseconds. */
  retryMs: number | undefined;
  private buffer = '';
  private skipLineFeed = false;
  private event = '';
  private data: string[] = [];
  private id: string | undefined;
  private hasData = false;

  /** Parses `chunk`; returns the messages it completed, in order. */
  push(chunk: string): SseMessage[] {
    const out: SseMessage[] = [];
    if (chunk === '') return out;
    let text = chunk;
    if (this.skipLineFeed && text.startsWith('\n')) text = text.slice(1);
    this.skipLineFeed = false;
    this.buffer += text;
    for (;;) {
      const end = this.buffer.search(/[\r\n]/u);
      if (end < 0) break;
      const line = this.buffer.slice(0, end);
      if (this.buffer[end] === '\r') {
        if (end + 1 < this.buffer.length) {
          this.buffer = this.buffer.slice(this.buffer[end + 1] === '\n' ? end + 2 : end + 1);
        } else {
          // A CR at the end of the chunk: its LF may start the next one.
          this.buffer = '';
          this.skipLineFeed = true;
        }
      } else {
        this.buffer = this.buffer.slice(end + 1);
      }
      const message = this.line(line);
      if (message !== undefined) out.push(message);
    }
    return out;
  }

  private line(line: string): SseMessage | undefined {
    if (line === '') return this.dispatch();
    if (line.startsWith(':')) return undefined;
    const colon = line.indexOf(':');
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    switch (field) {
      case 'event':
        this.event = value;
        break;
      case 'data':
        this.data.push(value);
        this.hasData = true;
        break;
      case 'id':
        if (!value.includes('\0')) this.id = value;
        break;
      case 'retry':
        if (/^[0-9]+$/u.test(value)) this.retryMs = Number(value);
        break;
      default:
        break;
    }
    return undefined;
  }

  private dispatch(): SseMessage | undefined {
    const message: SseMessage | undefined = this.hasData
      ? {
          event: this.event === '' ? 'message' : this.event,
          data: this.data.join('\n'),
          id: this.id,
        }
      : undefined;
    this.event = '';
    this.data = [];
    this.id = undefined;
    this.hasData = false;
    return message;
  }
}
