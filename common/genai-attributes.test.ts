import { describe, expect, it } from '@jest/globals';
import { conversationAttributes } from './genai-attributes';

describe('conversationAttributes', () => {
  it('names the conversation under both keys, with the same value', () => {
    expect(conversationAttributes('8f1c')).toEqual({
      'polychrome.conversation.id': '8f1c',
      'gen_ai.conversation.id': '8f1c',
    });
  });
});
