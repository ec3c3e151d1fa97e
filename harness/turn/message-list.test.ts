import { describe, expect, it } from '@jest/globals';
import type { Message } from '../../common/model/model-port';
import { MessageList } from './message-list';

const text = (role: Message['role'], t: string): Message => ({
  role,
  content: [{ type: 'text', text: t }],
});

describe('MessageList', () => {
  it('reads the history and the appended messages in order, and builds the array', () => {
    const history = [text('user', 'h0'), text('assistant', 'h1')];
    const list = MessageList.of(history).append(text('user', 'a')).append(text('assistant', 'b'));
    expect(list.length).toBe(4);
    expect(list.toArray()).toEqual([...history, text('user', 'a'), text('assistant', 'b')]);
    expect(list.at(0)).toBe(history[0]);
    expect(list.at(-1)).toEqual(text('assistant', 'b'));
    expect(list.at(-4)).toBe(history[0]);
    expect(list.at(4)).toBeUndefined();
    expect(list.at(-5)).toBeUndefined();
    expect(history).toHaveLength(2); // the history is shared, never written
  });

  it('keeps every list as it was: appends after a branch do not show in either', () => {
    const base = MessageList.of([text('user', 'h')]).append(text('user', 'q'));
    const left = base.append(text('assistant', 'left'));
    const right = base.append(text('assistant', 'right'));
    const leftMore = left.append(text('user', 'more'));
    expect(base.toArray().map((m) => m.content)).toEqual([
      [{ type: 'text', text: 'h' }],
      [{ type: 'text', text: 'q' }],
    ]);
    expect(left.toArray().at(-1)).toEqual(text('assistant', 'left'));
    expect(left.length).toBe(3);
    expect(right.toArray().at(-1)).toEqual(text('assistant', 'right'));
    expect(right.length).toBe(3);
    expect(leftMore.toArray().slice(-2)).toEqual([text('assistant', 'left'), text('user', 'more')]);
  });

  it('does not see messages the caller appends to its history array later', () => {
    const history = [text('user', 'h0')];
    const list = MessageList.of(history).append(text('user', 'a'));
    history.push(text('assistant', 'late'));
    expect(list.length).toBe(2);
    expect(list.toArray()).toEqual([text('user', 'h0'), text('user', 'a')]);
  });

  it('replaces the last message without touching the list it came from', () => {
    const list = MessageList.of([text('user', 'h')]).append(text('user', 'q'));
    const replaced = list.replaceLast(text('user', 'q2'));
    expect(replaced.toArray()).toEqual([text('user', 'h'), text('user', 'q2')]);
    expect(list.toArray()).toEqual([text('user', 'h'), text('user', 'q')]);
    // The last message is the history's, and the list is empty.
    expect(
      MessageList.of([text('user', 'h')])
        .replaceLast(text('user', 'x'))
        .toArray(),
    ).toEqual([text('user', 'x')]);
    expect(MessageList.of([]).replaceLast(text('user', 'x')).toArray()).toEqual([
      text('user', 'x'),
    ]);
  });
});
