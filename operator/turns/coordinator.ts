/**
 * The turn coordinator (DESIGN.md, "One turn, end to end"): joins the conversation's lease,
 * its journal on the state plane and its harness pod.
 *
 * For each message: claim (per-conversation lock in this replica + the conversation's
 * Lease across replicas, fencing token recorded) → recover first (the oldest orphaned
 * dispatch is run again under its original turn id) → batch one (`message_received`,
 * `ingress_directive`, `turn_dispatched`, sealed by the state plane's `signed_root`)
 * against the exact head observed → the harness runs the loop, each step committed before
 * it is acknowledged → batch two (`turn_complete`, or a pause, a handoff, or
 * `turn_ambiguous`) under the same turn id. The journal is the only truth: a view of it is
 * cached per conversation and rebuilt from the state plane whenever an append conflicts.
 */
import type { Logger } from 'pino';
import { randomUUID } from 'node:crypto';
import { approvalArgsSha256 } from '../../common/approval-bytes';
import { AppError, isAppError } from '../../common/errors';
import {
  EventKind,
  payloadCodecs,
  type EventKind as Kind,
  type EventPayloads,
} from '../../common/event-kinds';
import {
  JournalConflictError,
  type AppendOutcome,
  type NewJournalEvent,
  type StateClient,
} from '../../common/state-client';
import {
  ApprovalDecision as ProtoDecision,
  ToolEffect,
  type Attribution,
} from '../../proto/gen/polychrome/events/v1/events';
import {
  ToolHost,
  type Step,
  type ToolSpec,
  type TurnResult,
  type TurnStart,
} from '../../proto/gen/polychrome/harness/v1/harness';
import {
  ConversationPhase,
  DEFAULT_MAX_STEPS,
  Visibility,
  type Conversation,
} from '../api/v1alpha1';
import type { ConversationLeases, LeaseHandle } from '../lease/conversation-leases';
import { isLeaseHandle } from '../lease/conversation-leases';
import type { ApprovalSigner } from './approval-signer';
import type { ConversationAccess } from './conversation-access';
import type { HarnessConnector } from './harness-client';
import {
  applyEntries,
  committedHistory,
  emptyView,
  nextAttempt,
  oldestOrphan,
  pendingRequest,
  pendingTurn,
  recordedSteps,
  transcriptTurns,
  turnReplyOf,
  turnState,
  type JournalView,
  type TurnView,
} from './journal-view';
import { turnIdFor } from './turn-ids';
import { applyTurnStatus, type JournalMark, type TurnStatusChange } from './turn-status';
import type {
  AnswerApproval,
  AnswerQuestion,
  Caller,
  ConversationSummary,
  NewConversation,
  PostMessage,
  TextDeltaEvent,
  Transcript,
  TurnReply,
  TurnService,
} from './turn-service';

/** Reserved tools the harness handles itself (harness/turn/reserved-tools.ts). */
const ASK_USER_TOOL = '__ask_user';
const HANDOFF_TOOL = '__handoff_to';

/** The reply when a turn cannot be settled any other way. */
export const FAILED_TURN_TEXT =
  'Sorry, I could not finish that. Please try again or rephrase your message.';

export interface TurnCoordinatorOptions {
  readonly state: StateClient;
  readonly harness: HarnessConnector;
  readonly leases: ConversationLeases;
  readonly conversations: ConversationAccess;
  readonly approvals: ApprovalSigner;
  /** This replica (lease holder identity). */
  readonly identity: string;
  readonly logger: Logger;
  /** How long a turn waits for the sandbox (e.g. after a reopen). @default 120000 */
  readonly sandboxWaitMs?: number;
  /** Dispatch attempts of one turn before it is settled with the fallback. @default 3 */
  readonly maxAttempts?: number;
  /** Steps per turn set by the deployment (the harness applies its own too). */
  readonly deploymentMaxSteps?: number;
  readonly nowMs?: () => number;
  /**
   * How long the running mark of a turn on a Ready conversation waits before it is
   * written, so a turn settled by then costs one status write. @default 250
   */
  readonly statusDelayMs?: number;
  /**
   * Least time between two status writes of one conversation: changes that come meanwhile
   * are merged into the next write (a quarantine is never merged away), so a busy
   * conversation costs the API server about one write per interval, not two per turn.
   * A change that reopens a conversation, and shutdown, cut the wait short. @default 1000
   */
  readonly statusIntervalMs?: number;
  /** Journal views kept in memory (conversations). @default 1000 */
  readonly viewCacheSize?: number;
}

/** What the metrics see of each turn. */
export interface TurnObserver {
  onTurn?(outcome: string, seconds: number): void;
  onCommit?(seconds: number): void;
  onStatusWrite?(result: 'ok' | 'failed'): void;
}

const HARNESS_BUSY_RETRIES = 20;

/** One status change to write. */
interface StatusWork {
  readonly change: TurnStatusChange;
  readonly journal?: JournalMark;
}

