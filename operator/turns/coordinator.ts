/**
 * The turn coordinator (docs/turns.md): the thin shell around the turn plan
 * (the plan-*.ts files). It joins the conversation's lease (turn-claims.ts), its journal on the
 * state plane (journal-views.ts) and its harness pod (harness-client.ts): for each request
 * it claims the conversation, asks the plan what to do, commits the events the plan
 * returns, and runs the harness, committing each step the plan accepts before it is
 * acknowledged. Status is written off the turn's path (turn-status-writer.ts).
 *
 * This file is the request side: authorization, the claim, the plan's answer for each
 * request, and the expiry timers. What runs under the claimed lease once the plan has
 * decided (commits, the harness call, batch two, status) is turn-runner.ts.
 */
import { settledReplyOf } from './turn-projections';
import { AppError, isAppError } from '../../common/errors';
import { resolveRoster, type RecordedRoster } from './agent-roster';
import type { AgentDirectory } from '../controller/agent-resource-reads';
import type { Conversation } from '../api/v1alpha1/conversation-types';
import type { LeaseHandle } from '../lease/lease-source';
import type { TurnCoordinatorOptions } from './coordinator-options';
import { acceptRollback } from './accept-rollback';
import { readPaymentPolicy, setPaymentPolicy } from './payment-policy';
import type { CancelParts } from './cancel-request';
import { ExpiryTimers } from './expiry-timers';
import { conversationSummary, transcriptTurns } from './turn-projections';
import { JournalViews } from './journal-views';
import { clearMemory, readMemory } from './memory-service';
import { resolveTurn, type ResolveParts } from './resolve-turn';
import { resumeTurns, type ResumedTurn } from './resume-turns';
import { TurnClaims } from './turn-claims';
import { turnIdFor } from './turn-ids';
import { answerApproval, answerQuestion, type AnswerParts } from './answer-request';
import { DEFAULT_APPROVAL_TTL_MS } from './plan-expiry';
import { usableConversation } from './plan-access';
import { Role as CallerRole } from '../../common/persona-roles';
import { planMessage } from './plan-message';
import { DEFAULT_HISTORY_TOKENS } from '../api/v1alpha1/conversation-values';
import { TurnRunner } from './turn-runner';
import { summarizerFor, type Summarizer } from './summarizer';
import { JournalKeyRecorder } from './journal-keys';
import { TurnStatusWriter } from './turn-status-writer';
import type {
  AcceptRollback,
  AcceptRollbackAnswer,
  AnswerApproval,
  AnswerQuestion,
  Caller,
  ClearMemory,
  ClearMemoryAnswer,
  ConversationSummary,
  MemoryView,
  NewConversation,
  PaymentPolicyAnswer,
  PaymentPolicyView,
  PostMessage,
  ResolveAnswer,
  ResolveTurn,
  SetPaymentPolicy,
  TextDeltaEvent,
  Transcript,
  TurnReply,
  TurnService,
} from './turn-service';
export class TurnCoordinator implements TurnService {
  private readonly stopping = new AbortController();
  /** Aborted when the replica drains (and on close): no new claim starts. */
  private readonly draining = new AbortController();
  private readonly now: () => number;
  private readonly claims: TurnClaims;
  private readonly views: JournalViews;
  private readonly status: TurnStatusWriter;
  private readonly expiries: ExpiryTimers;
  private readonly approvalTtlMs: number;
  private readonly historyTokens: number;
  private readonly runner: TurnRunner;
  private readonly summarizer: Summarizer | undefined;

