import { inSpan, isTracing, type Span } from '../../common/tracing';
import type { TurnReply, TurnService } from './turn-service';

/**
 * `service` with a span `turn <operation>` around each call that may run a turn
 * (create with a first message, post, answer an approval or a question): the
 * coordinator's work, under the API request's span, with the journal appends and the
 * harness call as its children. With tracing off, `service` itself.
 */
export function tracedTurnService(service: TurnService): TurnService {
  if (!isTracing()) return service;
  const same = (reply: TurnReply): TurnReply => reply;
  return {
    createConversation: (caller, request, signal) =>
      traced(
        'createConversation',
        undefined,
        () => service.createConversation(caller, request, signal),
        (result) => result.turn,
      ),
    conversation: (caller, conversationId) => service.conversation(caller, conversationId),
    postMessage: (caller, request, signal) =>
      traced(
        'postMessage',
        request.conversationId,
        () => service.postMessage(caller, request, signal),
        same,
      ),
    answerApproval: (caller, request, signal) =>
      traced(
        'answerApproval',
        request.conversationId,
        () => service.answerApproval(caller, request, signal),
        same,
      ),
    answerQuestion: (caller, request, signal) =>
      traced(
        'answerQuestion',
        request.conversationId,
        () => service.answerQuestion(caller, request, signal),
        same,
      ),
    resolveTurn: (caller, request, signal) => service.resolveTurn(caller, request, signal),
    transcript: (caller, conversationId, signal) =>
      service.transcript(caller, conversationId, signal),
    onTextDelta: (conversationId, listener) => service.onTextDelta(conversationId, listener),
  };
}

function noteReply(span: Span | undefined, reply: TurnReply | undefined): void {
  if (span === undefined || reply === undefined) return;
  span.setAttributes({
    'polychrome.conversation.id': reply.conversationId,
    'polychrome.turn.id': reply.turnId,
    'polychrome.turn.status': reply.status,
  });
}

function traced<T>(
  operation: string,
  conversationId: string | undefined,
  run: () => Promise<T>,
  reply: (result: T) => TurnReply | undefined,
): Promise<T> {
  return inSpan(
    `turn ${operation}`,
    {
      attributes: {
        'polychrome.turn.operation': operation,
        ...(conversationId === undefined ? {} : { 'polychrome.conversation.id': conversationId }),
      },
    },
    async (span) => {
      const result = await run();
      noteReply(span, reply(result));
      return result;
    },
  );
}