/** `next` replacing `last` in the queue: the newest state, with the older turn time kept. */
function merged(last: StatusWork, next: StatusWork): StatusWork {
  const lastTurnTime = next.change.lastTurnTime ?? last.change.lastTurnTime;
  const journal = next.journal ?? last.journal;
  return {
    change: lastTurnTime === undefined ? next.change : { ...next.change, lastTurnTime },
    ...(journal === undefined ? {} : { journal }),
  };
}

/** A conversation's status writes: the one running (`done`) and the ones waiting. */
interface StatusWrites {
  done: Promise<void>;
  readonly waiting: StatusWork[];
  /** Ends the spacing wait early (an urgent change, shutdown). */
  wake: () => void;
}

export class TurnCoordinator implements TurnService {
  private readonly views = new Map<string, JournalView>();
  /**
   * The lease under which each conversation's cached view was last brought in line with
   * the journal. While this replica holds that same lease without a break, every append
   * to the journal is its own (and updates the view), so a turn can start from the cached
   * view without reading the journal again. Any other writer would need the lease; a
   * stale one that writes anyway is caught by the compare-and-swap on the head.
   */
  private readonly syncedUnder = new Map<string, LeaseHandle>();
  private readonly locks = new Map<string, Promise<unknown>>();
  private readonly deltas = new Map<string, Set<(delta: TextDeltaEvent) => void>>();
  private readonly stopping = new AbortController();
  /** Per conversation: the status writes running and waiting behind them. */
  private readonly statusWrites = new Map<string, StatusWrites>();
  private readonly now: () => number;
  observer: TurnObserver = {};

  constructor(private readonly options: TurnCoordinatorOptions) {
    this.now = options.nowMs ?? Date.now;
  }

