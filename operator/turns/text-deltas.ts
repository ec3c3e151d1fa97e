/**
 * The live text of the turns this replica runs, handed to whoever listens on each
 * conversation (the stream, docs/api.md): listeners per conversation, and nothing kept.
 */
import type { TextDeltaEvent } from './turn-service';

export class TextDeltas {
  private readonly listeners = new Map<string, Set<(delta: TextDeltaEvent) => void>>();

  /** Calls `listener` with each text delta of the conversation's turns; returns the unsubscribe. */
  listen(conversationId: string, listener: (delta: TextDeltaEvent) => void): () => void {
    let set = this.listeners.get(conversationId);
    if (set === undefined) {
      set = new Set();
      this.listeners.set(conversationId, set);
    }
    set.add(listener);
    return () => {
      set.delete(listener);
      if (set.size === 0) this.listeners.delete(conversationId);
    };
  }

  /** Hands `delta` to the conversation's listeners. */
  emit(conversationId: string, delta: TextDeltaEvent): void {
    for (const listener of this.listeners.get(conversationId) ?? []) listener(delta);
  }
}
