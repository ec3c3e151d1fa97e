import { approvalArgsSha256 } from '../../../common/approval-bytes';
import { canonicalJson } from '../../../common/canonical-json';
import { AppError } from '../../../common/errors';
import { encodePayload, EventKind, type EventPayloads } from '../../../common/event-kinds';
import type { NewJournalEvent } from '../../../common/state-client';
import { ApprovalDecision } from '../../../proto/gen/polychrome/events/v1/events';
import type {
  AnswerApproval,
  AnswerQuestion,
  ApprovalCard,
  Caller,
  ConversationSummary,
  NewConversation,
  PostMessage,
  QuestionCard,
  TextDeltaEvent,
  Transcript,
  TranscriptTurn,
  TurnReply,
  TurnService,
} from '../../turns/turn-service';
import type { InMemoryJournal } from './in-memory-journal';

interface StoredTurn {
  readonly turnId: string;
  readonly idempotencyKey: string;
  readonly text: string;
  readonly caller: string;
  readonly receivedAtMs: number;
  readonly position: number;
  /** Every approval or question request id the turn raised, answered or not. */
  readonly requestIds: string[];
  reply: TurnReply;
  pending?: { kind: 'approval'; card: ApprovalCard } | { kind: 'question'; card: QuestionCard };
}

interface StoredConversation {
  readonly id: string;
  readonly owner: string;
  readonly partition: string;
  readonly turns: StoredTurn[];
}

/**
 * A TEST STAND-IN for the turn coordinator (operator/turns), which is tested on its own
 * against the real stack. It keeps conversations and turns in memory and writes the
 * journal events a real turn writes (batch one: message_received, ingress_directive,
 * turn_dispatched, signed_root; batch two: turn_complete or a pause, signed_root) to an
 * {@link InMemoryJournal}, so streams have something true to follow. Its "agent" echoes:
 *
 *   - `/approve <to>` pauses for an approval of `send_email({to})`; answering completes it;
 *   - `/ask <question>` pauses with that question; answering completes it;
 *   - anything else completes with `echo: <text>`, sent first as two live text deltas.
 *
 * Rules it keeps like the real one: only the owner or an admin may see or continue a
 * conversation (`permission_denied`); unknown conversation or request: `not_found`; the same
 * idempotency key with the same text returns the same turn, with other text: `conflict`;
 * a message while a turn awaits an answer: `failed_precondition`; a required approver
 * other than the caller: `permission_denied`. {@link calls} lists every call made.
 */
export class InMemoryTurnService implements TurnService {
  /** Every call made, in order: method name and the caller's identity. */
  readonly calls: { method: string; caller?: string }[] = [];
  private readonly conversations = new Map<string, StoredConversation>();
  private readonly listeners = new Map<string, Set<(delta: TextDeltaEvent) => void>>();
  private readonly journal: InMemoryJournal;
  private readonly now: () => number;
  private conversationCount = 0;
  private turnCount = 0;
  private nextFailure: Error | undefined;
  private hold: (() => void) | undefined;

  constructor(journal: InMemoryJournal, options: { now?: () => number } = {}) {
    this.journal = journal;
    this.now = options.now ?? (() => 1_767_225_600_000);
  }

  /** Makes the next call throw `error` (to see how the API answers it). */
  failNext(error: Error): void {
    this.nextFailure = error;
  }

  /**
   * Makes the next postMessage wait until its signal aborts, then fail `cancelled` (a turn
   * still running when the replica shuts down). `held` resolves once it waits.
   */
  holdNextTurn(): { held: Promise<void> } {
    let resolve: () => void = () => undefined;
    const held = new Promise<void>((r) => {
      resolve = r;
    });
    this.hold = resolve;
    return { held };
  }

  /** Text-delta listeners subscribed to `conversationId`. */
  deltaListeners(conversationId: string): number {
    return this.listeners.get(conversationId)?.size ?? 0;
  }

  /** Sends a live text delta to the conversation's listeners, as a running turn does. */
  sendDelta(conversationId: string, delta: TextDeltaEvent): void {
    for (const listener of this.listeners.get(conversationId) ?? []) listener(delta);
  }

