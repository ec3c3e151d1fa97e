/**
 * Approvals that expire (docs/turns.md, "Expiry"): a pending approval unanswered for the
 * approval time to live is settled as a denial the control plane signs, so the turn goes
 * on and the model sees a denied call. Pure: the shell passes the clock and the TTL.
 */
import { approvalArgsSha256 } from '../../common/approval-bytes';
import { EventKind } from '../../common/event-kinds';
import {
  ApprovalDecision as ProtoDecision,
  type ApprovalRequest,
} from '../../proto/gen/polychrome/events/v1/events';
import { pendingRequest } from './turn-state';
import { type JournalView, type TurnView } from './journal-view-types';
import {
  dispatchEvent,
  planned,
  approvalSignatureFields,
  type ApprovalSignature,
  type ApprovalToSign,
  type ClaimedLease,
  type PlannedEvent,
} from './plan-common';

/** How long an approval waits for an answer unless configured. */
export const DEFAULT_APPROVAL_TTL_MS = 24 * 60 * 60 * 1000;

/**
 * Who the expiry's signed denial names as answerer (`answered_by`). Not an identity (it
 * has spaces, identities do not), so nobody can be mistaken for it.
 */
export const EXPIRY_ANSWERER = 'polychrome (approval expired)';

/** A pending approval and when it expires. */
export interface ApprovalDeadline {
  readonly turn: TurnView;
  readonly request: ApprovalRequest;
  /** When it was committed (its `requested_at_ms`, else the dispatch it paused). */
  readonly requestedAtMs: number;
  readonly expiresAtMs: number;
}

/**
 * The approval the conversation waits on and its deadline, if it waits on one. A request
 * committed before `requested_at_ms` was recorded counts from the dispatch that paused.
 */
export function approvalDeadline(view: JournalView, ttlMs: number): ApprovalDeadline | undefined {
  for (const turn of view.openTurns) {
    const pending = pendingRequest(turn);
    if (pending?.type !== 'approval') continue;
    const requestedAtMs =
      pending.request.requestedAtMs > 0
        ? pending.request.requestedAtMs
        : (turn.dispatches.at(-1)?.dispatchedAtMs ?? 0);
    return { turn, request: pending.request, requestedAtMs, expiresAtMs: requestedAtMs + ttlMs };
  }
  return undefined;
}

/** The pending approval that has expired at `nowMs`, if any. */
export function dueExpiry(
  view: JournalView,
  nowMs: number,
  ttlMs: number,
): ApprovalDeadline | undefined {
  const deadline = approvalDeadline(view, ttlMs);
  return deadline !== undefined && deadline.expiresAtMs <= nowMs ? deadline : undefined;
}

/** The denial the shell signs for an expired approval. */
export function expiryToSign(due: ApprovalDeadline): ApprovalToSign {
  return {
    requestId: due.request.requestId,
    toolName: due.request.toolName,
    argsSha256: approvalArgsSha256(due.request.argsJson),
    decision: 'denied',
    turnId: due.turn.turnId,
  };
}

/** What the model reads as the denial's note (the harness quotes it in the tool result). */
export function expiryNote(due: ApprovalDeadline, ttlMs: number): string {
  return `approval ${due.request.requestId} expired unanswered ${durationText(ttlMs)} after it was requested, so the call counts as denied`;
}

/**
 * The expiry batch: `approval_expired`, the signed denial and the next dispatch, in one
 * batch, so the turn goes on as on a denial.
 */
export function expiryBatch(
  due: ApprovalDeadline,
  signature: ApprovalSignature,
  lease: ClaimedLease,
  nowMs: number,
  ttlMs: number,
  historyFrom: number,
): PlannedEvent[] {
  const { turn, request } = due;
  return [
    planned(EventKind.ApprovalExpired, {
      turnId: turn.turnId,
      requestId: request.requestId,
      requestedAtMs: due.requestedAtMs,
      expiredAtMs: nowMs,
      ttlMs,
    }),
    planned(EventKind.ApprovalResponse, {
      turnId: turn.turnId,
      requestId: request.requestId,
      toolName: request.toolName,
      argsSha256: Buffer.from(approvalArgsSha256(request.argsJson)),
      decision: ProtoDecision.APPROVAL_DECISION_DENIED,
      answeredBy: EXPIRY_ANSWERER,
      ...approvalSignatureFields(signature),
      answeredAtMs: nowMs,
      comment: expiryNote(due, ttlMs),
    }),
    dispatchEvent(turn, lease, turn.dispatches.at(-1)?.attribution, nowMs, historyFrom),
  ];
}

/** `24h`, `90m`, `1500ms`: the largest unit that divides the duration. */
export function durationText(ms: number): string {
  for (const [unit, size] of [
    ['h', 3_600_000],
    ['m', 60_000],
    ['s', 1_000],
  ] as const) {
    if (ms >= size && ms % size === 0) return `${String(ms / size)}${unit}`;
  }
  return `${String(ms)}ms`;
}
