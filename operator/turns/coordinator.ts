/**
 * The turn coordinator (docs/turns.md): the thin shell around the turn plan
 * (turn-plan.ts). It joins the conversation's lease (turn-claims.ts), its journal on the
 * state plane (journal-views.ts) and its harness pod (harness-client.ts): for each request
 * it claims the conversation, asks the plan what to do, commits the events the plan
 * returns, and runs the harness, committing each step the plan accepts before it is
 * acknowledged. Status is written off the turn's path (turn-status-writer.ts).
 */
import type { Logger } from 'pino';
import { AppError } from '../../common/errors';
import type { AppendOutcome, StateJournal } from '../../common/state-client';
import { Visibility, type Conversation } from '../api/v1alpha1';
import type { LeaseHandle, LeaseSource } from '../lease/conversation-leases';
import type { ApprovalSigner } from './approval-signer';
import type { ConversationStore } from './conversation-access';
import { ExpiryTimers } from './expiry-timers';
import type { HarnessConnector } from './harness-client';
import { runHarness, type HarnessRunPorts } from './harness-run';
import { transcriptTurns, turnReplyOf, type JournalView, type TurnView } from './journal-view';
import { JournalViews } from './journal-views';
import { TurnClaims } from './turn-claims';
import { turnIdFor } from './turn-ids';
import {
  approvalAnswerBatch,
  approvalDeadline,
  authorizeUse,
  CallerRole,
  DEFAULT_APPROVAL_TTL_MS,
  dueExpiry,
  expiryBatch,
  expiryToSign,
  planApprovalAnswer,
  planCancel,
  planMessage,
  planQuestionAnswer,
  planSettle,
  stepEventOf,
  type ApprovalDeadline,
  type HarnessEnd,
  type PlannedEvent,
} from './turn-plan';
import type { TurnStatusChange } from './turn-status';
import { TurnStatusWriter } from './turn-status-writer';
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

export { FAILED_TURN_TEXT } from './turn-plan';

/** Who holds which roles, for rules that name an identity other than the caller's. */
export interface IdentityDirectory {
  /** Whether `identity` is linked to a persona with the admin role. */
  isAdmin(identity: string, signal: AbortSignal): Promise<boolean>;
}

export interface TurnCoordinatorOptions {
  readonly state: StateJournal;
  readonly harness: HarnessConnector;
  readonly leases: LeaseSource;
  readonly conversations: ConversationStore;
  readonly approvals: ApprovalSigner;
  readonly identities: IdentityDirectory;
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
  /** How long a pending approval waits for an answer (`POLYCHROME_APPROVAL_TTL`). @default 24 h */
  readonly approvalTtlMs?: number;
}

/** What the metrics see of each turn. */
export interface TurnObserver {
  onTurn?(outcome: string, seconds: number): void;
  onCommit?(seconds: number): void;
  onStatusWrite?(result: 'ok' | 'failed'): void;
}

export class TurnCoordinator implements TurnService {
  private readonly deltas = new Map<string, Set<(delta: TextDeltaEvent) => void>>();
  private readonly stopping = new AbortController();
  private readonly now: () => number;
  private readonly claims: TurnClaims;
  private readonly views: JournalViews;
  private readonly status: TurnStatusWriter;
  private readonly expiries: ExpiryTimers;
  private readonly approvalTtlMs: number;
  observer: TurnObserver = {};

  constructor(private readonly options: TurnCoordinatorOptions) {
    this.now = options.nowMs ?? Date.now;
    this.claims = new TurnClaims({
      leases: options.leases,
      nowMs: this.now,
      stopping: this.stopping.signal,
    });
    this.views = new JournalViews({
      state: options.state,
      ...(options.viewCacheSize === undefined ? {} : { cacheSize: options.viewCacheSize }),
      isBusy: (uid) => this.claims.isBusy(uid),
      onCommit: (seconds) => this.observer.onCommit?.(seconds),
    });
    this.status = new TurnStatusWriter({
      conversations: options.conversations,
      logger: options.logger,
      nowMs: this.now,
      stopping: this.stopping.signal,
      ...(options.statusIntervalMs === undefined ? {} : { intervalMs: options.statusIntervalMs }),
      onWrite: (result) => this.observer.onStatusWrite?.(result),
    });
    this.approvalTtlMs = options.approvalTtlMs ?? DEFAULT_APPROVAL_TTL_MS;
    this.expiries = new ExpiryTimers(this.now, (uid) => void this.expireWhenDue(uid));
  }