  /** Adds a conversation owned by `owner` directly (no call recorded). @returns its id. */
  seed(owner: string): string {
    this.conversationCount += 1;
    const suffix = this.conversationCount.toString(16).padStart(12, '0');
    const id = `00000000-0000-4000-8000-${suffix}`;
    this.conversations.set(id, { id, owner, partition: `conv-${id}`, turns: [] });
    return id;
  }

  async createConversation(
    caller: Caller,
    request: NewConversation,
    signal: AbortSignal,
  ): Promise<{ summary: ConversationSummary; turn?: TurnReply }> {
    this.enter('createConversation', caller, signal);
    const id = this.seed(caller.identity);
    if (request.message === undefined) return { summary: this.summaryOf(this.stored(id)) };
    const turn = await this.runMessage(caller, { conversationId: id, ...request.message });
    return { summary: this.summaryOf(this.stored(id)), turn };
  }

  conversation(caller: Caller, conversationId: string): Promise<ConversationSummary> {
    this.enter('conversation', caller);
    return Promise.resolve(this.summaryOf(this.visible(caller, conversationId)));
  }

  async postMessage(caller: Caller, request: PostMessage, signal: AbortSignal): Promise<TurnReply> {
    this.enter('postMessage', caller, signal);
    const hold = this.hold;
    if (hold !== undefined) {
      this.hold = undefined;
      await new Promise<void>((resolve) => {
        signal.addEventListener('abort', () => resolve(), { once: true });
        hold();
      });
      throw new AppError('cancelled', 'the turn was cancelled');
    }
    return this.runMessage(caller, request);
  }

  answerApproval(caller: Caller, request: AnswerApproval, signal: AbortSignal): Promise<TurnReply> {
    this.enter('answerApproval', caller, signal);
    const conversation = this.visible(caller, request.conversationId);
    const turn = this.pendingTurn(conversation, request.requestId, 'approval');
    if (turn.pending?.kind !== 'approval') throw new Error('unreachable');
    const card = turn.pending.card;
    if (card.requiredApprover !== '' && !caller.identities.includes(card.requiredApprover)) {
      throw new AppError(
        'permission_denied',
        `approval ${card.requestId} must be answered by ${card.requiredApprover}`,
      );
    }
    const approved = request.decision === 'approve';
    const text = approved ? `sent to ${String(Reflect.get(Object(card.args), 'to'))}` : 'not sent';
    this.append(conversation, [
      event(EventKind.ApprovalResponse, {
        turnId: turn.turnId,
        requestId: card.requestId,
        toolName: card.toolName,
        argsSha256: Buffer.from(card.argsSha256, 'hex'),
        decision: approved
          ? ApprovalDecision.APPROVAL_DECISION_APPROVED
          : ApprovalDecision.APPROVAL_DECISION_DENIED,
        answeredBy: caller.identity,
        keyId: 'in-memory',
        signature: Buffer.alloc(64),
        answeredAtMs: this.now(),
        comment: request.comment ?? '',
      }),
    ]);
    return Promise.resolve(this.complete(conversation, turn, text));
  }

  answerQuestion(caller: Caller, request: AnswerQuestion, signal: AbortSignal): Promise<TurnReply> {
    this.enter('answerQuestion', caller, signal);
    const conversation = this.visible(caller, request.conversationId);
    const turn = this.pendingTurn(conversation, request.requestId, 'question');
    this.append(conversation, [
      event(EventKind.QuestionResponse, {
        turnId: turn.turnId,
        requestId: request.requestId,
        answer: request.answer,
        answeredBy: caller.identity,
        answeredAtMs: this.now(),
      }),
    ]);
    return Promise.resolve(this.complete(conversation, turn, `thanks: ${request.answer}`));
  }

  transcript(caller: Caller, conversationId: string, signal: AbortSignal): Promise<Transcript> {
    this.enter('transcript', caller, signal);
    const conversation = this.visible(caller, conversationId);
    const turns = conversation.turns.map((turn): TranscriptTurn => ({
      turnId: turn.turnId,
      position: turn.position,
      user: { text: turn.text, caller: turn.caller, receivedAtMs: turn.receivedAtMs },
      status: turn.reply.status,
      ...(turn.reply.reply === undefined ? {} : { reply: turn.reply.reply }),
      ...(turn.reply.approval === undefined ? {} : { approval: turn.reply.approval }),
      ...(turn.reply.question === undefined ? {} : { question: turn.reply.question }),
    }));
    return Promise.resolve({
      conversationId,
      turns,
      head: this.journal.head(conversation.partition),
    });
  }

