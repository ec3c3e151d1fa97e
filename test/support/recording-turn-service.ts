import type { TurnService } from '../../operator/turns/turn-service';

/**
 * The real turn service (the coordinator) as the API sees it, with each call recorded
 * ({@link calls}: what reached the service) and one injectable failure ({@link failNext}:
 * errors the real parts cannot produce on demand, to see how the API answers them). It
 * forwards everything else untouched and decides nothing.
 */
export class RecordingTurnService implements TurnService {
  /** Every call made, in order: method name and the caller's identity. */
  readonly calls: { method: string; caller?: string }[] = [];
  private nextFailure: Error | undefined;
  private readonly listeners = new Map<string, number>();

  constructor(private readonly inner: TurnService) {}

  /** Makes the next call throw `error` before it reaches the service. */
  failNext(error: Error): void {
    this.nextFailure = error;
  }

  /** Text-delta listeners the API holds on `conversationId`. */
  deltaListeners(conversationId: string): number {
    return this.listeners.get(conversationId) ?? 0;
  }

  createConversation: TurnService['createConversation'] = (caller, request, signal) =>
    this.enter('createConversation', caller.identity).then(() =>
      this.inner.createConversation(caller, request, signal),
    );

  conversation: TurnService['conversation'] = (caller, conversationId) =>
    this.enter('conversation', caller.identity).then(() =>
      this.inner.conversation(caller, conversationId),
    );

  postMessage: TurnService['postMessage'] = (caller, request, signal) =>
    this.enter('postMessage', caller.identity).then(() =>
      this.inner.postMessage(caller, request, signal),
    );

  answerApproval: TurnService['answerApproval'] = (caller, request, signal) =>
    this.enter('answerApproval', caller.identity).then(() =>
      this.inner.answerApproval(caller, request, signal),
    );

  answerQuestion: TurnService['answerQuestion'] = (caller, request, signal) =>
    this.enter('answerQuestion', caller.identity).then(() =>
      this.inner.answerQuestion(caller, request, signal),
    );

  transcript: TurnService['transcript'] = (caller, conversationId, signal) =>
    this.enter('transcript', caller.identity).then(() =>
      this.inner.transcript(caller, conversationId, signal),
    );

  memory: TurnService['memory'] = (caller, conversationId, signal) =>
    this.enter('memory', caller.identity).then(() =>
      this.inner.memory(caller, conversationId, signal),
    );

  clearMemory: TurnService['clearMemory'] = (caller, request, signal) =>
    this.enter('clearMemory', caller.identity).then(() =>
      this.inner.clearMemory(caller, request, signal),
    );

  resolveTurn: TurnService['resolveTurn'] = (caller, request, signal) =>
    this.enter('resolveTurn', caller.identity).then(() =>
      this.inner.resolveTurn(caller, request, signal),
    );

  acceptRollback: TurnService['acceptRollback'] = (caller, request, signal) =>
    this.enter('acceptRollback', caller.identity).then(() =>
      this.inner.acceptRollback(caller, request, signal),
    );

  setPaymentPolicy: TurnService['setPaymentPolicy'] = (caller, request, signal) =>
    this.enter('setPaymentPolicy', caller.identity).then(() =>
      this.inner.setPaymentPolicy(caller, request, signal),
    );

  paymentPolicy: TurnService['paymentPolicy'] = (caller, conversationId, actor, signal) =>
    this.enter('paymentPolicy', caller.identity).then(() =>
      this.inner.paymentPolicy(caller, conversationId, actor, signal),
    );

  onTextDelta: TurnService['onTextDelta'] = (conversationId, listener) => {
    this.listeners.set(conversationId, this.deltaListeners(conversationId) + 1);
    const unsubscribe = this.inner.onTextDelta(conversationId, listener);
    let done = false;
    return () => {
      if (done) return;
      done = true;
      this.listeners.set(conversationId, this.deltaListeners(conversationId) - 1);
      unsubscribe();
    };
  };

  private enter(method: string, caller: string): Promise<void> {
    this.calls.push({ method, caller });
    const failure = this.nextFailure;
    this.nextFailure = undefined;
    return failure === undefined ? Promise.resolve() : Promise.reject(failure);
  }
}
