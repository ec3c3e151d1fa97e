/**
 * The one derivation of a Conversation's `phase` and conditions (docs/operator.md, "Status").
 * Its inputs are facts: what the reconciler observed of the sandbox and lifecycle (a
 * {@link SandboxVerdict}), the spec, and what the turn code wrote (`status.turns`,
 * `status.currentTurn`). Both writers call it: the reconciler with the verdict of the pass
 * it just made (report.ts), the turn code's status writer with the verdict the stored
 * `Ready` condition records ({@link storedVerdict}). One function and one rule table, so
 * the two cannot compute different conditions for the same facts, and the reconciler's
 * next pass after a turn write finds nothing to change.
 */
import type {
  Condition,
  ConversationStatus,
  JournalRollback,
} from '../api/v1alpha1/conversation-status';
import type { Conversation } from '../api/v1alpha1/conversation-types';
import type { DegradedReason } from '../api/v1alpha1/conditions';
import { ConditionReason, ConditionType, ConversationPhase } from '../api/v1alpha1/conditions';
import { TurnState } from '../api/v1alpha1/conversation-values';
import type { Lifecycle } from './plan';
import { readIdle, readRetention } from './idle-and-retention';

/** A condition before it is stamped with a generation and transition time. */
export interface ConditionInput {
  readonly type: ConditionType;
  readonly status: 'True' | 'False' | 'Unknown';
  readonly reason: ConditionReason;
  readonly message: string;
}

/** What the reconciler made of the sandbox and the conversation's life. */
export interface SandboxVerdict {
  readonly lifecycle: Exclude<Lifecycle, 'closing'>;
  /** The `Ready` condition: the sandbox's state, or Closed / Terminating. */
  readonly ready: ConditionInput;
}

/** The turn code's facts, read from `status`. */
export interface TurnFacts {
  readonly current?: {
    readonly turnId: string;
    readonly state: TurnState;
    readonly requestId?: string;
  };
  readonly quarantined?: {
    readonly turnId: string;
    readonly toolCallId?: string;
    readonly reason: string;
  };
}

/** Ready reasons that mean the sandbox is blocked on something a person must fix. */
const BLOCKED_REASONS: ReadonlySet<string> = new Set([
  ConditionReason.WarmPoolMissing,
  ConditionReason.SandboxTemplateMissing,
  ConditionReason.SandboxFailed,
  ConditionReason.RuntimeClassMissing,
  ConditionReason.SpecFieldUnsupported,
]);

const KNOWN_REASONS: ReadonlySet<string> = new Set(Object.values(ConditionReason));

/**
 * The turn facts of a status. An object written by an operator older than `status.turns`
 * has only `currentTurn`: that turn counts as running.
 */
export function turnFactsOf(status: ConversationStatus | undefined): TurnFacts {
  const turns = status?.turns;
  const legacy = status?.currentTurn;
  const current =
    turns?.current !== undefined
      ? {
          turnId: turns.current.turnId,
          state: turns.current.state,
          ...(turns.current.requestId === undefined ? {} : { requestId: turns.current.requestId }),
        }
      : legacy !== undefined && legacy !== ''
        ? { turnId: legacy, state: TurnState.Running }
        : undefined;
  const q = turns?.quarantined;
  return {
    ...(current === undefined ? {} : { current }),
    ...(q === undefined
      ? {}
      : {
          quarantined: {
            turnId: q.turnId,
            reason: q.reason,
            ...(q.toolCallId === undefined || q.toolCallId === ''
              ? {}
              : { toolCallId: q.toolCallId }),
          },
        }),
  };
}

/**
 * The verdict the stored `Ready` condition records: what the reconciler reported on its
 * last write. Before the reconciler has written anything, Ready is Unknown.
 */
export function storedVerdict(status: ConversationStatus | undefined): SandboxVerdict {
  const ready = status?.conditions?.find((c) => c.type === ConditionType.Ready);
  if (ready === undefined || !KNOWN_REASONS.has(ready.reason)) {
    return {
      lifecycle: 'open',
      ready: {
        type: ConditionType.Ready,
        status: 'Unknown',
        reason: ConditionReason.Reconciling,
        message: 'the operator has not observed the sandbox yet',
      },
    };
  }
  const reason = ready.reason as ConditionReason;
  return {
    lifecycle:
      reason === ConditionReason.Terminating
        ? 'deleting'
        : reason === ConditionReason.Closed
          ? 'closed'
          : 'open',
    ready: { type: ConditionType.Ready, status: ready.status, reason, message: ready.message },
  };
}

