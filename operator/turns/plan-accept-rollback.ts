/**
 * An admin accepts a rolled-back journal (docs/turns.md, "A rolled-back journal"). Pure.
 *
 * The state plane holds less than `status.journal` recorded (a state volume restored from
 * an older copy, say), so the control plane appends nothing (journal-checkpoint.ts). An
 * admin may restore the volume, or decide to go on from the journal as it is: that
 * decision is one `rollback_accepted` event, sealed by the batch's signed root, that keeps
 * the lost checkpoint (head, root, key), the head the journal went on from, who decided,
 * and why. Its batch's signed root becomes the new checkpoint. Nothing else is committed.
 */
import { AppError } from '../../common/errors';
import { EventKind } from '../../common/event-kinds';
import type { Conversation } from '../api/v1alpha1/conversation-types';
import { ForensicAction, forensicRefusal } from './forensic-access';
import { acceptedAsLost, checkpointOf, type CheckpointVerdict } from './journal-checkpoint';
import type { JournalView } from './journal-view-types';
import { planned, refuse, type PlannedEvent, type Refusal } from './plan-common';
import type { AcceptRollback, Caller } from './turn-service';

/** The longest reason recorded, in characters. */
export const MAX_ROLLBACK_REASON_LENGTH = 4096;

export interface AcceptRollbackInput {
  readonly view: JournalView;
  readonly conversation: Conversation | undefined;
  readonly caller: Caller;
  readonly request: AcceptRollback;
  /** The journal as the state plane holds it, against `status.journal`. */
  readonly verdict: CheckpointVerdict;
  readonly nowMs: number;
}

export type AcceptRollbackPlan =
  | Refusal
  | {
      readonly kind: 'accept';
      readonly events: readonly PlannedEvent[];
      readonly lost: { readonly head: number; readonly root: string };
    };

/** Who may accept: an admin acting as one of their own identities (the forensic rule). */
export function authorizeAcceptRollback(
  caller: Caller,
  request: AcceptRollback,
  conversation: Conversation | undefined,
): Refusal | undefined {
  const error = forensicRefusal(
    caller,
    request.conversationId,
    conversation,
    ForensicAction.AcceptRollback,
    request.actor,
  );
  return error === undefined ? undefined : refuse(error);
}

/**
 * The decision's batch, or why not (nothing is committed on refusal), in order: who may
 * (404, 403); a reason (400); the journal must in fact be rolled back (409: a journal that
 * holds its checkpoint has nothing to accept), and not already accepted (409: the journal
 * records a decision on this very checkpoint, and the status has not caught up with it
 * yet); and the head the admin names must be the journal's head now (409), so a decision
 * taken on one state never lands on another.
 */
export function planAcceptRollback(input: AcceptRollbackInput): AcceptRollbackPlan {
  const { view, caller, request } = input;
  const denied = authorizeAcceptRollback(caller, request, input.conversation);
  if (denied !== undefined) return denied;
  const reason = request.reason.trim();
  if (reason === '' || reason.length > MAX_ROLLBACK_REASON_LENGTH) {
    return refuse(
      new AppError(
        'invalid_argument',
        `reason is required, at most ${String(MAX_ROLLBACK_REASON_LENGTH)} characters: say why the lost entries are accepted (it is recorded in the journal)`,
        { details: { field: 'reason' } },
      ),
    );
  }
  const lost = rollbackToAccept(input);
  if (lost.kind === 'refuse') return lost;
  const { rollback } = lost;
  const keyId = input.conversation?.status?.journal?.keyId ?? '';
  return {
    kind: 'accept',
    lost: { head: rollback.checkpointHead, root: rollback.checkpointRoot },
    events: [
      planned(EventKind.RollbackAccepted, {
        checkpointHead: rollback.checkpointHead,
        checkpointRoot: Buffer.from(rollback.checkpointRoot, 'hex'),
        checkpointKeyId: keyId,
        journalHead: view.head,
        journalRoot:
          rollback.journalRoot === undefined
            ? Buffer.alloc(0)
            : Buffer.from(rollback.journalRoot, 'hex'),
        actor: request.actor,
        caller: caller.identity,
        session: caller.sessionId,
        reason,
        acceptedAtMs: input.nowMs,
      }),
    ],
  };
}

/**
 * The rollback to decide on, or why there is none: the journal holds its checkpoint, a
 * decision on this checkpoint is already in the journal, or the journal is not at the head
 * named.
 */
function rollbackToAccept(
  input: AcceptRollbackInput,
): Refusal | Extract<CheckpointVerdict, { kind: 'rolled_back' }> {
  const { view, request, verdict } = input;
  if (verdict.kind === 'holds') {
    return refuse(
      new AppError(
        'conflict',
        `the journal of conversation ${request.conversationId} holds its checkpoint (status.journal, head ${String(input.conversation?.status?.journal?.head ?? 0)}): there is no rollback to accept`,
        { details: { conversationId: request.conversationId, head: view.head } },
      ),
    );
  }
  const checkpoint =
    input.conversation === undefined ? undefined : checkpointOf(input.conversation);
  if (acceptedAsLost(checkpoint, view.acceptedLosses)) {
    return refuse(
      new AppError(
        'conflict',
        `the rollback of conversation ${request.conversationId} from head ${String(checkpoint?.head ?? 0)} is already accepted in its journal; status.journal catches up with that decision, and there is nothing left to accept`,
        { details: { conversationId: request.conversationId, head: view.head } },
      ),
    );
  }
  if (request.head !== view.head) {
    return refuse(
      new AppError(
        'conflict',
        `the journal of conversation ${request.conversationId} has ${String(view.head)} entries, not the ${String(request.head)} named: look again (status.journal.rollback) and accept the head it holds now`,
        { details: { conversationId: request.conversationId, head: view.head, field: 'head' } },
      ),
    );
  }
  return verdict;
}
