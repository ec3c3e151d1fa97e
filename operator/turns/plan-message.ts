/**
 * A posted message (docs/turns.md "One message", 3 and 4): retry, recovery, expiry of a
 * pending approval, the pause that blocks new messages, directives and batch one. Pure.
 */
import { AppError } from '../../common/errors';
import { EventKind } from '../../common/event-kinds';
import { Role as CallerRole } from '../../common/persona-roles';
import { ConversationPhase } from '../api/v1alpha1/conditions';
import { type Conversation } from '../api/v1alpha1/conversation-types';
import { pendingTurn, turnState } from './turn-state';
import { recoveryOf } from './plan-resume';
import { nextHistory } from './history-window';
import { isMessageErased } from './erased-entries';
import { type JournalView, type TurnView } from './journal-view-types';
import {
  attributionOf,
  dispatchOf,
  planned,
  refuse,
  type ClaimedLease,
  type PlannedEvent,
  type Refusal,
} from './plan-common';
import { dueExpiry, type ApprovalDeadline } from './plan-expiry';
import type { Caller, PostMessage } from './turn-service';
import type { RecordedRoster } from './agent-roster';

export interface MessageInput {
  readonly view: JournalView;
  readonly conversation: Conversation;
  readonly caller: Caller;
  readonly request: PostMessage;
  /** `turnIdFor(conversation, idempotency key)`. */
  readonly turnId: string;
  readonly lease: ClaimedLease;
  readonly nowMs: number;
  /** How long a pending approval waits for an answer (plan-expiry.ts). */
  readonly approvalTtlMs: number;
  /** The history budget where the agent sets none (history-window.ts). */
  readonly deploymentHistoryTokens: number;
  /**
   * Whether the identity the directive names as required approver belongs to an admin
   * persona (the shell asks the records). Unset when the directive names none.
   */
  readonly approverIsAdmin?: boolean;
  /**
   * For a Conversation that names an Agent: the roster resolved from the caches now
   * (agent-roster.ts), or why it could not be. A new turn runs under it; a turn that
   * exists keeps its own. Unset for an inline agent.
   */
  readonly roster?: RecordedRoster | { readonly refused: AppError };
}

/** What to do next for a posted message; the shell repeats until `reply` or `dispatch`. */
export type MessageStep =
  | Refusal
  /** The turn exists and has settled or paused: answer with it. */
  | { readonly kind: 'reply'; readonly turn: TurnView }
  /** Expire first: the pending approval ran out of time; sign and commit its expiry, run it, then ask again. */
  | { readonly kind: 'expire'; readonly due: ApprovalDeadline }
  /** Recover first: dispatch this orphan again (one `turn_dispatched`), run it, then ask again. */
  | { readonly kind: 'recover'; readonly turn: TurnView; readonly events: readonly PlannedEvent[] }
  /** Batch one of a new turn; then run it. */
  | {
      readonly kind: 'dispatch';
      readonly turnId: string;
      readonly events: readonly PlannedEvent[];
    };

/**
 * The next step for a posted message (docs/turns.md "One message", 3 and 4), in order:
 * refuse a directive the caller may not send; an existing turn id is an exact retry (other
 * text: conflict) and gets that turn, after recovering the orphans before it; an approval
 * whose time ran out expires first (whoever posts: the expiry is due either way); otherwise
 * orphans are recovered first, a paused turn blocks new messages, and batch one opens the
 * new turn at the view's head.
 */
