import { conversationAttributes } from '../../common/genai-attributes';
import {
  isTracing,
  recordActiveSpanException,
  setActiveSpanAttributes,
} from '../../common/tracing';
import type { TurnReply, TurnService } from './turn-service';

/**
 * `service` with each call that may run a turn (create with a first message, post, answer
 * an approval or a question) written onto the active span, the API request's: the
 * operation and conversation before the call, the turn id and status after it, and a
 * failure as an exception event (the request span's status follows its HTTP status). It
 * makes no span of its own, as the journal and harness calls make no CLIENT spans: one
 * span a turn in the control plane instead of five about halved its share of tracing's
 * cost (docs/observability.md#the-cost-of-tracing). Whether tracing is on is asked at
 * each call, as the spans' own wrappers do; off, a call is `service`'s and nothing else.
 */
export function tracedTurnService(service: TurnService): TurnService {
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
    acceptRollback: (caller, request, signal) => service.acceptRollback(caller, request, signal),
    setPaymentPolicy: (caller, request, signal) =>
      service.setPaymentPolicy(caller, request, signal),
    paymentPolicy: (caller, conversationId, actor, signal) =>
      service.paymentPolicy(caller, conversationId, actor, signal),
    transcript: (caller, conversationId, signal) =>
      service.transcript(caller, conversationId, signal),
    memory: (caller, conversationId, signal) => service.memory(caller, conversationId, signal),
    clearMemory: (caller, request, signal) => service.clearMemory(caller, request, signal),
    onTextDelta: (conversationId, listener) => service.onTextDelta(conversationId, listener),
  };
}

function traced<T>(
  operation: string,
  conversationId: string | undefined,
  run: () => Promise<T>,
  reply: (result: T) => TurnReply | undefined,
): Promise<T> {
  return isTracing() ? annotated(operation, conversationId, run, reply) : run();
}

async function annotated<T>(
  operation: string,
  conversationId: string | undefined,
  run: () => Promise<T>,
  reply: (result: T) => TurnReply | undefined,
): Promise<T> {
  setActiveSpanAttributes({
    'polychrome.turn.operation': operation,
    ...(conversationId === undefined ? {} : conversationAttributes(conversationId)),
  });
  let result: T;
  try {
    result = await run();
  } catch (error) {
    recordActiveSpanException(error);
    throw error;
  }
  const turn = reply(result);
  if (turn !== undefined) {
    setActiveSpanAttributes({
      ...conversationAttributes(turn.conversationId),
      'polychrome.turn.id': turn.turnId,
      'polychrome.turn.status': turn.status,
    });
  }
  return result;
}