  onTextDelta(conversationId: string, listener: (delta: TextDeltaEvent) => void): () => void {
    let set = this.listeners.get(conversationId);
    if (set === undefined) {
      set = new Set();
      this.listeners.set(conversationId, set);
    }
    set.add(listener);
    return () => {
      set.delete(listener);
    };
  }

  private enter(method: string, caller: Caller, signal?: AbortSignal): void {
    this.calls.push({ method, caller: caller.identity });
    const failure = this.nextFailure;
    if (failure !== undefined) {
      this.nextFailure = undefined;
      throw failure;
    }
    if (signal?.aborted === true) throw new AppError('cancelled', 'the request was cancelled');
  }

  private stored(id: string): StoredConversation {
    const conversation = this.conversations.get(id);
    if (conversation === undefined) {
      throw new AppError('not_found', `conversation ${id} does not exist`, {
        details: { conversation: id },
      });
    }
    return conversation;
  }

  private visible(caller: Caller, id: string): StoredConversation {
    const conversation = this.stored(id);
    const mayAccess =
      caller.identities.includes(conversation.owner) || caller.roles.includes('admin');
    if (!mayAccess) {
      throw new AppError(
        'permission_denied',
        `conversation ${id} is private to its owner; ask the owner or an admin`,
        { details: { conversation: id } },
      );
    }
    return conversation;
  }

  private summaryOf(conversation: StoredConversation): ConversationSummary {
    const paused = conversation.turns.find((turn) => turn.pending !== undefined);
    return {
      conversationId: conversation.id,
      namespace: 'default',
      name: `chat-${conversation.id.slice(-4)}`,
      partition: conversation.partition,
      phase:
        paused === undefined
          ? 'Ready'
          : paused.pending?.kind === 'approval'
            ? 'AwaitingApproval'
            : 'AwaitingAnswer',
      ready: true,
      owner: conversation.owner,
      visibility: 'private',
      ...(paused === undefined ? {} : { currentTurn: paused.turnId }),
    };
  }

  private pendingTurn(
    conversation: StoredConversation,
    requestId: string,
    kind: 'approval' | 'question',
  ): StoredTurn {
    const turn = conversation.turns.find((t) => t.requestIds.includes(requestId));
    if (turn === undefined || turn.pending?.kind !== kind) {
      if (turn !== undefined && turn.pending === undefined) {
        throw new AppError('failed_precondition', `request ${requestId} was already answered`);
      }
      throw new AppError('not_found', `no ${kind} request ${requestId} in ${conversation.id}`);
    }
    return turn;
  }

