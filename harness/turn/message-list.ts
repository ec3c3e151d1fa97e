/**
 * An immutable list of messages that appends in O(1) amortized time.
 *
 * A turn's conversation is the history it was given plus the messages the turn adds. The
 * history is shared, never copied; the added messages live in a backing array that
 * successive lists share. A list owns the first `tailLength` slots of that array, and an
 * append pushes onto the array when no other list has claimed the next slot, or copies
 * the list's own slots when one has (a branch). No list ever sees another's appends.
 *
 * The whole array is built only by {@link MessageList.toArray}, for whoever needs it (the
 * model request sent to a provider). Digests read the list through {@link MessageSequence}.
 */
import type { Message } from '../../common/model/model-port';

/** Read access to a sequence of messages: a `readonly Message[]` or a {@link MessageList}. */
export interface MessageSequence {
  readonly length: number;
  /** The message at `index` (negative counts from the end, as `Array.prototype.at`). */
  at(index: number): Message | undefined;
}

export class MessageList implements MessageSequence {
  /**
   * A list that starts with `history`. Only the history's first `history.length` entries
   * are read, so a caller may append to its array later; it must not change those entries.
   */
  static of(history: readonly Message[]): MessageList {
    return new MessageList(history, history.length, [], 0);
  }

  private constructor(
    private readonly prefix: readonly Message[],
    private readonly prefixLength: number,
    /** Shared with the lists this one was appended from and to; slots past tailLength are others'. */
    private readonly tail: Message[],
    private readonly tailLength: number,
  ) {}

  get length(): number {
    return this.prefixLength + this.tailLength;
  }

  at(index: number): Message | undefined {
    const i = index < 0 ? index + this.length : index;
    if (i < 0 || i >= this.length) return undefined;
    return i < this.prefixLength ? this.prefix[i] : this.tail[i - this.prefixLength];
  }

  /** This list with `message` added at the end. */
  append(message: Message): MessageList {
    let tail = this.tail;
    if (tail.length !== this.tailLength) tail = tail.slice(0, this.tailLength);
    tail.push(message);
    return new MessageList(this.prefix, this.prefixLength, tail, this.tailLength + 1);
  }

  /** This list with its last message replaced by `message` (appended when it is empty). */
  replaceLast(message: Message): MessageList {
    if (this.tailLength > 0) {
      const tail = this.tail.slice(0, this.tailLength - 1);
      tail.push(message);
      return new MessageList(this.prefix, this.prefixLength, tail, this.tailLength);
    }
    if (this.prefixLength === 0) return this.append(message);
    // The last message is the history's: a new list over a shorter copy of it (rare: a
    // turn always adds its user message first).
    return MessageList.of(this.prefix.slice(0, this.prefixLength - 1)).append(message);
  }

  /** A new array of every message, in order. */
  toArray(): Message[] {
    return this.prefix.slice(0, this.prefixLength).concat(this.tail.slice(0, this.tailLength));
  }
}