  /** Stops taking turns; running harness calls are cancelled (their turns stay recoverable). */
  async close(timeoutMs = 5_000): Promise<void> {
    this.stopping.abort(new AppError('unavailable', 'the control plane is shutting down'));
    // Status writes still queued are worth finishing: they are what kubectl shows.
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      Promise.allSettled([...this.statusWrites.values()].map((w) => w.done)),
      new Promise((resolve) => {
        timer = setTimeout(resolve, timeoutMs);
      }),
    ]);
    clearTimeout(timer);
  }

  // ---- TurnService ----

  async createConversation(
    caller: Caller,
    request: NewConversation,
    signal: AbortSignal,
  ): Promise<{ summary: ConversationSummary; turn?: TurnReply }> {
    const created = await this.options.conversations.create(caller.identity, signal);
    const summary = summaryOf(created);
    if (request.message === undefined) return { summary };
    const turn = await this.postMessage(
      caller,
      { ...request.message, conversationId: summary.conversationId },
      signal,
    );
    return { summary, turn };
  }

  conversation(caller: Caller, conversationId: string): Promise<ConversationSummary> {
    return Promise.resolve(summaryOf(this.authorized(caller, conversationId)));
  }

  async transcript(
    caller: Caller,
    conversationId: string,
    signal: AbortSignal,
  ): Promise<Transcript> {
    const conversation = this.authorized(caller, conversationId);
    const view = await this.refresh(conversation, signal);
    return { conversationId, turns: transcriptTurns(view), head: view.head };
  }

  onTextDelta(conversationId: string, listener: (delta: TextDeltaEvent) => void): () => void {
    let set = this.deltas.get(conversationId);
    if (set === undefined) {
      set = new Set();
      this.deltas.set(conversationId, set);
    }
    set.add(listener);
    return () => {
      set.delete(listener);
      if (set.size === 0) this.deltas.delete(conversationId);
    };
  }

  async postMessage(caller: Caller, request: PostMessage, signal: AbortSignal): Promise<TurnReply> {
    const conversation = this.authorized(caller, request.conversationId);
    if (conversation.metadata.deletionTimestamp !== undefined) {
      throw new AppError(
        'failed_precondition',
        `conversation ${request.conversationId} is being deleted and takes no new turn`,
      );
    }
    const turnId = turnIdFor(request.conversationId, request.idempotencyKey);
    return this.exclusive(conversation, signal, async (lease) => {
      // The cache may have moved while this caller waited for the lock.
      const current = this.fresh(conversation);
      let view = await this.inSync(current, lease, signal);
      const existing = view.turnsById.get(turnId);
      if (existing !== undefined) return this.rejoin(current, lease, existing, request.text);
      // Recover first: an orphaned dispatch runs again before any new turn.
      view = await this.recoverOrphans(current, lease);
      const pending = pendingTurn(view);
      if (pending !== undefined) {
        const state = turnState(pending);
        throw new AppError(
          'conflict',
          `turn ${pending.turnId} waits for ${state === 'awaiting_approval' ? 'an approval' : 'an answer'}; answer it before sending a new message`,
          { details: { turnId: pending.turnId, conversationId: request.conversationId } },
        );
      }
      const attribution = this.attribution(caller, current);
      const nowMs = this.now();
      const events: NewJournalEvent[] = [
        event(EventKind.MessageReceived, {
          turnId,
          idempotencyKey: request.idempotencyKey,
          text: request.text,
          attribution,
          receivedAtMs: nowMs,
        }),
      ];
      const directive = request.directive;
      if (
        directive !== undefined &&
        (directive.maxSteps !== undefined || directive.requiredApprover !== undefined)
      ) {
        events.push(
          event(EventKind.IngressDirective, {
            turnId,
            maxSteps: directive.maxSteps ?? 0,
            requiredApprover: directive.requiredApprover ?? '',
          }),
        );
      }
      if (current.status?.phase === ConversationPhase.Closed) {
        events.push(event(EventKind.ConversationReopened, { reopenedAtMs: nowMs, attribution }));
      }
      events.push(
        event(EventKind.TurnDispatched, {
          turnId,
          attempt: 1,
          leaseHolder: lease.holder,
          fencingToken: lease.fencingToken,
          attribution,
          dispatchedAtMs: nowMs,
          messagePosition: view.head,
        }),
      );
      // Batch one: if it fails, the dispatch is rejected and the harness never runs.
      await this.append(current, events);
      return this.drive(current, lease, turnId);
    });
  }

  async answerApproval(
    caller: Caller,
    request: AnswerApproval,
    signal: AbortSignal,
  ): Promise<TurnReply> {
    const conversation = this.authorized(caller, request.conversationId);
    return this.exclusive(conversation, signal, async (lease) => {
      const view = await this.inSync(conversation, lease, signal);
      const turn = findRequest(view, request.requestId, 'approval');
      const pending = pendingRequest(turn);
      if (pending?.type !== 'approval' || pending.request.requestId !== request.requestId) {
        throw notPending(turn, request.requestId, 'approval');
      }
      const asked = pending.request;
      const required = asked.requiredApprover || (turn.directive?.requiredApprover ?? '');
      if (
        required !== '' ? !caller.identities.includes(required) : !caller.roles.includes('admin')
      ) {
        throw new AppError(
          'permission_denied',
          required !== ''
            ? `approval ${request.requestId} must be answered by ${required}`
            : `approval ${request.requestId} must be answered by an admin`,
        );
      }
      const decision = request.decision === 'approve' ? 'approved' : 'denied';
      const argsSha256 = approvalArgsSha256(asked.argsJson);
      const signature = this.options.approvals.sign({
        requestId: request.requestId,
        toolName: asked.toolName,
        argsSha256,
        decision,
        turnId: turn.turnId,
      });
      const nowMs = this.now();
      await this.append(conversation, [
        event(EventKind.ApprovalResponse, {
          turnId: turn.turnId,
          requestId: request.requestId,
          toolName: asked.toolName,
          argsSha256: Buffer.from(argsSha256),
          decision:
            decision === 'approved'
              ? ProtoDecision.APPROVAL_DECISION_APPROVED
              : ProtoDecision.APPROVAL_DECISION_DENIED,
          answeredBy: caller.identity,
          keyId: this.options.approvals.keyId,
          signature: Buffer.from(signature),
          answeredAtMs: nowMs,
          comment: request.comment ?? '',
        }),
        this.dispatchEvent(turn, lease, this.attribution(caller, conversation), nowMs),
      ]);
      return this.drive(conversation, lease, turn.turnId);
    });
  }

  async answerQuestion(
    caller: Caller,
    request: AnswerQuestion,
    signal: AbortSignal,
  ): Promise<TurnReply> {
    const conversation = this.authorized(caller, request.conversationId);
    return this.exclusive(conversation, signal, async (lease) => {
      const view = await this.inSync(conversation, lease, signal);
      const turn = findRequest(view, request.requestId, 'question');
      const pending = pendingRequest(turn);
      if (pending?.type !== 'question' || pending.request.requestId !== request.requestId) {
        throw notPending(turn, request.requestId, 'question');
      }
      const nowMs = this.now();
      await this.append(conversation, [
        event(EventKind.QuestionResponse, {
          turnId: turn.turnId,
          requestId: request.requestId,
          answer: request.answer,
          answeredBy: caller.identity,
          answeredAtMs: nowMs,
        }),
        this.dispatchEvent(turn, lease, this.attribution(caller, conversation), nowMs),
      ]);
      return this.drive(conversation, lease, turn.turnId);
    });
  }

  // ---- claim ----

  /** Runs `work` holding this replica's lock and the conversation's lease. */
  private async exclusive<T>(
    conversation: Conversation,
    signal: AbortSignal,
    work: (lease: LeaseHandle) => Promise<T>,
  ): Promise<T> {
    const uid = conversation.metadata.uid ?? '';
    const previous = this.locks.get(uid) ?? Promise.resolve();
    let release = (): void => undefined;
    const mine = new Promise<void>((resolve) => {
      release = resolve;
    });
    const chained = previous.then(() => mine);
    this.locks.set(uid, chained);
    try {
      await waitOrAbort(previous, signal);
      if (this.stopping.signal.aborted) throw shuttingDown();
      const lease = await this.options.leases.tryAcquire({
        namespace: conversation.metadata.namespace ?? '',
        name: conversation.metadata.name ?? '',
        uid,
      });
      if (!isLeaseHandle(lease)) {
        // forwardTo names the holder; the API finds its Pod in the control plane's own
        // namespace, never in anything the Lease's namespace can write.
        throw new AppError(
          'unavailable',
          `replica ${lease.holder} holds conversation ${uid}; retry (the same idempotency key is safe)`,
          {
            details: {
              holder: lease.holder,
              retryAfterMs: Math.max(0, lease.retryAtMs - this.now()),
              forwardTo: lease.holder,
            },
          },
        );
      }
      return await work(lease);
    } finally {
      release();
      if (this.locks.get(uid) === chained) this.locks.delete(uid);
    }
  }

  // ---- journal ----

  private partition(conversation: Conversation): string {
    return `conv-${conversation.metadata.uid ?? ''}`;
  }

  /** The cached view brought up to the journal's head. */
  private async refresh(conversation: Conversation, signal?: AbortSignal): Promise<JournalView> {
    const uid = conversation.metadata.uid ?? '';
    let view = this.views.get(uid) ?? emptyView();
    const entries = [];
    for await (const entry of this.options.state.read(this.partition(conversation), view.head, 0, {
      ...(signal === undefined ? {} : { signal }),
    })) {
      entries.push(entry);
    }
    view = applyEntries(view, entries);
    // A read outside the conversation's lock (a transcript) must not replace a newer view
    // that a turn's append stored meanwhile.
    const cached = this.views.get(uid);
    if (cached === undefined || view.head >= cached.head) this.cacheView(uid, view);
    return view;
  }

  /**
   * The view a claimed turn starts from: the cached one when it was last brought in line
   * under `lease` and the lease has not been lost since (see {@link syncedUnder}), else
   * the view refreshed from the journal.
   */
  private async inSync(
    conversation: Conversation,
    lease: LeaseHandle,
    signal: AbortSignal,
  ): Promise<JournalView> {
    const uid = conversation.metadata.uid ?? '';
    const cached = this.views.get(uid);
    if (cached !== undefined && this.syncedUnder.get(uid) === lease && !lease.signal.aborted) {
      return cached;
    }
    const view = await this.refresh(conversation, signal);
    // From here on every append is this holder's and keeps the view in line (a failed
    // one drops it, and this mark with it).
    this.syncedUnder.set(uid, lease);
    return view;
  }

  /**
   * Appends one batch at the cached head. A conflict drops the cache (another writer moved
   * the head: a stale holder's batch must never land) and is rethrown.
   */
  private async append(
    conversation: Conversation,
    events: NewJournalEvent[],
  ): Promise<AppendOutcome> {
    const uid = conversation.metadata.uid ?? '';
    const view = this.views.get(uid) ?? (await this.refresh(conversation));
    const started = performance.now();
    let outcome: AppendOutcome;
    try {
      outcome = await this.options.state.append(this.partition(conversation), view.head, events);
    } catch (error) {
      this.views.delete(uid);
      this.syncedUnder.delete(uid);
      if (error instanceof JournalConflictError) {
        throw new AppError(
          'conflict',
          `the journal of conversation ${uid} moved under this replica (another writer); retry`,
          { cause: error },
        );
      }
      throw error;
    } finally {
      this.observer.onCommit?.((performance.now() - started) / 1000);
    }
    let position = outcome.firstPosition;
    const written = events.map((e) => ({ position: position++, kind: e.kind, payload: e.payload }));
    const seal = payloadCodecs.signed_root
      .encode({
        leafCount: outcome.signedRoot.leafCount,
        root: Buffer.from(outcome.signedRoot.root),
        keyId: outcome.signedRoot.keyId,
        signature: Buffer.from(outcome.signedRoot.signature),
      })
      .finish();
    const next = applyEntries(view, [
      ...written,
      { position, kind: EventKind.SignedRoot, payload: seal },
    ]);
    this.cacheView(uid, next);
    return outcome;
  }

  /**
   * Keeps the view, most recently used last; beyond the bound the least recently used
   * view of a conversation without a turn in this replica is dropped (rebuilt on demand).
   */
  private cacheView(uid: string, view: JournalView): void {
    this.views.delete(uid);
    this.views.set(uid, view);
    const bound = this.options.viewCacheSize ?? 1_000;
    if (this.views.size <= bound) return;
    for (const key of this.views.keys()) {
      if (this.views.size <= bound) break;
      if (!this.locks.has(key)) {
        this.views.delete(key);
        this.syncedUnder.delete(key);
      }
    }
  }

  // ---- turns ----

  /** An exact retry: the same turn's result, or the turn run again if it is an orphan. */
  private async rejoin(
    conversation: Conversation,
    lease: LeaseHandle,
    turn: TurnView,
    text: string,
  ): Promise<TurnReply> {
    if (turn.text !== text) {
      throw new AppError(
        'conflict',
        `idempotency key ${turn.idempotencyKey} was used for another message (turn ${turn.turnId}); use a new key for a new message`,
        { details: { turnId: turn.turnId } },
      );
    }
    if (turnState(turn) === 'orphan') {
      await this.recoverOrphans(conversation, lease, turn.turnId);
    }
    const view = this.views.get(conversation.metadata.uid ?? '');
    const current = view?.turnsById.get(turn.turnId) ?? turn;
    return this.replyOf(conversation, current);
  }

  /**
   * Runs orphaned dispatches again, oldest first, under their original ids, until none is
   * left (or `until` is settled). Returns the view after.
   */
  private async recoverOrphans(
    conversation: Conversation,
    lease: LeaseHandle,
    until?: string,
  ): Promise<JournalView> {
    const uid = conversation.metadata.uid ?? '';
    for (;;) {
      const view = this.views.get(uid) ?? (await this.refresh(conversation));
      const orphan = oldestOrphan(view);
      if (orphan === undefined) return view;
      this.options.logger.info(
        { conversation: uid, turn: orphan.turnId, attempt: nextAttempt(orphan) },
        'recovering an orphaned dispatch',
      );
      await this.append(conversation, [
        this.dispatchEvent(orphan, lease, orphan.attribution, this.now()),
      ]);
      await this.drive(conversation, lease, orphan.turnId);
      if (orphan.turnId === until) return this.views.get(uid) ?? (await this.refresh(conversation));
    }
  }

  private dispatchEvent(
    turn: TurnView,
    lease: LeaseHandle,
    attribution: Attribution | undefined,
    nowMs: number,
  ): NewJournalEvent {
    return event(EventKind.TurnDispatched, {
      turnId: turn.turnId,
      attempt: nextAttempt(turn),
      leaseHolder: lease.holder,
      fencingToken: lease.fencingToken,
      ...(attribution === undefined ? {} : { attribution }),
      dispatchedAtMs: nowMs,
      messagePosition: turn.messagePosition,
    });
  }

  /**
   * Runs the dispatched turn on the harness and commits batch two. The turn's latest
   * `turn_dispatched` is already durable. A failure that leaves the turn unsettled (the
   * harness unreachable, the lease lost) leaves an orphan for recovery and is rethrown.
   */
  private async drive(
    claimed: Conversation,
    lease: LeaseHandle,
    turnId: string,
  ): Promise<TurnReply> {
    const conversation = this.fresh(claimed);
    const uid = conversation.metadata.uid ?? '';
    const started = performance.now();
    const log = this.options.logger.child({ conversation: uid, turn: turnId });
    const turnAt = (): TurnView => {
      const turn = this.views.get(uid)?.turnsById.get(turnId);
      if (turn === undefined)
        throw new AppError('internal', `turn ${turnId} vanished from the view`);
      return turn;
    };
    const turn = turnAt();
    const attempt = turn.dispatches.at(-1)?.attempt ?? 1;
    // A conversation that is not Ready (closed, or its pod not up) needs lastTurnTime now:
    // it is what reopens it. Otherwise the running mark may wait a moment, so a fast turn
    // costs one status write instead of two.
    const ready =
      conversation.status?.conditions?.find((c) => c.type === 'Ready')?.status === 'True';
    this.queueStatus(
      conversation,
      { kind: 'running', turnId, lastTurnTime: new Date(this.now()).toISOString() },
      undefined,
      ready ? (this.options.statusDelayMs ?? 250) : 0,
    );
    const signal = AbortSignal.any([lease.signal, this.stopping.signal]);
    let result: TurnResult | undefined;
    let end: Awaited<ReturnType<HarnessConnector['runTurn']>>;
    try {
      const endpoint = await this.options.conversations.waitForSandbox(
        uid,
        this.options.sandboxWaitMs ?? 120_000,
        signal,
      );
      const start = this.turnStart(conversation, turnAt(), attempt);
      end = await this.runOnHarness(endpoint, start, conversation, turnId, signal);
    } catch (error) {
      if (attempt >= (this.options.maxAttempts ?? 3) && !signal.aborted && retryable(error)) {
        log.warn({ err: error, attempt }, 'turn failed on its last attempt; settling it');
        result = settleFailed(turnAt(), error);
        end = { kind: 'result', result, carried: [] };
      } else {
        this.observer.onTurn?.('orphaned', (performance.now() - started) / 1000);
        log.warn({ err: error, attempt }, 'turn left unsettled; it is recovered on the next claim');
        // A cancellation of ours is not the caller's doing: say why and that a retry is safe.
        if (this.stopping.signal.aborted) {
          throw new AppError(
            'unavailable',
            `this control plane replica shut down during turn ${turnId}; retry with the same idempotency key and another replica resumes it`,
            { cause: error, details: { turnId } },
          );
        }
        if (lease.signal.aborted) {
          throw new AppError(
            'unavailable',
            `this replica lost the lease of conversation ${uid} during turn ${turnId}; retry with the same idempotency key`,
            { cause: error, details: { turnId } },
          );
        }
        throw error;
      }
    }
    const batch = this.batchTwo(turnId, end, attempt, turnAt());
    if (batch === undefined) {
      // Retryable failure reported by the harness: the turn stays an orphan.
      this.observer.onTurn?.('orphaned', (performance.now() - started) / 1000);
      const failed =
        end.kind === 'result' && end.result.outcome?.$case === 'failed'
          ? end.result.outcome.value
          : undefined;
      throw new AppError(
        'unavailable',
        `turn ${turnId} did not finish (${failed?.message ?? 'the harness gave up'}); post again with the same idempotency key to retry it`,
        { details: { turnId } },
      );
    }
    const outcome = await this.append(conversation, batch.events);
    const settled = turnAt();
    this.queueStatus(conversation, batch.status, {
      head: outcome.head,
      lastSignedRoot: Buffer.from(outcome.signedRoot.root).toString('hex'),
      keyId: outcome.signedRoot.keyId,
    });
    this.observer.onTurn?.(batch.status.kind, (performance.now() - started) / 1000);
    log.info({ outcome: batch.status.kind, attempt }, 'turn settled');
    return this.replyOf(conversation, settled);
  }

  /** Calls the harness, retrying while it still finishes a previous call. */
  private async runOnHarness(
    endpoint: string,
    start: TurnStart,
    conversation: Conversation,
    turnId: string,
    signal: AbortSignal,
  ): Promise<Awaited<ReturnType<HarnessConnector['runTurn']>>> {
    const uid = conversation.metadata.uid ?? '';
    for (let busy = 0; ; busy += 1) {
      try {
        return await this.options.harness.runTurn(
          endpoint,
          start,
          {
            onDelta: (delta) => {
              for (const listener of this.deltas.get(uid) ?? []) {
                listener({ turnId, step: delta.step, text: delta.text });
              }
            },
            commitStep: async (step) => {
              const outcome = await this.append(conversation, [stepEvent(step)]);
              return outcome.firstPosition;
            },
            trustedTool: (call) =>
              Promise.resolve({
                toolCallId: call.toolCallId,
                content: `tool ${call.toolName} runs on the control plane, and none is configured here`,
                isError: true,
                outcomeUnknownReason: '',
              }),
          },
          { signal, traceparent: traceparent() },
        );
      } catch (error) {
        if (
          isAppError(error) &&
          error.code === 'failed_precondition' &&
          busy < HARNESS_BUSY_RETRIES
        ) {
          // The harness still finishes a cancelled call of an earlier attempt.
          await new Promise((resolve) => setTimeout(resolve, 250));
          continue;
        }
        throw error;
      }
    }
  }

  private turnStart(conversation: Conversation, turn: TurnView, attempt: number): TurnStart {
    const view = this.views.get(conversation.metadata.uid ?? '');
    const spec = conversation.spec;
    const rules = new Set(spec.tools?.requireApproval ?? []);
    // Built-in and reserved tools by reference (the harness holds their definitions):
    // the agent may always ask the user; it may hand off only where targets are set.
    const names = [
      ...(spec.tools?.builtin ?? []),
      ASK_USER_TOOL,
      ...((spec.agent?.handoffTargets ?? []).length > 0 ? [HANDOFF_TOOL] : []),
    ];
    const tools: ToolSpec[] = names.map((name) => ({
      name,
      description: '',
      inputSchemaJson: '',
      effect: 0,
      needsApproval: rules.has(name),
      approvalReason: '',
      host: ToolHost.TOOL_HOST_HARNESS,
    }));
    return {
      conversationId: conversation.metadata.uid ?? '',
      turnId: turn.turnId,
      attempt,
      agent: {
        model: spec.agent?.model ?? '',
        systemPrompt: spec.agent?.systemPrompt ?? '',
      },
      history: view === undefined ? [] : committedHistory(view, turn.turnId),
      userMessage: turn.text,
      budget: {
        deploymentMaxSteps: this.options.deploymentMaxSteps ?? 0,
        conversationMaxSteps: spec.agent?.maxSteps ?? DEFAULT_MAX_STEPS,
        directiveMaxSteps: turn.directive?.maxSteps ?? 0,
      },
      tools,
      approvalAnswers: turn.approvalResponses.map((r) => r.response),
      questionAnswers: turn.questionResponses.map((r) => r.response),
      recordedSteps: recordedSteps(turn),
      requiredApprover: turn.directive?.requiredApprover ?? '',
    };
  }

  /** Batch two for how the harness ended, or undefined when the turn stays an orphan. */
  private batchTwo(
    turnId: string,
    end: Awaited<ReturnType<HarnessConnector['runTurn']>>,
    attempt: number,
    turn: TurnView,
  ): { events: NewJournalEvent[]; status: TurnStatusChange } | undefined {
    if (end.kind === 'paused') {
      const request = end.paused.request;
      if (request?.$case === 'approvalRequest') {
        return {
          events: [event(EventKind.ApprovalRequest, request.value)],
          status: { kind: 'awaiting_approval', turnId, requestId: request.value.requestId },
        };
      }
      if (request?.$case === 'questionRequest') {
        return {
          events: [event(EventKind.QuestionRequest, request.value)],
          status: { kind: 'awaiting_answer', turnId, requestId: request.value.requestId },
        };
      }
      throw new AppError('internal', `the harness paused turn ${turnId} without a request`);
    }
    const outcome = end.result.outcome;
    switch (outcome?.$case) {
      case 'complete':
        // The reply that ended the turn comes first when the harness carried it here.
        return {
          events: [...end.carried.map(stepEvent), event(EventKind.TurnComplete, outcome.value)],
          status: { kind: 'settled', turnId },
        };
      case 'handoff':
        return {
          events: [event(EventKind.Handoff, outcome.value)],
          status: { kind: 'settled', turnId },
        };
      case 'ambiguous':
        return {
          events: [event(EventKind.TurnAmbiguous, outcome.value)],
          status: {
            kind: 'ambiguous',
            turnId,
            toolCallId: outcome.value.toolCallId,
            reason: outcome.value.reason,
          },
        };
      case 'failed':
        if (outcome.value.retryable && attempt < (this.options.maxAttempts ?? 3)) return undefined;
        return this.batchTwo(
          turnId,
          {
            kind: 'result',
            result: settleFailed(turn, new AppError('internal', outcome.value.message)),
            carried: [],
          },
          attempt,
          turn,
        );
      case 'cancelled':
      case undefined:
        return undefined;
    }
  }

  /**
   * Writes the turn's status off the turn's path: the journal is the truth and the status
   * a display, so a turn never waits for the API server. Writes of one conversation run in
   * order; while one runs, a waiting change is replaced by a newer one (it carries the
   * newest state) unless it is a quarantine, so a burst of turns costs few writes.
   */
  private queueStatus(
    conversation: Conversation,
    change: TurnStatusChange,
    journal?: JournalMark,
    delayMs = 0,
  ): void {
    const uid = conversation.metadata.uid ?? '';
    const work: StatusWork = { change, ...(journal === undefined ? {} : { journal }) };
    const queued = this.statusWrites.get(uid);
    if (queued !== undefined) {
      const last = queued.waiting.at(-1);
      // A quarantine must reach the status even if a newer turn follows at once.
      if (last !== undefined && last.change.kind !== 'ambiguous') {
        queued.waiting[queued.waiting.length - 1] = merged(last, work);
      } else {
        queued.waiting.push(work);
      }
      // No delay asked: the change is needed now (it reopens the conversation).
      if (delayMs === 0 && change.kind === 'running') queued.wake();
      return;
    }
    const entry: StatusWrites = { done: Promise.resolve(), waiting: [work], wake: () => {} };
    const wait = (ms: number): Promise<void> =>
      this.stopping.signal.aborted
        ? Promise.resolve()
        : new Promise((resolve) => {
            const timer = setTimeout(done, ms);
            const stop = this.stopping.signal;
            function done(): void {
              clearTimeout(timer);
              stop.removeEventListener('abort', done);
              resolve();
            }
            stop.addEventListener('abort', done, { once: true });
            entry.wake = done;
          });
    entry.done = (async () => {
      // A short wait lets a fast turn's settled change replace its running one: one write.
      if (delayMs > 0) await wait(delayMs);
      for (let next = entry.waiting.shift(); next !== undefined; next = entry.waiting.shift()) {
        await this.writeStatus(conversation, next.change, next.journal);
        // Changes that come during the spacing merge into the next write.
        await wait(this.options.statusIntervalMs ?? 1_000);
      }
      this.statusWrites.delete(uid);
    })();
    this.statusWrites.set(uid, entry);
  }

  private async writeStatus(
    conversation: Conversation,
    change: TurnStatusChange,
    journal?: Parameters<typeof applyTurnStatus>[3],
  ): Promise<void> {
    try {
      await this.options.conversations.updateStatus(conversation, (fresh) =>
        applyTurnStatus(
          fresh.status,
          fresh.metadata.generation ?? 0,
          change,
          journal,
          new Date(this.now()).toISOString(),
        ),
      );
      this.observer.onStatusWrite?.('ok');
    } catch (error) {
      this.observer.onStatusWrite?.('failed');
      // Status is a display; the journal is the truth. A failed write is logged, not fatal.
      this.options.logger.warn(
        { err: error, conversation: conversation.metadata.uid, change: change.kind },
        'could not write the turn status',
      );
    }
  }

  // ---- helpers ----

  private authorized(caller: Caller, conversationId: string): Conversation {
    const conversation = this.options.conversations.byUid(conversationId);
    if (conversation === undefined) {
      throw new AppError('not_found', `conversation ${conversationId} does not exist`, {
        details: { conversationId },
      });
    }
    if (caller.roles.includes('admin')) return conversation;
    const mine = (identity: string | undefined): boolean =>
      identity !== undefined && caller.identities.includes(identity);
    const spec = conversation.spec;
    if (mine(spec.owner)) return conversation;
    if (spec.visibility === Visibility.Shared && (spec.participants ?? []).some(mine)) {
      return conversation;
    }
    // Same answer as for a missing one would leak less, but a person needs to know why.
    throw new AppError(
      'permission_denied',
      `${caller.identity} may not use conversation ${conversationId}: it belongs to ${spec.owner ?? 'an admin'}${spec.visibility === Visibility.Shared ? ' and its participants' : ''}`,
      { details: { conversationId } },
    );
  }

  /** The newest cached copy of the conversation (its spec and status may have moved). */
  private fresh(conversation: Conversation): Conversation {
    return this.options.conversations.byUid(conversation.metadata.uid ?? '') ?? conversation;
  }

  private attribution(caller: Caller, conversation: Conversation): Attribution {
    const participants = new Set<string>();
    if (conversation.spec.owner !== undefined) participants.add(conversation.spec.owner);
    for (const p of conversation.spec.participants ?? []) participants.add(p);
    return {
      caller: caller.identity,
      participants: [...participants].sort(),
      persona: caller.personaId,
    };
  }

  private replyOf(conversation: Conversation, turn: TurnView): TurnReply {
    const reply = turnReplyOf(conversation.metadata.uid ?? '', turn);
    if (reply === undefined) {
      throw new AppError(
        'unavailable',
        `turn ${turn.turnId} has not settled; post again with the same idempotency key`,
        { details: { turnId: turn.turnId } },
      );
    }
    return reply;
  }
}

