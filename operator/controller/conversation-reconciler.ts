/**
 * One reconcile pass of a Conversation (STYLE.md §2): observe → plan → act → report →
 * at most one status write. The work queue calls {@link ConversationReconciler.reconcile}
 * for one key at a time.
 */
import type { Logger } from 'pino';
import type { ConversationStatus } from '../api/v1alpha1/conversation-status';
import { AppError } from '../../common/errors';
import { LogComponent } from '../../common/log';
import { runActions, type ActHooks } from './act';
import type { Clock } from './clock';
import type { ConversationEvents } from './conversation-events';
import { DEFAULT_HARNESS_IMAGE } from './desired-pod';
import type { ConversationKube } from './kube-client';
import { observeConversation } from './observe';
import { ActionKind, planReconcile } from './plan';
import { isSameStatus, reportStatus } from './report';

/** Options of {@link ConversationReconciler}. */
export interface ConversationReconcilerOptions {
  readonly kube: ConversationKube;
  readonly clock: Clock;
  readonly logger: Logger;
  /** Image of the built-in harness pod spec (pod backend). @default DEFAULT_HARNESS_IMAGE */
  readonly harnessImage?: string;
  /** Recheck delay for a missing warm pool or template. @default BLOCKED_RECHECK_MS */
  readonly blockedRecheckMs?: number;
  /** Recheck delay when the claim and our read of its pool disagree. @default STALE_READ_RECHECK_MS */
  readonly staleReadRecheckMs?: number;
  /** Records the pass's lifecycle Events (`conversation-events.ts`). @default none */
  readonly events?: ConversationEvents;
  /** See ConversationControllerOptions.beforeFinalizerRemoved. @default nothing */
  readonly beforeFinalizerRemoved?: ActHooks['beforeFinalizerRemoved'];
}

/** What a pass asks of the queue. */
export interface ReconcileResult {
  /**
   * Run again after this many milliseconds: the soonest idle or retention deadline, or 0
   * after the finalizer pass.
   */
  readonly requeueAfterMs?: number;
  /** Whether the pass wrote status. */
  readonly wroteStatus: boolean;
}

// After these the pass ends without a status write: the finalizer pass returns early,
// and after the finalizer is dropped or the object deleted there may be nothing to write.
const ENDS_PASS: ReadonlySet<string> = new Set([
  ActionKind.AddFinalizer,
  ActionKind.RemoveFinalizer,
  ActionKind.DeleteConversation,
]);

/** Reconciles Conversations one pass at a time. */
export class ConversationReconciler {
  private readonly harnessImage: string;

  constructor(private readonly options: ConversationReconcilerOptions) {
    this.harnessImage = options.harnessImage ?? DEFAULT_HARNESS_IMAGE;
  }

  /**
   * One pass for `namespace/name`.
   *
   * @throws the read error, the first failed action's error (after its status is
   *   written), or a status-write error (a conflict when another writer moved the
   *   object): the caller backs off and retries.
   */
  async reconcile(namespace: string, name: string): Promise<ReconcileResult> {
    const { kube, clock } = this.options;
    const log = this.options.logger.child({
      component: LogComponent.Reconciler,
      namespace,
      conversation: name,
    });
    const snapshot = await observeConversation(kube, namespace, name, this.harnessImage);
    if (snapshot === undefined) {
      this.options.events?.forget(namespace, name);
      return { wroteStatus: false };
    }
    const now = clock.now();
    const { blockedRecheckMs, staleReadRecheckMs } = this.options;
    const plan = planReconcile(snapshot, now, {
      ...(blockedRecheckMs === undefined ? {} : { blockedRecheckMs }),
      ...(staleReadRecheckMs === undefined ? {} : { staleReadRecheckMs }),
    });
    const outcome = await runActions(kube, snapshot.conversation, plan.actions, log, {
      ...(this.options.beforeFinalizerRemoved === undefined
        ? {}
        : { beforeFinalizerRemoved: this.options.beforeFinalizerRemoved }),
    });

    let wroteStatus = false;
    let written: ConversationStatus | undefined;
    try {
      if (plan.writeStatus && !outcome.completed.some((a) => ENDS_PASS.has(a.kind))) {
        const next = reportStatus(snapshot, plan, outcome, now);
        if (!isSameStatus(next, snapshot.conversation.status)) {
          await kube.replaceStatus(snapshot.conversation, next);
          wroteStatus = true;
          written = next;
          log.debug({ phase: next.phase }, 'status written');
        }
      }
    } finally {
      // Also after a failed status write: the actions that completed did happen. Events
      // are best effort; they never fail a pass.
      try {
        this.options.events?.afterPass({
          conversation: snapshot.conversation,
          completed: outcome.completed,
          ...(written === undefined ? {} : { written }),
          ...(outcome.failed === undefined ? {} : { failed: outcome.failed }),
        });
      } catch (err: unknown) {
        log.warn({ err: err instanceof Error ? err.message : String(err) }, 'events not recorded');
      }
    }
    if (outcome.failed !== undefined) {
      throw new AppError(
        'unavailable',
        `Conversation ${namespace}/${name}: ${outcome.failed.action.kind} failed: ${outcome.failed.message}`,
        { details: { namespace, conversation: name }, cause: outcome.error },
      );
    }
    // The finalizer pass ends early; the next pass follows at once rather than on the
    // watch event of our own patch.
    const requeueAfterMs = outcome.completed.some((a) => a.kind === ActionKind.AddFinalizer)
      ? 0
      : plan.requeueAfterMs;
    return { wroteStatus, ...(requeueAfterMs === undefined ? {} : { requeueAfterMs }) };
  }
}
