import { describe, expect, it } from '@jest/globals';
import { ApiError } from './api-error';
import {
  parseApprovalAnswer,
  parseConversationId,
  parseQuestionAnswer,
  parseCreateConversation,
  parseStreamCursor,
  resolveIdempotencyKey,
} from './request-parsers';

function thrown(fn: () => unknown): ApiError {
  try {
    fn();
  } catch (error) {
    if (error instanceof ApiError) return error;
    throw error;
  }
  throw new Error('did not throw');
}

describe('parseStreamCursor', () => {
  it.each([
    [{}, 0],
    [{ since: '0' }, 0],
    [{ since: '12' }, 12],
    [{ lastEventIdHeader: '0' }, 1],
    [{ lastEventIdHeader: '41' }, 42],
    [{ lastEventIdQuery: '41' }, 42],
    [{ lastEventIdHeader: '41', lastEventIdQuery: '41' }, 42],
    [{ lastEventIdHeader: '41', since: '3' }, 42],
    [{ lastEventIdHeader: '', since: '3' }, 3],
    [{ lastEventIdHeader: '999999999999999' }, 1_000_000_000_000_000],
  ])('%j starts at %d', (input, expected) => {
    expect(
      parseStreamCursor({
        lastEventIdHeader: undefined,
        lastEventIdQuery: undefined,
        since: undefined,
        ...input,
      }),
    ).toBe(expected);
  });

  it('names the field and the rule for a malformed cursor', () => {
    const error = thrown(() =>
      parseStreamCursor({ lastEventIdHeader: undefined, lastEventIdQuery: undefined, since: '-3' }),
    );
    expect(error.code).toBe('invalid_argument');
    expect(error.httpStatus).toBe(400);
    expect(error.message).toBe(
      'since must be a journal position: a non-negative decimal integer of at most 15 digits, ' +
        `got "-3"; the first position wanted, e.g. a reply's requestedAt`,
    );
    expect(error.details).toEqual({ field: 'since' });
  });
});

describe('resolveIdempotencyKey', () => {
  const generate = (): string => 'generated';
  it.each([
    [undefined, undefined, { key: 'generated', generated: true }],
    ['body', undefined, { key: 'body', generated: false }],
    [undefined, 'header', { key: 'header', generated: false }],
    ['same', 'same', { key: 'same', generated: false }],
  ])('body %j and header %j give %j', (body, header, expected) => {
    expect(resolveIdempotencyKey(body, header, 'idempotencyKey', generate)).toEqual(expected);
  });

  it('refuses keys that differ', () => {
    expect(
      thrown(() => resolveIdempotencyKey('a', 'b', 'message.idempotencyKey', generate)).message,
    ).toBe(
      'the Idempotency-Key header and message.idempotencyKey differ; send the key once, or the same key in both',
    );
  });
});

describe('parseConversationId and parseCreateConversation', () => {
  it('accepts a lower-case uid only', () => {
    expect(parseConversationId('0b5c3a9e-4f0d-4d0a-9a52-6f1e2b7c8d90')).toBe(
      '0b5c3a9e-4f0d-4d0a-9a52-6f1e2b7c8d90',
    );
    expect(thrown(() => parseConversationId('conv-1')).message).toMatch(
      /^"conv-1" is not a conversation id; use the conversationId a create answered with/,
    );
  });

  it('parses a create body with a message and directive', () => {
    expect(
      parseCreateConversation({
        message: { text: 'hi', idempotencyKey: 'k', directive: { maxSteps: 2 } },
      }),
    ).toEqual({ message: { text: 'hi', idempotencyKey: 'k', directive: { maxSteps: 2 } } });
    expect(parseCreateConversation({})).toEqual({});
    expect(thrown(() => parseCreateConversation({ message: 'hi' })).message).toBe(
      'message must be a JSON object, got a string',
    );
  });
});

describe('cancel bodies', () => {
  it('takes decision cancel on an approval and cancel: true on a question', () => {
    expect(parseApprovalAnswer({ decision: 'cancel', comment: 'stale' })).toEqual({
      decision: 'cancel',
      comment: 'stale',
    });
    expect(parseQuestionAnswer({ cancel: true })).toEqual({ cancel: true });
    expect(parseQuestionAnswer({ cancel: true, comment: 'no' })).toEqual({
      cancel: true,
      comment: 'no',
    });
    expect(parseQuestionAnswer({ answer: 'prod' })).toEqual({ answer: 'prod' });
  });

  it.each([
    [{ cancel: false }, 'cancel', /cancel must be true, got a boolean/],
    [{ cancel: 'yes' }, 'cancel', /cancel must be true/],
    [{ cancel: true, answer: 'prod' }, 'answer', /either "answer" or "cancel": true, not both/],
    [{ answer: 'prod', comment: 'x' }, 'comment', /comment goes only with "cancel": true/],
  ])('refuses the question body %j naming %s', (body, field, message) => {
    const error = thrown(() => parseQuestionAnswer(body));
    expect(error.message).toMatch(message);
    expect(JSON.stringify(error)).toContain(field);
  });
});