  /** Stops taking turns; running harness calls are cancelled (their turns stay recoverable). */
  async close(timeoutMs = 5_000): Promise<void> {
    this.stopping.abort(new AppError('unavailable', 'the control plane is shutting down'));
    this.expiries.close();
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
    this.authorized(caller, conversationId);
    const view = await this.views.refresh(conversationId, signal);
    this.armExpiry(conversationId, view);
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
    const uid = request.conversationId;
    const turnId = turnIdFor(uid, request.idempotencyKey);
    const approver = request.directive?.requiredApprover;
    // Only an edge's directive is looked at further (the plan refuses anyone else's).
    const approverIsAdmin =
      approver === undefined || !caller.roles.includes(CallerRole.Edge)
        ? undefined
        : await this.options.identities.isAdmin(approver, signal);
    return this.claims.run(conversation, signal, async (lease) => {
      let view = await this.views.inSync(uid, lease, signal);
      for (;;) {
        // The cache may have moved while this caller waited for the lock or a recovery ran.
        const current = this.fresh(conversation);
        const step = planMessage({
          view,
          conversation: current,
          caller,
          request,
          turnId,
          lease,
          nowMs: this.now(),
          approvalTtlMs: this.approvalTtlMs,
          ...(approverIsAdmin === undefined ? {} : { approverIsAdmin }),
        });
        switch (step.kind) {
          case 'refuse':
            throw step.error;
          case 'reply':
            return this.replyOf(uid, step.turn);
          case 'expire':
            await this.expire(current, lease, step.due);
            view = this.views.cached(uid) ?? (await this.views.refresh(uid, signal));
            continue;
          case 'recover':
            this.options.logger.info(
              { conversation: uid, turn: step.turn.turnId },
              'recovering an orphaned dispatch',
            );
            await this.commit(uid, lease, step.events);
            await this.drive(current, lease, step.turn.turnId);
            view = this.views.cached(uid) ?? (await this.views.refresh(uid, signal));
            continue;
          case 'dispatch':
            // Batch one: if it fails, the dispatch is rejected and the harness never runs.
            await this.commit(uid, lease, step.events);
            return this.drive(current, lease, step.turnId);
        }
      }
    });
  }

  async answerApproval(
    caller: Caller,
    request: AnswerApproval,
    signal: AbortSignal,
  ): Promise<TurnReply> {
    const conversation = this.authorized(caller, request.conversationId);
    const uid = request.conversationId;
    const { decision, comment } = request;
    if (decision === 'cancel') {
      return this.cancel(caller, conversation, 'approval', request.requestId, comment, signal);
    }
    return this.claims.run(conversation, signal, async (lease) => {
      const input = {
        view: await this.views.inSync(uid, lease, signal),
        conversation,
        caller,
        requestId: request.requestId,
        lease,
        nowMs: this.now(),
      };
      const plan = planApprovalAnswer({ ...input, decision, approvalTtlMs: this.approvalTtlMs });
      switch (plan.kind) {
        case 'refuse':
          throw plan.error;
        case 'expire':
          // Too late: the expiry is due, so it is committed and the turn goes on as denied.
          await this.expire(conversation, lease, plan.due);
          throw plan.error;
        case 'answer': {
          const signature = this.options.approvals.sign(plan.sign);
          const batch = approvalAnswerBatch(
            { ...input, ...(comment === undefined ? {} : { comment }) },
            plan.turn,
            plan.sign,
            { keyId: this.options.approvals.keyId, signature },
          );
          await this.commit(uid, lease, batch);
          return this.drive(conversation, lease, plan.turn.turnId);
        }
      }
    });
  }

  async answerQuestion(
    caller: Caller,
    request: AnswerQuestion,
    signal: AbortSignal,
  ): Promise<TurnReply> {
    const conversation = this.authorized(caller, request.conversationId);
    const uid = request.conversationId;
    if ('cancel' in request) {
      const { requestId, comment } = request;
      return this.cancel(caller, conversation, 'question', requestId, comment, signal);
    }
    return this.claims.run(conversation, signal, async (lease) => {
      const view = await this.views.inSync(uid, lease, signal);
      const plan = planQuestionAnswer({
        view,
        conversation,
        caller,
        requestId: request.requestId,
        answer: request.answer,
        lease,
        nowMs: this.now(),
      });
      if (plan.kind === 'refuse') throw plan.error;
      await this.commit(uid, lease, plan.events);
      return this.drive(conversation, lease, plan.turn.turnId);
    });
  }

  // ---- cancel and expiry ----