  constructor(private readonly options: TurnCoordinatorOptions) {
    this.now = options.nowMs ?? Date.now;
    this.claims = new TurnClaims({
      leases: options.leases,
      nowMs: this.now,
      stopping: this.draining.signal,
    });
    this.views = new JournalViews({
      state: options.state,
      ...(options.viewCacheSize === undefined ? {} : { cacheSize: options.viewCacheSize }),
      isBusy: (uid) => this.claims.isBusy(uid),
      onCommit: (seconds) => options.observer?.onCommit?.(seconds),
    });
    this.status = new TurnStatusWriter({
      conversations: options.conversations,
      logger: options.logger,
      nowMs: this.now,
      stopping: this.stopping.signal,
      ...(options.statusIntervalMs === undefined ? {} : { intervalMs: options.statusIntervalMs }),
      onWrite: (result) => options.observer?.onStatusWrite?.(result),
      keys: new JournalKeyRecorder({ state: options.state, logger: options.logger }),
    });
    this.approvalTtlMs = options.approvalTtlMs ?? DEFAULT_APPROVAL_TTL_MS;
    this.historyTokens = options.historyTokens ?? DEFAULT_HISTORY_TOKENS;
    this.expiries = new ExpiryTimers(
      this.now,
      this.approvalTtlMs,
      (uid) => void this.expireWhenDue(uid),
    );
    const { historyTokens, now: nowMs, claims } = this;
    this.summarizer = summarizerFor(options, { historyTokens, nowMs, claims }, () => this.runner);
    this.runner = new TurnRunner(options, {
      views: this.views,
      status: this.status,
      stopping: this.stopping.signal,
      nowMs: this.now,
      approvalTtlMs: this.approvalTtlMs,
      historyTokens: this.historyTokens,
      expiries: this.expiries,
      ...(this.summarizer === undefined ? {} : { summaries: this.summarizer }),
    });
  }

  /**
   * Refuses new claims (503: retry on another replica) and waits up to `timeoutMs` for the
   * work in progress; {@link close} cancels the rest, left for the next holder.
   */
  async drain(timeoutMs: number): Promise<void> {
    this.draining.abort(new AppError('unavailable', 'this replica is shutting down'));
    await this.claims.idle(timeoutMs);
  }

  /** Resumes interrupted turns and a due expiry with no request (resume-turns.ts). */
  resume(uid: string, signal: AbortSignal): Promise<ResumedTurn[]> {
    const conversation = this.options.conversations.byUid(uid);
    if (conversation === undefined) return Promise.resolve([]);
    const { claims, runner, views, expiries, now: nowMs, approvalTtlMs, historyTokens } = this;
    const parts = { claims, runner, views, expiries, nowMs, approvalTtlMs, historyTokens };
    return resumeTurns({ ...parts, logger: this.options.logger }, conversation, signal);
  }