/**
 * `Progressing` from the verdict and the turn in flight. The rule table:
 *
 * | facts | Progressing |
 * |---|---|
 * | being deleted | True Terminating |
 * | a turn in flight | True TurnRunning / AwaitingApproval / AwaitingAnswer |
 * | closed | False Closed |
 * | sandbox blocked (warm pool, template, failed, RuntimeClass) | False, Ready's reason |
 * | sandbox ready | False Idle |
 * | otherwise (sandbox being made, or not observed yet) | True, Ready's reason |
 */
export function progressingOf(verdict: SandboxVerdict, turn: TurnFacts): ConditionInput {
  const { ready } = verdict;
  const current = turn.current;
  if (verdict.lifecycle === 'deleting') return progressing('True', ready.reason, ready.message);
  if (current !== undefined) {
    switch (current.state) {
      case TurnState.Running:
        return progressing(
          'True',
          ConditionReason.TurnRunning,
          `turn ${current.turnId} is running`,
        );
      case TurnState.AwaitingApproval:
        return progressing(
          'True',
          ConditionReason.AwaitingApproval,
          `turn ${current.turnId} waits for approval ${current.requestId ?? ''}: answer it with POST .../approvals/${current.requestId ?? ''}`,
        );
      case TurnState.AwaitingAnswer:
        return progressing(
          'True',
          ConditionReason.AwaitingAnswer,
          `turn ${current.turnId} waits for an answer to question ${current.requestId ?? ''}`,
        );
    }
  }
  if (verdict.lifecycle === 'closed') return progressing('False', ready.reason, ready.message);
  if (BLOCKED_REASONS.has(ready.reason)) return progressing('False', ready.reason, ready.message);
  if (ready.status === 'True') {
    return progressing('False', ConditionReason.Idle, 'no turn in flight');
  }
  return progressing('True', ready.reason, ready.message);
}

/**
 * Every cause for `Degraded` True, most urgent first: a quarantined turn, a rolled-back
 * journal (`status.journal.rollback`), a blocked sandbox
 * (open conversations only), a `spec.retention` or `spec.idleTimeout` that cannot be used.
 */
export function degradedCausesOf(
  conversation: Conversation,
  verdict: SandboxVerdict,
  turn: TurnFacts,
): (ConditionInput & { readonly reason: DegradedReason })[] {
  // Typed with DegradedReason so a new cause cannot skip the Argo CD health test cases.
  const causes: (ConditionInput & { readonly reason: DegradedReason })[] = [];
  const q = turn.quarantined;
  if (q !== undefined) {
    causes.push({
      type: ConditionType.Degraded,
      status: 'True',
      reason: ConditionReason.TurnAmbiguous,
      message:
        q.toolCallId === undefined
          ? `turn ${q.turnId} is quarantined (${q.reason}); an admin must check it and resolve it: polychrome conversation resolve ID ${q.turnId} --did-not-run --actor A`
          : `turn ${q.turnId} is quarantined: the outcome of side-effecting tool call ${q.toolCallId} is unknown (${q.reason}); an admin must check whether it ran and resolve it: polychrome conversation resolve ID ${q.turnId} --ran [--result FILE] | --did-not-run --actor A`,
    });
  }
  const rollback = conversation.status?.journal?.rollback;
  if (rollback !== undefined) {
    causes.push({
      type: ConditionType.Degraded,
      status: 'True',
      reason: ConditionReason.JournalRolledBack,
      message: rollbackMessage(conversation.metadata.uid ?? '', rollback),
    });
  }
  const reason = verdict.ready.reason;
  if (verdict.lifecycle === 'open' && BLOCKED_REASONS.has(reason)) {
    causes.push({
      type: ConditionType.Degraded,
      status: 'True',
      reason: reason as DegradedReason,
      message: verdict.ready.message,
    });
  }
  const retention = readRetention(conversation);
  if (retention.error !== undefined) {
    causes.push({
      type: ConditionType.Degraded,
      status: 'True',
      reason: ConditionReason.RetentionInvalid,
      message: `spec.retention ${JSON.stringify(retention.value ?? '')} cannot be used (${retention.error}); the object will not be deleted automatically: set spec.retention to a duration such as 24h`,
    });
  }
  const idle = readIdle(conversation);
  if (idle.error !== undefined) {
    causes.push({
      type: ConditionType.Degraded,
      status: 'True',
      reason: ConditionReason.IdleTimeoutInvalid,
      message: `spec.idleTimeout ${JSON.stringify(idle.value ?? '')} cannot be used (${idle.error}); idle closing is disabled: set a duration such as 30m, or 0s to never close`,
    });
  }
  return causes;
}

