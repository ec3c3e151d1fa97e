/**
 * What the turn coordinator (coordinator.ts) runs under a claimed lease once the turn plan
 * (the plan-*.ts files) has decided: it commits each batch, runs the dispatched turn on the
 * harness (it reads the call, harness-call.ts, and commits each step the plan accepts
 * before it answers) and settles it with batch two, commits a due expiry, and queues
 * the status each of these changes (turn-status-writer.ts). It claims nothing and decides
 * nothing itself: the caller holds the lease, the plan made the events.
 */
import { AppError, isRetryable } from '../../common/errors';
import type { AppendOutcome } from '../../common/state-journal';
import type { Conversation } from '../api/v1alpha1/conversation-types';
import type { LeaseHandle } from '../lease/lease-source';
import type { TurnCoordinatorOptions, TurnObserver } from './coordinator-options';
import {
  forgedEnd,
  HARNESS_BUSY,
  retryWhileBusy,
  traceparent,
  unsettledError,
} from './harness-run';
import { answerHarness } from './control-plane-calls';
import { paymentContextOf } from './answer-context';
import type { MemoryEntry } from '../../common/memory';
import { type DispatchedTurn } from './plan-harness-checks';
import { settledWithAgent } from './plan-agents';
import { dispatchedFacts, harnessStart, type HarnessStart } from './harness-start';
import { acceptedAsLost, checkpointOf, JournalRolledBackError } from './journal-checkpoint';
import { settledReplyOf } from './turn-projections';
import { type JournalView, type TurnView } from './journal-view-types';
import type { JournalViews } from './journal-views';
import { nextHistory } from './history-window';
import { expiryBatch, expiryToSign, type ApprovalDeadline } from './plan-expiry';
import { planSettle, type HarnessEnd } from './plan-settle';
import { type PlannedEvent } from './plan-common';
import type { ExpiryTimers } from './expiry-timers';
import type { TurnStatusChange } from './turn-status';
import type { TurnStatusWriter } from './turn-status-writer';
import type { TextDeltaEvent, TurnReply } from './turn-service';
import { TextDeltas } from './text-deltas';
import { RelayedModelCalls } from './relay-model-call';

/** What the runner shares with the coordinator that made it. */
export interface TurnRunnerParts {
  readonly views: JournalViews;
  readonly status: TurnStatusWriter;
  /** Aborted when the coordinator shuts down. */
  readonly stopping: AbortSignal;
  readonly nowMs: () => number;
  readonly approvalTtlMs: number;
  readonly historyTokens: number; // POLYCHROME_HISTORY_TOKENS (history-window.ts)
  /** The conversations' approval-expiry timers: they follow each view committed here. */
  readonly expiries: ExpiryTimers;
  /** Told of each settled turn's view, to make summaries ahead of need; absent: none. */
  readonly summaries?: { consider(conversation: Conversation, view: JournalView): void };
}

export class TurnRunner {
  private readonly deltas = new TextDeltas();
  private readonly views: JournalViews;
  private readonly status: TurnStatusWriter;
  private readonly stopping: AbortSignal;
  private readonly now: () => number;
  private readonly approvalTtlMs: number;
  private readonly observer: TurnObserver;

  constructor(
    private readonly options: TurnCoordinatorOptions,
    private readonly parts: TurnRunnerParts,
  ) {
    this.views = parts.views;
    this.status = parts.status;
    this.stopping = parts.stopping;
    this.now = parts.nowMs;
    this.approvalTtlMs = parts.approvalTtlMs;
    this.observer = options.observer ?? {};
  }

  /** Calls `listener` with each text delta of the conversation's turns run here. */
  onTextDelta(conversationId: string, listener: (delta: TextDeltaEvent) => void): () => void {
    return this.deltas.listen(conversationId, listener);
  }

  /**
   * The view a claimed request starts from ({@link JournalViews.inSync}), checked against
   * the conversation's `status.journal`. A rollback found is recorded in the status once
   * (Degraded JournalRolledBack, and its Event) and refused; a recorded rollback the
   * journal no longer shows (the state volume was put back) is cleared.
   *
   * @throws JournalRolledBackError as {@link JournalViews.inSync}.
   */
  async startView(
    claimed: Conversation,
    lease: LeaseHandle,
    signal: AbortSignal,
  ): Promise<JournalView> {
    const conversation = this.fresh(claimed);
    const uid = conversation.metadata.uid ?? '';
    const journal = conversation.status?.journal;
    let view: JournalView;
    try {
      view = await this.views.inSync(uid, lease, signal, checkpointOf(conversation));
    } catch (error) {
      this.noteRollback(uid, error);
      throw error;
    }
    if (acceptedAsLost(checkpointOf(conversation), view.acceptedLosses)) {
      this.catchUpAcceptedRollback(conversation, view);
    } else if (journal?.rollback !== undefined) {
      this.options.logger.info(
        { conversation: uid, head: view.head },
        'the journal holds status.journal again; the rollback is cleared',
      );
      this.status.queue(conversation, { kind: 'journal_restored' });
    }
    return view;
  }

