/**
 * The status fields the turn code owns (docs/operator.md, "Status"): `turns.current` (and
 * `currentTurn`, its id) while a turn is in flight, `turns.quarantined` for a quarantined
 * turn, `lastTurnTime` when a turn starts, and `journal` (head, last signed root, the
 * journal keys) after every settled batch. These are facts; the turn code never decides a
 * condition or the phase itself. The reconciler carries them over (controller/report.ts)
 * and owns everything else. Pure: the coordinator's status writer writes the result.
 */
import type { JournalPublicKeyJson } from '../../common/journal-keys';
import { TurnState } from '../api/v1alpha1/conversation-values';
import { type Conversation } from '../api/v1alpha1/conversation-types';
import { type ConversationStatus, type JournalRollback } from '../api/v1alpha1/conversation-status';
import { conversationConditions, storedVerdict } from '../controller/conversation-conditions';

/** The journal position and integrity the status shows. */
export interface JournalMark {
  readonly head: number;
  /** Lowercase hex of the last signed root. */
  readonly lastSignedRoot: string;
  readonly keyId: string;
  /**
   * The journal keys to record (common/journal-keys.ts), base64; absent: the recorded ones
   * stay as they are.
   */
  readonly publicKeys?: readonly JournalPublicKeyJson[];
}

export type TurnStatusChange = (
  | { readonly kind: 'running'; readonly turnId: string }
  | { readonly kind: 'awaiting_approval'; readonly turnId: string; readonly requestId: string }
  | { readonly kind: 'awaiting_answer'; readonly turnId: string; readonly requestId: string }
  | {
      readonly kind: 'settled';
      readonly turnId: string;
      /** The agent the turn ended with, for a Conversation that names an Agent (`status.agent`). */
      readonly agent?: string;
    }
  | {
      readonly kind: 'ambiguous';
      readonly turnId: string;
      readonly toolCallId: string;
      readonly reason: string;
    }
  /** An admin resolved the quarantined turn: its quarantine goes, if it is the one shown. */
  | { readonly kind: 'resolved'; readonly turnId: string }
  /** The journal no longer holds `status.journal`; recorded once, with when it was found. */
  | { readonly kind: 'journal_rolled_back'; readonly rollback: Omit<JournalRollback, 'since'> }
  /** The journal holds `status.journal` again (the volume was restored): the rollback goes. */
  | { readonly kind: 'journal_restored' }
  /**
   * An admin accepted the rollback (a sealed `rollback_accepted`): the rollback goes, and the
   * journal mark that comes with it may be lower than the one recorded. No other change
   * moves `status.journal.head` back.
   */
  | { readonly kind: 'rollback_accepted' }
) & {
  /**
   * When the turn started: (re)opens the conversation and resets the idle timer. A change
   * that replaces a waiting one carries it on, so coalesced writes never lose it.
   */
  readonly lastTurnTime?: string;
};

/**
 * The next status after a turn event: the turn code's facts (`currentTurn`,
 * `turns.current`, `turns.quarantined`, `lastTurnTime`, `journal`) change, and `phase` and
 * the conditions are derived from them by the one derivation the reconciler also uses
 * (operator/controller/conversation-conditions.ts), with the sandbox as the reconciler last
 * reported it. So the reconciler's next pass finds the same conditions and writes nothing.
 */
export function applyTurnStatus(
  conversation: Conversation,
  change: TurnStatusChange,
  journal: JournalMark | undefined,
  now: string,
): ConversationStatus {
  const previous = conversation.status ?? {};
  const next: ConversationStatus = { ...previous };
  if (change.lastTurnTime !== undefined) {
    next.lastTurnTime = change.lastTurnTime;
    // The turn reopens a closed conversation; the reconciler sees it by this.
    delete next.closedTime;
  }
  const turns = { ...previous.turns };
  switch (change.kind) {
    case 'running':
    case 'awaiting_approval':
    case 'awaiting_answer':
      next.currentTurn = change.turnId;
      turns.current = {
        turnId: change.turnId,
        state: STATE_OF[change.kind],
        ...('requestId' in change ? { requestId: change.requestId } : {}),
      };
      break;
    case 'settled':
    case 'ambiguous':
      delete next.currentTurn;
      delete turns.current;
      if (change.kind === 'settled' && change.agent !== undefined) next.agent = change.agent;
      // A quarantine stays for an admin, whatever turns settle after it.
      if (change.kind === 'ambiguous') {
        turns.quarantined = {
          turnId: change.turnId,
          ...(change.toolCallId === '' ? {} : { toolCallId: change.toolCallId }),
          reason: change.reason,
          since: now,
        };
      }
      break;
    case 'resolved':
      if (turns.quarantined?.turnId === change.turnId) delete turns.quarantined;
      break;
    case 'journal_rolled_back':
    case 'journal_restored':
    case 'rollback_accepted':
      break;
  }
  if (Object.keys(turns).length === 0) delete next.turns;
  else next.turns = turns;
  next.journal = journalStatus(previous.journal, change, journal, now);
  if (next.journal === undefined) delete next.journal;
  return {
    ...next,
    ...conversationConditions({ ...conversation, status: next }, storedVerdict(previous), now),
  };
}

/**
 * `status.journal` after `change`. The checkpoint never moves back (a lower mark is a
 * replica's late write, or a journal that lost entries) except by an accepted rollback; a
 * found rollback is kept, with the time it was first found, until the journal is restored
 * or the rollback is accepted.
 */
function journalStatus(
  previous: ConversationStatus['journal'],
  change: TurnStatusChange,
  journal: JournalMark | undefined,
  now: string,
): ConversationStatus['journal'] {
  const accepted = change.kind === 'rollback_accepted';
  const taken =
    journal !== undefined &&
    (accepted || previous?.head === undefined || journal.head >= previous.head);
  const mark = taken
    ? { head: journal.head, lastSignedRoot: journal.lastSignedRoot, keyId: journal.keyId }
    : previous === undefined
      ? undefined
      : { head: previous.head, lastSignedRoot: previous.lastSignedRoot, keyId: previous.keyId };
  const publicKeys = (taken ? journal.publicKeys : undefined) ?? previous?.publicKeys;
  const rollback =
    change.kind === 'journal_rolled_back'
      ? (previous?.rollback ?? { ...change.rollback, since: now })
      : change.kind === 'journal_restored' || accepted
        ? undefined
        : previous?.rollback;
  if (mark === undefined && rollback === undefined) return undefined;
  return {
    ...mark,
    ...(publicKeys === undefined || publicKeys.length === 0
      ? {}
      : { publicKeys: publicKeys.map((k) => ({ keyId: k.keyId, publicKey: k.publicKey })) }),
    ...(rollback === undefined ? {} : { rollback }),
  };
}

const STATE_OF = {
  running: TurnState.Running,
  awaiting_approval: TurnState.AwaitingApproval,
  awaiting_answer: TurnState.AwaitingAnswer,
} as const;