  /** Stops taking turns; running harness calls are cancelled (their turns stay recoverable). */
  async close(timeoutMs = 5_000): Promise<void> {
    this.draining.abort(new AppError('unavailable', 'this replica is shutting down'));
    this.stopping.abort(new AppError('unavailable', 'the control plane is shutting down'));
    this.expiries.close();
    await this.summarizer?.close();
    // Status writes still queued are worth finishing: they are what kubectl shows.
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      this.status.flushed(),
      new Promise((resolve) => {
        timer = setTimeout(resolve, timeoutMs);
      }),
    ]);
    clearTimeout(timer);
  }

  /**
   * Runs `work` holding the conversation as a turn does (this replica's lock, then its
   * Lease), for writes other than turns (operator/forensics: repair). The cached journal
   * view is dropped before the conversation is released: `work` wrote the journal behind
   * it, and the next turn must read it again rather than meet a moved head.
   */
  exclusive<T>(
    conversation: Conversation,
    signal: AbortSignal,
    work: (lease: LeaseHandle) => Promise<T>,
  ): Promise<T> {
    const uid = conversation.metadata.uid ?? '';
    return this.claims.run(conversation, signal, async (lease) => {
      try {
        return await work(lease);
      } finally {
        this.views.forget(uid);
      }
    });
  }

  // ---- TurnService ----

  async createConversation(
    caller: Caller,
    request: NewConversation,
    signal: AbortSignal,
  ): Promise<{ summary: ConversationSummary; turn?: TurnReply }> {
    const created = await this.options.conversations.create(caller.identity, signal);
    const summary = conversationSummary(created);
    if (request.message === undefined) return { summary };
    const turn = await this.postMessage(
      caller,
      { ...request.message, conversationId: summary.conversationId },
      signal,
    );
    return { summary, turn };
  }

  conversation(caller: Caller, conversationId: string): Promise<ConversationSummary> {
    return Promise.resolve(conversationSummary(this.authorized(caller, conversationId)));
  }

  async transcript(
    caller: Caller,
    conversationId: string,
    signal: AbortSignal,
  ): Promise<Transcript> {
    this.authorized(caller, conversationId);
    const view = await this.views.refresh(conversationId, signal);
    this.expiries.follow(conversationId, view);
    return { conversationId, turns: transcriptTurns(view), head: view.head };
  }

  /** The conversation's memory (memory-service.ts), read as the transcript is. */
  memory(caller: Caller, conversationId: string, signal: AbortSignal): Promise<MemoryView> {
    return readMemory(this.adminParts(), caller, conversationId, signal);
  }

  /** Clears one key or all memory under the conversation's claim (memory-service.ts). */
  clearMemory(
    caller: Caller,
    request: ClearMemory,
    signal: AbortSignal,
  ): Promise<ClearMemoryAnswer> {
    return clearMemory(this.adminParts(), caller, request, signal);
  }

  onTextDelta(conversationId: string, listener: (delta: TextDeltaEvent) => void): () => void {
    return this.runner.onTextDelta(conversationId, listener);
  }

  async postMessage(caller: Caller, request: PostMessage, signal: AbortSignal): Promise<TurnReply> {
    const conversation = this.authorized(caller, request.conversationId);
    if (conversation.metadata.deletionTimestamp !== undefined) {
      throw new AppError(
        'failed_precondition',
        `conversation ${request.conversationId} is being deleted and takes no new turn`,
      );
    }
    const uid = request.conversationId;
    const turnId = turnIdFor(uid, request.idempotencyKey);
    const approver = request.directive?.requiredApprover;
    // Only an edge's directive is looked at further (the plan refuses anyone else's).
    const approverIsAdmin =
      approver === undefined || !caller.roles.includes(CallerRole.Edge)
        ? undefined
        : await this.options.identities.isAdmin(approver, signal);
    return this.claims.run(conversation, signal, async (lease) => {
      let view = await this.runner.startView(conversation, lease, signal);
      for (;;) {
        // The cache may have moved while this caller waited for the lock or a recovery ran.
        const current = this.runner.fresh(conversation);
        const step = planMessage({
          view,
          conversation: current,
          caller,
          request,
          turnId,
          lease,
          nowMs: this.now(),
          approvalTtlMs: this.approvalTtlMs,
          deploymentHistoryTokens: this.historyTokens,
          ...(approverIsAdmin === undefined ? {} : { approverIsAdmin }),
          ...rosterInput(current, this.options.agentDirectory),
        });
        switch (step.kind) {
          case 'refuse':
            throw step.error;
          case 'reply':
            return settledReplyOf(uid, step.turn);
          case 'expire':
            await this.runner.expire(current, lease, step.due, view);
            view = this.views.cached(uid) ?? (await this.views.refresh(uid, signal));
            continue;
          case 'recover':
            this.options.logger.info(
              { conversation: uid, turn: step.turn.turnId },
              'recovering an orphaned dispatch',
            );
            await this.runner.commit(uid, lease, step.events);
            await this.runner.drive(current, lease, step.turn.turnId);
            view = this.views.cached(uid) ?? (await this.views.refresh(uid, signal));
            continue;
          case 'dispatch':
            // Batch one: if it fails, the dispatch is rejected and the harness never runs.
            await this.runner.commit(uid, lease, step.events);
            return this.runner.drive(current, lease, step.turnId);
        }
      }
    });
  }

  answerApproval(caller: Caller, request: AnswerApproval, signal: AbortSignal): Promise<TurnReply> {
    const conversation = this.authorized(caller, request.conversationId);
    return answerApproval(this.answerParts(), caller, conversation, request, signal);
  }

  answerQuestion(caller: Caller, request: AnswerQuestion, signal: AbortSignal): Promise<TurnReply> {
    const conversation = this.authorized(caller, request.conversationId);
    return answerQuestion(this.answerParts(), caller, conversation, request, signal);
  }

  /** An admin settles a quarantined turn (resolve-turn.ts); the next claim runs it. */
  resolveTurn(caller: Caller, request: ResolveTurn, signal: AbortSignal): Promise<ResolveAnswer> {
    return resolveTurn(this.adminParts(), caller, request, signal);
  }

  /** An admin accepts a rolled-back journal (accept-rollback.ts); turns go on after it. */
  acceptRollback(
    caller: Caller,
    request: AcceptRollback,
    signal: AbortSignal,
  ): Promise<AcceptRollbackAnswer> {
    return acceptRollback(this.adminParts(), caller, request, signal);
  }

  /** An admin links or unlinks a wallet (payment-policy.ts), recorded in the journal. */
  setPaymentPolicy(
    caller: Caller,
    request: SetPaymentPolicy,
    signal: AbortSignal,
  ): Promise<PaymentPolicyAnswer> {
    return setPaymentPolicy(this.adminParts(), caller, request, signal);
  }

  /** The payment policy in force, for an admin (payment-policy.ts). */
  paymentPolicy(
    caller: Caller,
    conversationId: string,
    actor: string,
    signal: AbortSignal,
  ): Promise<PaymentPolicyView> {
    return readPaymentPolicy(this.adminParts(), caller, conversationId, actor, signal);
  }

  // ---- cancel and expiry ----

  /** What the admin shells (resolve, accept-rollback, payment policy) use of the coordinator. */
  private adminParts(): ResolveParts {
    const { claims, views, runner, now: nowMs } = this;
    const { conversations, payments, approvals } = this.options;
    return { conversations, claims, views, runner, nowMs, payments, approvals };
  }

  private answerParts(): AnswerParts {
    const { approvalTtlMs, historyTokens } = this;
    const { approvals, allowSelfApproval } = this.options;
    const self = allowSelfApproval ?? false;
    return {
      ...this.cancelParts(),
      approvals,
      allowSelfApproval: self,
      approvalTtlMs,
      historyTokens,
    };
  }

  private cancelParts(): CancelParts {
    const { claims, runner, now: nowMs } = this;
    return { claims, runner, logger: this.options.logger, nowMs };
  }

  /**
   * The expiry timer fired: resume the conversation (resume-turns.ts), whose plan expires
   * what is due before anything else and arms the timer again for what is not.
   */
  private async expireWhenDue(uid: string): Promise<void> {
    if (this.stopping.signal.aborted) return;
    try {
      await this.resume(uid, this.stopping.signal);
    } catch (error) {
      // Another replica holds the lease (its timer expires it), or the turn failed and is
      // recovered on the next claim; the next read arms the timer again.
      this.options.logger.info({ err: error, conversation: uid }, 'approval expiry not run here');
    }
  }

  private authorized(caller: Caller, id: string): Conversation {
    return usableConversation(caller, id, this.options.conversations.byUid(id));
  }
}

/**
 * The roster a new turn of `conversation` would run under, resolved from the caches now,
 * or why it cannot be (agent-roster.ts); nothing for an inline agent.
 */
function rosterInput(
  conversation: Conversation,
  directory: ((namespace: string) => AgentDirectory) | undefined,
): { roster?: RecordedRoster | { refused: AppError } } {
  const entry = conversation.spec.agentRef?.name;
  if (entry === undefined) return {};
  const namespace = conversation.metadata.namespace ?? '';
  if (directory === undefined) {
    const why = `conversation ${conversation.metadata.name ?? ''} names Agent ${entry}, but this control plane was started without Agents`;
    return { roster: { refused: new AppError('failed_precondition', why) } };
  }
  try {
    const rules = conversation.spec.tools?.requireApproval ?? [];
    return { roster: resolveRoster(entry, directory(namespace), namespace, rules) };
  } catch (error) {
    if (!isAppError(error)) throw error;
    return { roster: { refused: error } };
  }
}
