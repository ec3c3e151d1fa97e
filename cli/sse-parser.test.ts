import { describe, expect, it } from '@jest/globals';

import { SseParser, type SseMessage } from './sse-parser';

/*
 * The event-stream parser against the HTML standard's interpretation rules, fed in every
 * possible split so a message torn across network chunks parses the same.
 */

const STREAM =
  'retry: 1000\r\n\r\n' +
  'id: 0\r\nevent: message_received\r\ndata: {"position":0}\r\n\r\n' +
  ': keep-alive\n\n' +
  'event: delta\ndata: {"text":"Hel"}\n\n' +
  'id: 1\revent: turn_complete\rdata: line one\rdata: line two\r\r' +
  'data:no-space\n\n' +
  'id: 2\n\n' +
  'event: shutdown\ndata: {}\n\n';

const EXPECTED: SseMessage[] = [
  { event: 'message_received', data: '{"position":0}', id: '0' },
  { event: 'delta', data: '{"text":"Hel"}', id: undefined },
  { event: 'turn_complete', data: 'line one\nline two', id: '1' },
  { event: 'message', data: 'no-space', id: undefined },
  { event: 'shutdown', data: '{}', id: undefined },
];

function parseAll(chunks: readonly string[]): { messages: SseMessage[]; retryMs?: number } {
  const parser = new SseParser();
  const messages = chunks.flatMap((chunk) => parser.push(chunk));
  return { messages, ...(parser.retryMs === undefined ? {} : { retryMs: parser.retryMs }) };
}

describe('SseParser', () => {
  it('parses a stream given at once: ids only where sent, comments and id-only blocks dropped', () => {
    expect(parseAll([STREAM])).toEqual({ messages: EXPECTED, retryMs: 1000 });
  });

  it('parses the same in any two-chunk split (CRLF torn between chunks included)', () => {
    for (let at = 0; at <= STREAM.length; at++) {
      expect(parseAll([STREAM.slice(0, at), STREAM.slice(at)]).messages).toEqual(EXPECTED);
    }
  });

  it('parses the same one character at a time', () => {
    expect(parseAll([...STREAM]).messages).toEqual(EXPECTED);
  });

  it('keeps a message without its blank line pending', () => {
    const parser = new SseParser();
    expect(parser.push('id: 7\nevent: tool_call\ndata: {}\n')).toEqual([]);
    expect(parser.push('\n')).toEqual([{ event: 'tool_call', data: '{}', id: '7' }]);
  });

  it('ignores a retry that is not a number and an id with NUL', () => {
    const parser = new SseParser();
    expect(parser.push('retry: soon\nid: a\0b\ndata: x\n\n')).toEqual([
      { event: 'message', data: 'x', id: undefined },
    ]);
    expect(parser.retryMs).toBeUndefined();
  });
});
