import { conversationSchema } from './conversation-crd';
import type { Conversation } from './conversation-types';
import { ConversationResource } from './conversation-types';
import { checkAgainstSchema, isPlainObject } from './schema-check';

/**
 * Narrows an object read from the API server (a watch event, a list item) to a
 * Conversation: right apiVersion and kind, a metadata object, and a spec and status that
 * pass the schema's OpenAPI checks. CEL rules are not re-run: the API server ran them on
 * write. Returns false for anything else, e.g. an object of another kind or version.
 */
export function isConversation(value: unknown): value is Conversation {
  return (
    isPlainObject(value) &&
    value['apiVersion'] === ConversationResource.apiVersion &&
    value['kind'] === ConversationResource.kind &&
    isPlainObject(value['metadata']) &&
    checkAgainstSchema(conversationSchema, value, '').length === 0
  );
}