// ---- free functions ----

function event<K extends Kind>(kind: K, payload: Partial<EventPayloads[K]>): NewJournalEvent {
  const codec = payloadCodecs[kind];
  return { kind, payload: codec.encode(codec.fromPartial(payload)).finish() };
}

function stepEvent(step: Step): NewJournalEvent {
  switch (step.step?.$case) {
    case 'modelCall':
      return event(EventKind.ModelCall, step.step.value);
    case 'toolCall':
      return event(EventKind.ToolCall, step.step.value);
    case 'toolResult':
      return event(EventKind.ToolResult, step.step.value);
    case undefined:
      throw new AppError(
        'invalid_argument',
        `the harness sent step ${step.sequence} without content`,
      );
  }
}

function findRequest(
  view: JournalView,
  requestId: string,
  kind: 'approval' | 'question',
): TurnView {
  for (const turn of view.turns) {
    const requests = kind === 'approval' ? turn.approvalRequests : turn.questionRequests;
    if (requests.some((r) => r.request.requestId === requestId)) return turn;
  }
  throw new AppError('not_found', `no ${kind} ${requestId} in this conversation`, {
    details: { requestId },
  });
}

function notPending(turn: TurnView, requestId: string, kind: 'approval' | 'question'): AppError {
  return new AppError(
    'conflict',
    `${kind} ${requestId} is not waiting for an answer (turn ${turn.turnId} is ${turnState(turn)}); it was answered already`,
    { details: { turnId: turn.turnId, requestId } },
  );
}