/**
 * `phase`, a display value, from the same facts. First that applies: Terminating,
 * Degraded, the turn's state (Running, AwaitingApproval, AwaitingAnswer), Closed, Ready,
 * Pending.
 */
export function phaseOf(
  verdict: SandboxVerdict,
  turn: TurnFacts,
  degraded: boolean,
): ConversationPhase {
  if (verdict.lifecycle === 'deleting') return ConversationPhase.Terminating;
  if (degraded) return ConversationPhase.Degraded;
  switch (turn.current?.state) {
    case TurnState.Running:
      return ConversationPhase.Running;
    case TurnState.AwaitingApproval:
      return ConversationPhase.AwaitingApproval;
    case TurnState.AwaitingAnswer:
      return ConversationPhase.AwaitingAnswer;
    case undefined:
      break;
  }
  if (verdict.lifecycle === 'closed') return ConversationPhase.Closed;
  return verdict.ready.status === 'True' ? ConversationPhase.Ready : ConversationPhase.Pending;
}

/**
 * `phase` and `conditions` of `conversation` (whose `status` already holds the turn
 * code's facts) for `verdict`, at `now` (RFC 3339). A condition keeps its
 * `lastTransitionTime` while its status does not change and is stamped with
 * `metadata.generation`; conditions of other types are kept after ours.
 */
export function conversationConditions(
  conversation: Conversation,
  verdict: SandboxVerdict,
  now: string,
): Pick<ConversationStatus, 'phase' | 'conditions'> {
  const status = conversation.status;
  const generation = conversation.metadata.generation ?? 0;
  const turn = turnFactsOf(status);
  const causes = degradedCausesOf(conversation, verdict, turn);
  const first = causes[0];
  const degraded: ConditionInput =
    first === undefined
      ? {
          type: ConditionType.Degraded,
          status: 'False',
          reason: ConditionReason.Healthy,
          message: 'nothing needs attention',
        }
      : { ...first, message: causes.map((c) => c.message).join('; ') };

  const previous = status?.conditions ?? [];
  const stamp = (input: ConditionInput): Condition => {
    const old = previous.find((c) => c.type === input.type);
    return {
      type: input.type,
      status: input.status,
      observedGeneration: generation,
      lastTransitionTime:
        old !== undefined && old.status === input.status ? old.lastTransitionTime : now,
      reason: input.reason,
      message: input.message,
    };
  };
  const ours = new Set<string>([
    ConditionType.Ready,
    ConditionType.Progressing,
    ConditionType.Degraded,
  ]);
  return {
    phase: phaseOf(verdict, turn, first !== undefined),
    conditions: [
      stamp(verdict.ready),
      stamp(progressingOf(verdict, turn)),
      stamp(degraded),
      ...previous.filter((c) => !ours.has(c.type)),
    ],
  };
}

function progressing(
  status: 'True' | 'False',
  reason: ConditionReason,
  message: string,
): ConditionInput {
  return { type: ConditionType.Progressing, status, reason, message };
}

/**
 * The one sentence that says what a rollback is and what to do: the refused request's
 * error (operator/turns/journal-checkpoint.ts), the Degraded condition and its Event.
 */
export function rollbackMessage(
  conversationId: string,
  rollback: Omit<JournalRollback, 'since'>,
): string {
  const { checkpointHead, checkpointRoot, journalHead, journalRoot } = rollback;
  const found =
    journalHead < checkpointHead
      ? `the state plane holds ${String(journalHead)} entries, but status.journal records ${String(checkpointHead)}`
      : journalRoot === undefined
        ? `the state plane holds ${String(journalHead)} entries, but its entry ${String(checkpointHead - 1)} is not the signed root status.journal records at head ${String(checkpointHead)}`
        : `the state plane holds ${String(journalHead)} entries, but its signed root at head ${String(checkpointHead)} is ${journalRoot}, not ${checkpointRoot}`;
  return (
    `the journal of conversation ${conversationId} was rolled back or rewritten: ${found} ` +
    `(last signed root ${checkpointRoot}); no turn is appended until it is restored. ` +
    `Restore the state volume from a backup that holds entry ${String(checkpointHead - 1)}, ` +
    `or, to go on from the journal as it is and record the loss, an admin runs ` +
    `polychrome conversation accept-rollback ${conversationId} --head ${String(journalHead)} --reason TEXT`
  );
}
