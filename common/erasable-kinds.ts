import { EventKind } from './event-kinds';

/*
 * Which journal entries an admin may erase (docs/journal-format.md, "Erasure";
 * docs/state-plane.md, "Erasure"): the entries that hold what people and models said and
 * did (content), never those that hold the journal's structure, its signatures or the
 * decisions other entries depend on. The state plane refuses any other kind; this is the
 * one list.
 */

/** The kinds whose entries hold content that may be erased. */
export const ERASABLE_KINDS: ReadonlySet<string> = new Set<string>([
  EventKind.MessageReceived,
  EventKind.ModelCall,
  EventKind.ToolCall,
  EventKind.ToolResult,
  EventKind.QuestionRequest,
  EventKind.QuestionResponse,
  EventKind.TurnComplete,
  EventKind.MemorySet,
]);

/** True when an entry of `kind` may be erased. */
export function isErasableKind(kind: string): boolean {
  return ERASABLE_KINDS.has(kind);
}

/** The erasable kinds, sorted, for messages. */
export function erasableKindsText(): string {
  return [...ERASABLE_KINDS].sort().join(', ');
}
