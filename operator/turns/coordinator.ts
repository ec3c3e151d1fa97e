/**
 * The turn coordinator (docs/turns.md): the thin shell around the turn plan
 * (turn-plan.ts). It joins the conversation's lease (turn-claims.ts), its journal on the
 * state plane (journal-views.ts) and its harness pod (harness-client.ts): for each request
 * it claims the conversation, asks the plan what to do, commits the events the plan
 * returns, and runs the harness, committing each step the plan accepts before it is
 * acknowledged. Status is written off the turn's path (turn-status-writer.ts).
 */
import type { Logger } from 'pino';
import { randomUUID } from 'node:crypto';
import { AppError, isAppError } from '../../common/errors';
import { payloadCodecs, type EventKind, type EventPayloads } from '../../common/event-kinds';
import type { NewJournalEvent, StateJournal } from '../../common/state-client';
import { Visibility, type Conversation } from '../api/v1alpha1';
import type { LeaseHandle, LeaseSource } from '../lease/conversation-leases';
import type { ApprovalSigner } from './approval-signer';
import type { ConversationStore } from './conversation-access';
import type { HarnessConnector, HarnessTurnEnd } from './harness-client';
import { transcriptTurns, turnReplyOf, type TurnView } from './journal-view';
import { JournalViews } from './journal-views';
import { TurnClaims } from './turn-claims';
import { turnIdFor } from './turn-ids';
import {
  approvalAnswerBatch,
  authorizeUse,
  CallerRole,
  checkStep,
  planApprovalAnswer,
  planMessage,
  planQuestionAnswer,
  planSettle,
  stepEventOf,
  turnStartOf,
  type HarnessEnd,
  type PlannedEvent,
} from './turn-plan';
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
}

/** What the metrics see of each turn. */
export interface TurnObserver {
  onTurn?(outcome: string, seconds: number): void;
  onCommit?(seconds: number): void;
  onStatusWrite?(result: 'ok' | 'failed'): void;
}

const HARNESS_BUSY_RETRIES = 20;