  /** An admin's cancel: the plan settles the turn with a reply that says so. */
  private cancel(
    caller: Caller,
    conversation: Conversation,
    type: 'approval' | 'question',
    requestId: string,
    comment: string | undefined,
    signal: AbortSignal,
  ): Promise<TurnReply> {
    const uid = conversation.metadata.uid ?? '';
    return this.claims.run(conversation, signal, async (lease) => {
      const view = await this.views.inSync(uid, lease, signal);
      const plan = planCancel({
        view,
        conversation,
        caller,
        requestId,
        lease,
        nowMs: this.now(),
        type,
        ...(comment === undefined ? {} : { comment }),
      });
      if (plan.kind === 'refuse') throw plan.error;
      const turnId = plan.turn.turnId;
      const { outcome, view: settled } = await this.commit(uid, lease, plan.events);
      this.queueSettled(conversation, { kind: 'settled', turnId }, outcome);
      this.options.logger.info(
        { conversation: uid, turn: turnId, requestId, by: caller.identity },
        `${type} cancelled by an admin; the turn is settled`,
      );
      return this.replyOf(uid, settled.turnsById.get(turnId) ?? plan.turn);
    });
  }

  /** Commits the expiry the plan found due (a signed denial) and runs the turn on. */
  private async expire(
    conversation: Conversation,
    lease: LeaseHandle,
    due: ApprovalDeadline,
  ): Promise<TurnReply> {
    const uid = conversation.metadata.uid ?? '';
    const sign = expiryToSign(due);
    const signature = this.options.approvals.sign(sign);
    const now = this.now();
    this.options.logger.info(
      { conversation: uid, turn: due.turn.turnId, requestId: due.request.requestId },
      'approval expired unanswered; the turn goes on as on a denial',
    );
    const key = { keyId: this.options.approvals.keyId, signature };
    await this.commit(uid, lease, expiryBatch(due, key, lease, now, this.approvalTtlMs));
    return this.drive(conversation, lease, due.turn.turnId);
  }

  /** The expiry timer fired: claim the conversation and expire what the plan finds due. */
  private async expireWhenDue(uid: string): Promise<void> {
    const conversation = this.options.conversations.byUid(uid);
    if (conversation === undefined || this.stopping.signal.aborted) return;
    const signal = this.stopping.signal;
    try {
      await this.claims.run(conversation, signal, async (lease) => {
        const view = await this.views.inSync(uid, lease, signal);
        const due = dueExpiry(view, this.now(), this.approvalTtlMs);
        if (due === undefined) this.armExpiry(uid, view);
        else await this.expire(this.fresh(conversation), lease, due);
      });
    } catch (error) {
      // Another replica holds the lease (its timer expires it), or the turn failed and is
      // recovered on the next claim; the next read arms the timer again.
      this.options.logger.info({ err: error, conversation: uid }, 'approval expiry not run here');
    }
  }

  /** Arms (or clears) the conversation's expiry timer for what `view` waits on. */
  private armExpiry(uid: string, view: JournalView): void {
    const deadline = approvalDeadline(view, this.approvalTtlMs);
    if (deadline === undefined) this.expiries.clear(uid);
    else this.expiries.arm(uid, deadline.expiresAtMs);
  }