function retryable(error: unknown): boolean {
  return (
    !isAppError(error) || ['unavailable', 'deadline_exceeded', 'internal'].includes(error.code)
  );
}

/** The settled result of a turn that cannot finish: ambiguous if a side effect is in doubt. */
function settleFailed(turn: TurnView, error: unknown): TurnResult {
  const steps = recordedSteps(turn);
  const last = steps.at(-1)?.step;
  if (last?.$case === 'toolCall' && last.value.effect === ToolEffect.TOOL_EFFECT_SIDE_EFFECT) {
    return {
      outcome: {
        $case: 'ambiguous',
        value: {
          turnId: turn.turnId,
          toolCallId: last.value.toolCallId,
          reason: `the turn could not be resumed after its side-effecting call ${last.value.toolName} was committed (${error instanceof Error ? error.message : String(error)})`,
          detectedAtMs: Date.now(),
        },
      },
    };
  }
  return {
    outcome: {
      $case: 'complete',
      value: {
        turnId: turn.turnId,
        text: FAILED_TURN_TEXT,
        steps: steps.filter((s) => s.step?.$case === 'modelCall').length,
        completedAtMs: Date.now(),
        fallback: true,
      },
    },
  };
}

function summaryOf(conversation: Conversation): ConversationSummary {
  const status = conversation.status;
  const ready = status?.conditions?.find((c) => c.type === 'Ready')?.status === 'True';
  return {
    conversationId: conversation.metadata.uid ?? '',
    namespace: conversation.metadata.namespace ?? '',
    name: conversation.metadata.name ?? '',
    partition: `conv-${conversation.metadata.uid ?? ''}`,
    phase: status?.phase ?? 'Pending',
    ready,
    owner: conversation.spec.owner ?? '',
    visibility: conversation.spec.visibility ?? Visibility.Private,
    ...(status?.currentTurn === undefined || status.currentTurn === ''
      ? {}
      : { currentTurn: status.currentTurn }),
  };
}

function shuttingDown(): AppError {
  return new AppError('unavailable', 'this replica is shutting down; retry on another');
}

async function waitOrAbort(promise: Promise<unknown>, signal: AbortSignal): Promise<void> {
  if (signal.aborted) throw new AppError('cancelled', 'the request was cancelled');
  await new Promise<void>((resolve, reject) => {
    const onAbort = (): void =>
      reject(
        new AppError('cancelled', 'the request was cancelled while it waited for the conversation'),
      );
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      () => {
        signal.removeEventListener('abort', onAbort);
        resolve();
      },
      () => {
        signal.removeEventListener('abort', onAbort);
        resolve();
      },
    );
  });
}

/** A fresh W3C traceparent for the harness call. */
function traceparent(): string {
  const hex = randomUUID().replaceAll('-', '');
  return `00-${hex}-${hex.slice(0, 16)}-01`;
}