export class TurnCoordinator implements TurnService {
  private readonly deltas = new Map<string, Set<(delta: TextDeltaEvent) => void>>();
  private readonly stopping = new AbortController();
  private readonly now: () => number;
  private readonly claims: TurnClaims;
  private readonly views: JournalViews;
  private readonly status: TurnStatusWriter;
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
  }

  /** Stops taking turns; running harness calls are cancelled (their turns stay recoverable). */
  async close(timeoutMs = 5_000): Promise<void> {
    this.stopping.abort(new AppError('unavailable', 'the control plane is shutting down'));
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
          ...(approverIsAdmin === undefined ? {} : { approverIsAdmin }),
        });
        switch (step.kind) {
          case 'refuse':
            throw step.error;
          case 'reply':
            return this.replyOf(uid, step.turn);
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
    return this.claims.run(conversation, signal, async (lease) => {
      const view = await this.views.inSync(uid, lease, signal);
      const input = {
        view,
        conversation,
        caller,
        requestId: request.requestId,
        lease,
        nowMs: this.now(),
      };
      const plan = planApprovalAnswer({ ...input, decision: request.decision });
      if (plan.kind === 'refuse') throw plan.error;
      const signature = this.options.approvals.sign(plan.sign);
      await this.commit(
        uid,
        lease,
        approvalAnswerBatch(
          { ...input, ...(request.comment === undefined ? {} : { comment: request.comment }) },
          plan.turn,
          plan.sign,
          { keyId: this.options.approvals.keyId, signature },
        ),
      );
      return this.drive(conversation, lease, plan.turn.turnId);
    });
  }

  async answerQuestion(
    caller: Caller,
    request: AnswerQuestion,
    signal: AbortSignal,
  ): Promise<TurnReply> {
    const conversation = this.authorized(caller, request.conversationId);
    const uid = request.conversationId;
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
    // A conversation that is not Ready (closed, or its pod not up) needs lastTurnTime now:
    // it is what reopens it. Otherwise the running mark may wait a moment, so a fast turn
    // costs one status write instead of two.
    const ready =
      conversation.status?.conditions?.find((c) => c.type === 'Ready')?.status === 'True';
    this.status.queue(
      conversation,
      { kind: 'running', turnId, lastTurnTime: new Date(this.now()).toISOString() },
      undefined,
      ready ? (this.options.statusDelayMs ?? 250) : 0,
    );
    const signal = AbortSignal.any([lease.signal, this.stopping.signal]);
    const end = await this.runTurn(conversation, lease, turnId, attempt, signal);
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
      log.error(
        { reason: end.reason, attempt },
        'the harness sent a forged step; quarantining the turn',
      );
    }
    const { outcome, view } = await this.commit(uid, lease, plan.events);
    this.status.queue(conversation, plan.status, {
      head: outcome.head,
      lastSignedRoot: Buffer.from(outcome.signedRoot.root).toString('hex'),
      keyId: outcome.signedRoot.keyId,
    });
    this.observer.onTurn?.(plan.status.kind, (performance.now() - started) / 1000);
    log.info({ outcome: plan.status.kind, attempt }, 'turn settled');
    const settled = view.turnsById.get(turnId);
    if (settled === undefined) throw vanished(turnId);
    return this.replyOf(uid, settled);
  }

  /** Waits for the sandbox and runs the turn on the harness; how it ended, never a throw. */
  private async runTurn(
    conversation: Conversation,
    lease: LeaseHandle,
    turnId: string,
    attempt: number,
    signal: AbortSignal,
  ): Promise<HarnessEnd> {
    const uid = conversation.metadata.uid ?? '';
    let forged: { reason: string; toolCallId: string } | undefined;
    try {
      const endpoint = await this.options.conversations.waitForSandbox(
        uid,
        this.options.sandboxWaitMs ?? 120_000,
        signal,
      );
      const view = this.views.cached(uid) ?? (await this.views.refresh(uid, signal));
      const start = turnStartOf(
        conversation,
        view,
        this.turnAt(uid, turnId),
        attempt,
        this.options.deploymentMaxSteps ?? 0,
      );
      const ran = await this.runOnHarness(
        endpoint,
        start,
        conversation,
        lease,
        turnId,
        signal,
        (f) => {
          forged = f;
        },
      );
      return ran.kind === 'paused'
        ? { kind: 'paused', request: ran.paused.request }
        : { kind: 'result', result: ran.result, carried: ran.carried };
    } catch (error) {
      if (forged !== undefined) return { kind: 'forged', ...forged };
      return { kind: 'failed', error, retryable: !signal.aborted && retryable(error) };
    }
  }

  /** Calls the harness, retrying while it still finishes a previous call. */
  private async runOnHarness(
    endpoint: string,
    start: Parameters<HarnessConnector['runTurn']>[1],
    conversation: Conversation,
    lease: LeaseHandle,
    turnId: string,
    signal: AbortSignal,
    onForged: (forged: { reason: string; toolCallId: string }) => void,
  ): Promise<HarnessTurnEnd> {
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
              // Checked against the dispatched turn before anything is committed.
              const dispatched = { turn: this.turnAt(uid, turnId), conversation };
              const reason = checkStep({ ...dispatched, ...this.recording(uid) }, step);
              if (reason !== undefined) {
                const value = step.step?.value;
                onForged({
                  reason,
                  toolCallId: value && 'toolCallId' in value ? value.toolCallId : '',
                });
                throw new AppError('permission_denied', `step refused: ${reason}`);
              }
              const { outcome } = await this.commit(uid, lease, [stepEventOf(step)]);
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

  /** Encodes and appends one batch under `lease` (see {@link JournalViews.append}). */
  private commit(
    uid: string,
    lease: LeaseHandle,
    events: readonly PlannedEvent[],
  ): ReturnType<JournalViews['append']> {
    return this.views.append(uid, lease, events.map(encode));
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

function encode(planned: PlannedEvent): NewJournalEvent {
  return encodeAs(planned.kind, planned.payload);
}

function encodeAs<K extends EventKind>(
  kind: K,
  payload: Partial<EventPayloads[K]>,
): NewJournalEvent {
  const codec = payloadCodecs[kind];
  return { kind, payload: codec.encode(codec.fromPartial(payload)).finish() };
}

function vanished(turnId: string): AppError {
  return new AppError('internal', `turn ${turnId} vanished from the view`);
}

function retryable(error: unknown): boolean {
  return (
    !isAppError(error) || ['unavailable', 'deadline_exceeded', 'internal'].includes(error.code)
  );
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

/** A fresh W3C traceparent for the harness call. */
function traceparent(): string {
  const hex = randomUUID().replaceAll('-', '');
  return `00-${hex}-${hex.slice(0, 16)}-01`;
}
