import type { Context } from './tracing';

/**
 * Span attributes after the OpenTelemetry GenAI semantic conventions
 * (docs/observability.md#spans), each rule in one place for every plane.
 */

/** The `gen_ai.operation.name` values Polychrome's spans use. */
export const GenAiOperation = {
  Chat: 'chat',
  ExecuteTool: 'execute_tool',
  InvokeAgent: 'invoke_agent',
} as const;
export type GenAiOperation = (typeof GenAiOperation)[keyof typeof GenAiOperation];

/** Where the model and tool spans of one agent's part of a turn go. */
export interface GenAiSpanScope {
  readonly conversationId: string;
  /**
   * Their parent: the `invoke_agent` span of the agent answering on delegation `thread`
   * (absent or '': the turn's own agent); undefined: the active context.
   */
  parent(thread?: string): Context | undefined;
}

/** `gen_ai.agent.name` of an agent whose Conversation sets no `spec.agent.name`. */
export const DEFAULT_AGENT_NAME = 'agent';

/**
 * The conversation's attributes: `polychrome.conversation.id` (the Conversation's uid) and
 * the GenAI conventions' `gen_ai.conversation.id`, always the same value, on every span
 * that names a conversation.
 */
export function conversationAttributes(conversationId: string): {
  readonly 'polychrome.conversation.id': string;
  readonly 'gen_ai.conversation.id': string;
} {
  return {
    'polychrome.conversation.id': conversationId,
    'gen_ai.conversation.id': conversationId,
  };
}