export function planMessage(input: MessageInput): MessageStep {
  const { view, request, turnId } = input;
  const directiveRefusal = checkDirective(input);
  if (directiveRefusal !== undefined) return directiveRefusal;
  const existing = view.turnsById.get(turnId);
  // The turn id is derived from the key (turn-ids.ts), so a retry finds its turn even after
  // its message was erased; the text it would be compared with is gone, so it is not.
  if (existing !== undefined && !isMessageErased(existing) && existing.text !== request.text) {
    return refuse(
      new AppError(
        'conflict',
        `idempotency key ${request.idempotencyKey} was used for another message (turn ${existing.turnId}); use a new key for a new message`,
        { details: { turnId: existing.turnId } },
      ),
    );
  }
  const due = dueExpiry(view, input.nowMs, input.approvalTtlMs);
  if (due !== undefined) return { kind: 'expire', due };
  if (existing !== undefined && turnState(existing) !== 'orphan') {
    return { kind: 'reply', turn: existing };
  }
  const recovery = recoveryOf(input);
  if (recovery !== undefined) return { kind: 'recover', ...recovery };
  if (existing !== undefined) return { kind: 'reply', turn: existing };
  const pending = pendingTurn(view);
  if (pending !== undefined) {
    const state = turnState(pending);
    return refuse(
      new AppError(
        'conflict',
        `turn ${pending.turnId} waits for ${state === 'awaiting_approval' ? 'an approval' : 'an answer'}; answer it before sending a new message`,
        { details: { turnId: pending.turnId, conversationId: request.conversationId } },
      ),
    );
  }
  const { roster } = input;
  if (roster !== undefined && 'refused' in roster) return refuse(roster.refused);
  return { kind: 'dispatch', turnId, events: batchOne(input, roster) };
}

/**
 * Directives only narrow policy, and only edges send them (docs/api.md "Directives"): a
 * caller without the edge role gets 403; a required approver must be an admin's identity,
 * so nobody can make themselves, or someone who does not exist, the approver.
 */
function checkDirective(input: MessageInput): Refusal | undefined {
  const directive = input.request.directive;
  if (directive === undefined) return undefined;
  if (directive.maxSteps === undefined && directive.requiredApprover === undefined) {
    return undefined;
  }
  const { caller } = input;
  if (!caller.roles.includes(CallerRole.Edge)) {
    return refuse(
      new AppError(
        'permission_denied',
        `${caller.identity} may not send a directive: only a caller with the edge role may; send the message without "directive"`,
        { details: { field: 'directive' } },
      ),
    );
  }
  const approver = directive.requiredApprover;
  if (approver !== undefined && input.approverIsAdmin !== true) {
    return refuse(
      new AppError(
        'permission_denied',
        `directive.requiredApprover ${approver} is not an admin's identity: a directive may only name an approver who could approve anyway (an admin); name an admin or leave it out`,
        { details: { field: 'directive.requiredApprover' } },
      ),
    );
  }
  return undefined;
}

function batchOne(input: MessageInput, roster: RecordedRoster | undefined): PlannedEvent[] {
  const { request, turnId, nowMs, conversation } = input;
  const attribution = attributionOf(input.caller, conversation);
  const events: PlannedEvent[] = [
    planned(EventKind.MessageReceived, {
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
      planned(EventKind.IngressDirective, {
        turnId,
        maxSteps: directive.maxSteps ?? 0,
        requiredApprover: directive.requiredApprover ?? '',
      }),
    );
  }
  if (conversation.status?.phase === ConversationPhase.Closed) {
    events.push(planned(EventKind.ConversationReopened, { reopenedAtMs: nowMs, attribution }));
  }
  // The message is the batch's first event, so it lands at the head.
  const messagePosition = input.view.head;
  const history = nextHistory(
    input.view,
    conversation,
    messagePosition,
    input.deploymentHistoryTokens,
  );
  // The roster is recorded when the journal's newest differs, like an agent_config.
  if (roster !== undefined && input.view.newestAgentRoster?.sha256 !== roster.sha256) {
    events.push(
      planned(EventKind.AgentRoster, {
        sha256: Buffer.from(roster.sha256, 'hex'),
        rosterJson: roster.json,
      }),
    );
  }
  const agentRosterSha256 = roster?.sha256 ?? '';
  const first = { turnId, attempt: 1, messagePosition, ...history, agentRosterSha256 };
  events.push(dispatchOf(first, input.lease, attribution, nowMs));
  return events;
}