  private runMessage(caller: Caller, request: PostMessage): Promise<TurnReply> {
    const conversation = this.visible(caller, request.conversationId);
    const earlier = conversation.turns.find((t) => t.idempotencyKey === request.idempotencyKey);
    if (earlier !== undefined) {
      if (earlier.text !== request.text) {
        throw new AppError(
          'conflict',
          `idempotency key ${request.idempotencyKey} was used with another message; use a new key`,
        );
      }
      return Promise.resolve(earlier.reply);
    }
    const waiting = conversation.turns.find((t) => t.pending !== undefined);
    if (waiting !== undefined) {
      throw new AppError(
        'failed_precondition',
        `turn ${waiting.turnId} awaits an answer; answer it before posting`,
      );
    }
    this.turnCount += 1;
    const turnId = `turn-${String(this.turnCount)}`;
    const receivedAtMs = this.now();
    const attribution = { caller: caller.identity, participants: [], persona: caller.personaId };
    const batchOne: NewJournalEvent[] = [
      event(EventKind.MessageReceived, {
        turnId,
        idempotencyKey: request.idempotencyKey,
        text: request.text,
        attribution,
        receivedAtMs,
      }),
    ];
    if (request.directive !== undefined) {
      batchOne.push(
        event(EventKind.IngressDirective, {
          turnId,
          maxSteps: request.directive.maxSteps ?? 0,
          requiredApprover: request.directive.requiredApprover ?? '',
        }),
      );
    }
    const position = this.journal.head(conversation.partition);
    batchOne.push(
      event(EventKind.TurnDispatched, {
        turnId,
        attempt: 1,
        leaseHolder: 'in-memory',
        fencingToken: 1,
        attribution,
        dispatchedAtMs: receivedAtMs,
        messagePosition: position,
      }),
    );
    this.append(conversation, batchOne);
    const turn: StoredTurn = {
      turnId,
      idempotencyKey: request.idempotencyKey,
      text: request.text,
      caller: caller.identity,
      receivedAtMs,
      position,
      requestIds: [],
      reply: { conversationId: conversation.id, turnId, status: 'complete', requestedAt: position },
    };
    conversation.turns.push(turn);

    if (request.text.startsWith('/approve ')) {
      const args = { to: request.text.slice('/approve '.length) };
      const argsJson = canonicalJson(args);
      const card: ApprovalCard = {
        requestId: `${turnId}-approval`,
        toolCallId: `${turnId}-call`,
        toolName: 'send_email',
        args,
        argsSha256: Buffer.from(approvalArgsSha256(argsJson)).toString('hex'),
        reason: 'send_email has side effects',
        requiredApprover: request.directive?.requiredApprover ?? '',
      };
      this.append(conversation, [
        event(EventKind.ApprovalRequest, {
          turnId,
          requestId: card.requestId,
          toolCallId: card.toolCallId,
          toolName: card.toolName,
          argsJson,
          argsSha256: Buffer.from(card.argsSha256, 'hex'),
          reason: card.reason,
          requiredApprover: card.requiredApprover,
        }),
      ]);
      turn.pending = { kind: 'approval', card };
      turn.requestIds.push(card.requestId);
      turn.reply = { ...turn.reply, status: 'paused', approval: card };
      return Promise.resolve(turn.reply);
    }
    if (request.text.startsWith('/ask ')) {
      const card: QuestionCard = {
        requestId: `${turnId}-question`,
        question: request.text.slice('/ask '.length),
      };
      this.append(conversation, [
        event(EventKind.QuestionRequest, {
          turnId,
          requestId: card.requestId,
          toolCallId: `${turnId}-call`,
          question: card.question,
        }),
      ]);
      turn.pending = { kind: 'question', card };
      turn.requestIds.push(card.requestId);
      turn.reply = { ...turn.reply, status: 'paused', question: card };
      return Promise.resolve(turn.reply);
    }
    const text = `echo: ${request.text}`;
    const half = Math.ceil(text.length / 2);
    for (const [step, part] of [text.slice(0, half), text.slice(half)].entries()) {
      this.sendDelta(conversation.id, { turnId, step: step + 1, text: part });
    }
    return Promise.resolve(this.complete(conversation, turn, text));
  }

  private complete(conversation: StoredConversation, turn: StoredTurn, text: string): TurnReply {
    this.append(conversation, [
      event(EventKind.TurnComplete, {
        turnId: turn.turnId,
        text,
        steps: 1,
        completedAtMs: this.now(),
        fallback: false,
      }),
    ]);
    delete turn.pending;
    turn.reply = {
      conversationId: conversation.id,
      turnId: turn.turnId,
      status: 'complete',
      reply: text,
      requestedAt: turn.position,
    };
    return turn.reply;
  }

  /** Appends a batch sealed by a signed_root, as the state plane does. */
  private append(conversation: StoredConversation, events: NewJournalEvent[]): void {
    const leafCount = this.journal.head(conversation.partition) + events.length;
    this.journal.append(conversation.partition, [
      ...events,
      event(EventKind.SignedRoot, {
        leafCount,
        root: Buffer.alloc(32, leafCount % 256),
        keyId: 'in-memory',
        signature: Buffer.alloc(64),
      }),
    ]);
  }
}

function event<K extends EventKind>(kind: K, payload: EventPayloads[K]): NewJournalEvent {
  return { kind, payload: encodePayload(kind, payload) };
}