  /**
   * The status still names a checkpoint the journal records as accepted lost: it moves to
   * the journal's last signed root as an accepted rollback would (the one change that may
   * lower it), and any recorded rollback goes.
   */
  private catchUpAcceptedRollback(conversation: Conversation, view: JournalView): void {
    const root = view.lastSignedRoot;
    if (root === undefined) return;
    this.options.logger.info(
      { conversation: conversation.metadata.uid, head: view.head },
      'status.journal names a checkpoint the journal records as accepted lost; it catches up',
    );
    this.status.queue(
      conversation,
      { kind: 'rollback_accepted' },
      { head: view.head, lastSignedRoot: root.root, keyId: root.keyId },
    );
  }

  /**
   * A rollback found (by the check before a claim, or by an append the state plane
   * refused for a journal shorter than the view) goes into the status once: Degraded
   * JournalRolledBack, and its Event.
   */
  private noteRollback(uid: string, error: unknown): void {
    if (!(error instanceof JournalRolledBackError)) return;
    const conversation = this.options.conversations.byUid(uid);
    if (conversation === undefined || conversation.status?.journal?.rollback !== undefined) return;
    this.options.logger.error(
      { conversation: uid, ...error.rollback },
      'the journal was rolled back; nothing is appended until it is restored or an admin accepts it',
    );
    this.status.queue(conversation, { kind: 'journal_rolled_back', rollback: error.rollback });
  }

  /** Commits the expiry the plan found due in `view` (a signed denial) and runs the turn on. */
  async expire(
    conversation: Conversation,
    lease: LeaseHandle,
    due: ApprovalDeadline,
    view: JournalView,
  ): Promise<TurnReply> {
    const uid = conversation.metadata.uid ?? '';
    const now = this.now();
    const signed = this.options.approvals.signScoped(
      expiryToSign(due),
      uid,
      now + this.approvalTtlMs,
    );
    this.options.logger.info(
      { conversation: uid, turn: due.turn.turnId, requestId: due.request.requestId },
      'approval expired unanswered; the turn goes on as on a denial',
    );
    const { historyTokens } = this.parts;
    const history = nextHistory(view, conversation, due.turn.messagePosition, historyTokens);
    const batch = expiryBatch(due, signed, lease, now, this.approvalTtlMs, history);
    await this.commit(uid, lease, batch);
    return this.drive(conversation, lease, due.turn.turnId);
  }

