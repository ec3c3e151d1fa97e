/**
 * What every part of the turn plan shares (docs/turns.md lists the parts): the planned
 * event, the lease a turn is claimed under, a typed refusal, and the `turn_dispatched`
 * and attribution every batch records. Pure.
 */
import type { ApprovalScope } from '../../common/approval-bytes';
import type { AppError } from '../../common/errors';
import { EventKind, type EventPayloads } from '../../common/event-kinds';
import type { Attribution } from '../../proto/gen/polychrome/events/v1/events';
import type { Conversation } from '../api/v1alpha1/conversation-types';
import { nextAttempt } from './turn-state';
import { type TurnView } from './journal-view-types';
import type { HistoryPlan } from './history-window';
import type { Caller } from './turn-service';

/** The reply when a turn cannot be settled any other way. */
export const FAILED_TURN_TEXT =
  'Sorry, I could not finish that. Please try again or rephrase your message.';

/** Reserved tools the harness handles itself (harness/turn/reserved-tools.ts). */
export const ASK_USER_TOOL = '__ask_user';
export const HANDOFF_TOOL = '__handoff_to';
/** The reserved tool that asks another agent to do a task (docs/turns.md, "Delegation"). */
export const DELEGATE_TOOL = '__delegate_to';

/** One event to commit, before encoding. */
export type PlannedEvent = {
  readonly [K in EventKind]: { readonly kind: K; readonly payload: Partial<EventPayloads[K]> };
}[EventKind];

/** The lease a turn is claimed under (docs/turns.md, "Claim"). */
export interface ClaimedLease {
  readonly holder: string;
  readonly fencingToken: number;
}

/** A decision not to act, made before anything is committed. */
export interface Refusal {
  readonly kind: 'refuse';
  readonly error: AppError;
}

export function refuse(error: AppError): Refusal {
  return { kind: 'refuse', error };
}

export function planned<K extends EventKind>(
  kind: K,
  payload: Partial<EventPayloads[K]>,
): PlannedEvent {
  // TypeScript relates an object to a discriminated union by its discriminant for at most
  // 25 members; there are more kinds, so the pairing of kind and payload is asserted here
  // (the signature already ties them).
  return { kind, payload } as PlannedEvent;
}

/** Who is acting and who takes part, recorded with every batch. */
export function attributionOf(caller: Caller, conversation: Conversation): Attribution {
  const participants = new Set<string>();
  if (conversation.spec.owner !== undefined) participants.add(conversation.spec.owner);
  for (const p of conversation.spec.participants ?? []) participants.add(p);
  return {
    caller: caller.identity,
    participants: [...participants].sort(),
    persona: caller.personaId,
    session: caller.sessionId,
  };
}

/** The next `turn_dispatched` of an existing turn: attempt + 1, the original message. */
export function dispatchEvent(
  turn: TurnView,
  lease: ClaimedLease,
  attribution: Attribution | undefined,
  nowMs: number,
  history: HistoryPlan,
): PlannedEvent {
  const { turnId, messagePosition } = turn;
  const agentRosterSha256 = rosterOfTurn(turn);
  return dispatchOf(
    { turnId, attempt: nextAttempt(turn), messagePosition, ...history, agentRosterSha256 },
    lease,
    attribution,
    nowMs,
  );
}

/**
 * A `turn_dispatched`: the one way every batch builds it, batch one's first attempt
 * ({@link dispatchEvent} for the attempts after it).
 */
export function dispatchOf(
  attempt: {
    readonly turnId: string;
    readonly attempt: number;
    readonly messagePosition: number;
    /** history-window.ts `nextHistory`. */
    readonly historyFrom: number;
    readonly summaryPosition: number;
    /** An interrupted turn run again (plan-resume.ts): `resumed` on the event. */
    readonly resumed?: boolean;
    /** The turn's `agent_roster` (lowercase hex): its first dispatch's, on every attempt. */
    readonly agentRosterSha256?: string;
  },
  lease: ClaimedLease,
  attribution: Attribution | undefined,
  nowMs: number,
): PlannedEvent {
  return planned(EventKind.TurnDispatched, {
    turnId: attempt.turnId,
    attempt: attempt.attempt,
    leaseHolder: lease.holder,
    fencingToken: lease.fencingToken,
    ...(attribution === undefined ? {} : { attribution }),
    dispatchedAtMs: nowMs,
    messagePosition: attempt.messagePosition,
    historyFrom: attempt.historyFrom,
    ...(attempt.summaryPosition === 0 ? {} : { summaryPosition: attempt.summaryPosition }),
    ...(attempt.resumed === true ? { resumed: true } : {}),
    ...(attempt.agentRosterSha256 === undefined || attempt.agentRosterSha256 === ''
      ? {}
      : { agentRosterSha256: Buffer.from(attempt.agentRosterSha256, 'hex') }),
  });
}

/**
 * The roster a turn runs under (agent-roster.ts): its first dispatch's, so an Agent changed
 * after the turn began affects later turns only; '' for an inline agent.
 */
export function rosterOfTurn(turn: TurnView): string {
  return turn.dispatches[0]?.agentRosterSha256 ?? '';
}

export function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

export function hex(bytes: Uint8Array): string {
  return Buffer.from(bytes).toString('hex');
}

/**
 * A v2 approval signature (docs/approvals.md): the key id, the signature and the scope it
 * binds, recorded on the `approval_response` as signed.
 */
export interface ApprovalSignature {
  readonly keyId: string;
  readonly signature: Uint8Array;
  readonly scope: ApprovalScope;
}

/** The `approval_response` fields of a signature. */
export function approvalSignatureFields(signed: ApprovalSignature): {
  keyId: string;
  signature: Buffer;
  conversation: string;
  expiresAtMs: number;
  approvalId: string;
} {
  return {
    keyId: signed.keyId,
    signature: Buffer.from(signed.signature),
    conversation: signed.scope.conversation,
    expiresAtMs: signed.scope.expiresAtMs,
    approvalId: signed.scope.approvalId,
  };
}

/** What the approval signer signs (docs/approvals.md, "Signed message"). */
export interface ApprovalToSign {
  readonly requestId: string;
  readonly toolName: string;
  readonly argsSha256: Uint8Array;
  readonly decision: 'approved' | 'denied';
  readonly turnId: string;
}