  // ---- turns ----

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
    const attempt = this.turnAt(uid, turnId).dispatches.at(-1)?.attempt ?? 1;
    this.markRunning(conversation, turnId);
    const signal = AbortSignal.any([lease.signal, this.stopping.signal]);
    const end = await this.runOnHarness(conversation, lease, turnId, attempt, signal);
    const plan = planSettle({
      dispatched: { turn: this.turnAt(uid, turnId), conversation, ...this.recording(uid) },
      end,
      attempt,
      maxAttempts: this.options.maxAttempts ?? 3,
      nowMs: this.now(),
    });
    if (plan.kind === 'orphan') {
      this.observer.onTurn?.('orphaned', (performance.now() - started) / 1000);
      if (end.kind !== 'failed') {
        throw new AppError(
          'unavailable',
          `turn ${turnId} did not finish (${plan.message}); post again with the same idempotency key to retry it`,
          { details: { turnId } },
        );
      }
      log.warn(
        { err: end.error, attempt },
        'turn left unsettled; it is recovered on the next claim',
      );
      throw this.unsettled(end.error, uid, turnId, lease);
    }
    if (end.kind === 'failed') {
      log.warn({ err: end.error, attempt }, 'turn failed on its last attempt; settling it');
    } else if (end.kind === 'forged') {
      log.error({ reason: end.reason, attempt }, 'the harness sent a forged step; quarantining');
    }
    const { outcome, view } = await this.commit(uid, lease, plan.events);
    this.queueSettled(conversation, plan.status, outcome);
    this.observer.onTurn?.(plan.status.kind, (performance.now() - started) / 1000);
    log.info({ outcome: plan.status.kind, attempt }, 'turn settled');
    const settled = view.turnsById.get(turnId);
    if (settled === undefined) throw vanished(turnId);
    return this.replyOf(uid, settled);
  }

  /**
   * The running mark. A conversation that is not Ready (closed, or its pod not up) needs
   * lastTurnTime now: it is what reopens it. Otherwise the mark may wait a moment, so a
   * fast turn costs one status write instead of two.
   */
  private markRunning(conversation: Conversation, turnId: string): void {
    const ready =
      conversation.status?.conditions?.find((c) => c.type === 'Ready')?.status === 'True';
    this.status.queue(
      conversation,
      { kind: 'running', turnId, lastTurnTime: new Date(this.now()).toISOString() },
      undefined,
      ready ? (this.options.statusDelayMs ?? 250) : 0,
    );
  }

  /** Status after the batch that settled or paused a turn: the change and the journal head. */
  private queueSettled(
    conversation: Conversation,
    change: TurnStatusChange,
    outcome: AppendOutcome,
  ): void {
    this.status.queue(conversation, change, {
      head: outcome.head,
      lastSignedRoot: Buffer.from(outcome.signedRoot.root).toString('hex'),
      keyId: outcome.signedRoot.keyId,
    });
  }

  /** One harness call (harness-run.ts), each accepted step committed under `lease`. */
  private runOnHarness(
    conversation: Conversation,
    lease: LeaseHandle,
    turnId: string,
    attempt: number,
    signal: AbortSignal,
  ): Promise<HarnessEnd> {
    const uid = conversation.metadata.uid ?? '';
    const ports: HarnessRunPorts = {
      harness: this.options.harness,
      conversations: this.options.conversations,
      sandboxWaitMs: this.options.sandboxWaitMs ?? 120_000,
      deploymentMaxSteps: this.options.deploymentMaxSteps ?? 0,
      view: async (s) => this.views.cached(uid) ?? (await this.views.refresh(uid, s)),
      turn: () => this.turnAt(uid, turnId),
      recording: () => this.recording(uid),
      commitStep: async (step) => {
        const { outcome } = await this.commit(uid, lease, [stepEventOf(step)]);
        return outcome.firstPosition;
      },
      onDelta: (delta) => {
        for (const listener of this.deltas.get(uid) ?? []) listener(delta);
      },
    };
    return runHarness(ports, conversation, attempt, signal);
  }

  /** Why a turn was left unsettled, for the caller: a retry with the same key is safe. */
  private unsettled(error: unknown, uid: string, turnId: string, lease: LeaseHandle): unknown {
    // A cancellation of ours is not the caller's doing: say why and that a retry is safe.
    if (this.stopping.signal.aborted) {
      return new AppError(
        'unavailable',
        `this control plane replica shut down during turn ${turnId}; retry with the same idempotency key and another replica resumes it`,
        { cause: error, details: { turnId } },
      );
    }
    if (lease.signal.aborted) {
      return new AppError(
        'unavailable',
        `this replica lost the lease of conversation ${uid} during turn ${turnId}; retry with the same idempotency key`,
        { cause: error, details: { turnId } },
      );
    }
    return error;
  }

  // ---- helpers ----

  /**
   * Appends one batch under `lease` (see {@link JournalViews.append}); the expiry timer
   * then follows what the conversation waits on.
   */
  private async commit(
    uid: string,
    lease: LeaseHandle,
    events: readonly PlannedEvent[],
  ): ReturnType<JournalViews['append']> {
    const committed = await this.views.append(uid, lease, events);
    this.armExpiry(uid, committed.view);
    return committed;
  }

  /** The journal's newest agent configuration, for the recording checks (docs/replay.md). */
  private recording(uid: string): { newestAgentConfig?: string } {
    const newest = this.views.cached(uid)?.newestAgentConfig;
    return newest === undefined ? {} : { newestAgentConfig: newest.sha256 };
  }

  private turnAt(uid: string, turnId: string): TurnView {
    const turn = this.views.cached(uid)?.turnsById.get(turnId);
    if (turn === undefined) throw vanished(turnId);
    return turn;
  }

  private authorized(caller: Caller, conversationId: string): Conversation {
    const conversation = this.options.conversations.byUid(conversationId);
    const refusal = authorizeUse(caller, conversationId, conversation);
    if (refusal !== undefined) throw refusal.error;
    if (conversation === undefined) throw new Error('unreachable: authorizeUse checked it');
    return conversation;
  }

  /** The newest cached copy of the conversation (its spec and status may have moved). */
  private fresh(conversation: Conversation): Conversation {
    return this.options.conversations.byUid(conversation.metadata.uid ?? '') ?? conversation;
  }

  private replyOf(conversationId: string, turn: TurnView): TurnReply {
    const reply = turnReplyOf(conversationId, turn);
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

function vanished(turnId: string): AppError {
  return new AppError('internal', `turn ${turnId} vanished from the view`);
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