  /**
   * Runs the dispatched turn on the harness and commits batch two. The turn's latest
   * `turn_dispatched` is already durable. A failure that leaves the turn unsettled (the
   * harness unreachable, the lease lost) leaves an orphan for recovery and is rethrown.
   */
  async drive(claimed: Conversation, lease: LeaseHandle, turnId: string): Promise<TurnReply> {
    const conversation = this.fresh(claimed);
    const uid = conversation.metadata.uid ?? '';
    const started = performance.now();
    const log = this.options.logger.child({ conversation: uid, turn: turnId });
    const attempt = this.turnAt(uid, turnId).dispatches.at(-1)?.attempt ?? 1;
    this.markRunning(conversation, turnId);
    const signal = AbortSignal.any([lease.signal, this.stopping]);
    const end = await this.runOnHarness(conversation, lease, turnId, attempt, signal);
    const plan = planSettle({
      dispatched: this.dispatched(conversation, turnId),
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
      const cut = { shutDown: this.stopping.aborted, leaseLost: lease.signal.aborted };
      throw unsettledError(end.error, uid, turnId, cut);
    }
    if (end.kind === 'failed') {
      log.warn({ err: end.error, attempt }, 'turn failed on its last attempt; settling it');
    } else if (end.kind === 'forged') {
      log.error({ reason: end.reason, attempt }, 'the harness sent a forged step; quarantining');
    }
    const { outcome, view } = await this.commit(uid, lease, plan.events);
    this.queueSettled(conversation, settledWithAgent(plan.status, view, turnId), outcome);
    this.parts.summaries?.consider(conversation, view);
    this.observer.onTurn?.(plan.status.kind, (performance.now() - started) / 1000);
    log.info({ outcome: plan.status.kind, attempt }, 'turn settled');
    return settledReplyOf(uid, view.turnsById.get(turnId) ?? vanished(turnId));
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
  queueSettled(conversation: Conversation, change: TurnStatusChange, outcome: AppendOutcome): void {
    this.status.queue(conversation, change, {
      head: outcome.head,
      lastSignedRoot: Buffer.from(outcome.signedRoot.root).toString('hex'),
      keyId: outcome.signedRoot.keyId,
    });
  }

  /**
   * One harness call: waits for the sandbox, builds the start with the plan and reads the
   * call, called again while the harness still finishes a cancelled call of an earlier
   * attempt. How the call ended comes back as a {@link HarnessEnd}, never a throw.
   */
  private async runOnHarness(
    conversation: Conversation,
    lease: LeaseHandle,
    turnId: string,
    attempt: number,
    signal: AbortSignal,
  ): Promise<HarnessEnd> {
    const uid = conversation.metadata.uid ?? '';
    const { conversations, sandboxWaitMs } = this.options;
    try {
      const endpoint = await conversations.waitForSandbox(uid, sandboxWaitMs ?? 120_000, signal);
      const view = this.views.cached(uid) ?? (await this.views.refresh(uid, signal));
      const turn = this.turnAt(uid, turnId);
      const { modelRoutes } = this.options;
      const start = harnessStart(conversation, view, turn, attempt, this.options, modelRoutes);
      for (let busy = 0; ; busy += 1) {
        try {
          return await this.readHarness(conversation, lease, endpoint, start, signal);
        } catch (error) {
          if (!retryWhileBusy(error, busy)) throw error;
          await new Promise((resolve) => setTimeout(resolve, HARNESS_BUSY.waitMs));
        }
      }
    } catch (error) {
      return { kind: 'failed', error, retryable: !signal.aborted && isRetryable(error) };
    }
  }

  /**
   * Reads the call to its end, in the harness's order: a text delta goes to this replica's
   * listeners; a step is checked with the plan against the dispatched turn, committed under
   * `lease`, and only then acknowledged with its position (a refused step is the `forged`
   * end, and the call is cancelled); a trusted tool call is answered; a relayed model request
   * is made along the route dispatched for its agent while the reading goes on
   * (relay-model-call.ts; an agent without one is the `forged` end); then the end.
   */
  private async readHarness(
    conversation: Conversation,
    lease: LeaseHandle,
    endpoint: string,
    dispatched: HarnessStart,
    signal: AbortSignal,
  ): Promise<HarnessEnd> {
    const uid = conversation.metadata.uid ?? '';
    const { start, routes } = dispatched;
    const { turnId } = start;
    const namespace = conversation.metadata.namespace ?? '';
    const options = { signal, traceparent: traceparent(), namespace };
    const call = this.options.harness.openTurn(endpoint, start, options);
    const relays = new RelayedModelCalls();
    const answering = this.answering(conversation, lease, turnId);
    try {
      for await (const message of call) {
        switch (message.kind) {
          case 'delta':
            this.deltas.emit(uid, { turnId, ...message.delta });
            break;
          case 'step':
          case 'trusted_tool':
          case 'payment_challenge':
          case 'payment_settle':
          case 'mcp_paid_result': {
            const forged = await answerHarness(message, call, answering);
            if (forged !== undefined) return forged;
            break;
          }
          case 'model_request': {
            // Answered when the model has answered, while the reading goes on.
            const forged = relays.start(call, message.request, {
              relay: this.options.modelRelay,
              routes,
              signal: AbortSignal.any([signal, call.closed]),
              onTextDelta: (delta) => this.deltas.emit(uid, { turnId, ...delta }),
            });
            if (forged !== undefined) return forgedEnd(forged, '', call);
            break;
          }
          case 'paused':
            return { kind: 'paused', request: message.paused.request };
          case 'result':
            return { kind: 'result', result: message.result, carried: message.carried };
        }
      }
      // Unreachable: reading a call that did not end throws (harness-call.ts).
      throw new AppError('internal', `the harness call of turn ${turnId} stopped before its end`);
    } finally {
      // Nothing outlives the call: the relays still running stop with it (`call.closed`).
      await relays.settled();
    }
  }

  /** What answering the harness (control-plane-calls.ts) needs of this runner. */
  private answering(conversation: Conversation, lease: LeaseHandle, turnId: string) {
    const uid = conversation.metadata.uid ?? '';
    return {
      facts: () => {
        const memory = this.views.cached(uid)?.memory ?? new Map<string, MemoryEntry>();
        return { turn: this.turnAt(uid, turnId), conversation, nowMs: this.now(), memory };
      },
      dispatched: () => this.dispatched(conversation, turnId),
      commit: (events: readonly PlannedEvent[]) => this.commit(uid, lease, events),
      payments: () => paymentContextOf(this.views.cached(uid), this.options, uid, this.now),
    };
  }

  /**
   * Appends one batch under `lease` (see {@link JournalViews.append}); the expiry timer
   * then follows what the conversation waits on.
   */
  async commit(
    uid: string,
    lease: LeaseHandle,
    events: readonly PlannedEvent[],
  ): ReturnType<JournalViews['append']> {
    let committed: Awaited<ReturnType<JournalViews['append']>>;
    try {
      committed = await this.views.append(uid, lease, events);
    } catch (error) {
      this.noteRollback(uid, error);
      throw error;
    }
    this.parts.expiries.follow(uid, committed.view);
    return committed;
  }

  private dispatched(conversation: Conversation, turnId: string): DispatchedTurn {
    const uid = conversation.metadata.uid ?? '';
    return dispatchedFacts(conversation, this.views.cached(uid), this.turnAt(uid, turnId));
  }

  private turnAt(uid: string, turnId: string): TurnView {
    return this.views.cached(uid)?.turnsById.get(turnId) ?? vanished(turnId);
  }

  /** The newest cached copy of the conversation (its spec and status may have moved). */
  fresh(conversation: Conversation): Conversation {
    return this.options.conversations.byUid(conversation.metadata.uid ?? '') ?? conversation;
  }
}

function vanished(turnId: string): never {
  throw new AppError('internal', `turn ${turnId} vanished from the view`);
}
