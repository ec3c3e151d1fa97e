/**
 * The decisions of the turn path (docs/turns.md), pure: no I/O, no clock, no ids made
 * here. The coordinator (coordinator.ts) is the shell: it claims the conversation, reads
 * the journal view, asks one of these functions what to do, commits the events it returns
 * and runs the harness. Every rule about who may do what, what goes into a batch and what
 * a harness may have committed on its behalf lives here, so each one is table-tested
 * without a cluster (turn-plan.test.ts).
 *
 * Functions return either a plan or a typed refusal (`{ kind: 'refuse', error }`): a
 * refusal is decided before anything is committed, so nothing changes on refusal.
 *
 * The parts: plan-common.ts (planned events, refusals, dispatch), plan-access.ts (who may
 * do what), plan-message.ts (a posted message), plan-answers.ts (answers and cancels),
 * plan-expiry.ts (approvals that expire), plan-harness-checks.ts (the harness call and
 * what it sends), plan-settle.ts (batch two), plan-resolve.ts (an admin settles a
 * quarantined turn). This file is the one import of them.
 */
export {
  ASK_USER_TOOL,
  attributionOf,
  CallerRole,
  dispatchEvent,
  FAILED_TURN_TEXT,
  HANDOFF_TOOL,
  type ApprovalToSign,
  type ClaimedLease,
  type PlannedEvent,
  type Refusal,
} from './plan-common';
export { authorizeApproval, authorizeCancel, authorizeUse } from './plan-access';
export { planMessage, type MessageInput, type MessageStep } from './plan-message';
export {
  approvalAnswerBatch,
  planApprovalAnswer,
  planCancel,
  planQuestionAnswer,
  type AnswerInput,
  type ApprovalPlan,
  type CancelPlan,
  type QuestionPlan,
} from './plan-answers';
export {
  approvalDeadline,
  DEFAULT_APPROVAL_TTL_MS,
  dueExpiry,
  durationText,
  EXPIRY_ANSWERER,
  expiryBatch,
  expiryNote,
  expiryToSign,
  type ApprovalDeadline,
} from './plan-expiry';
export {
  checkApprovalRequest,
  checkStep,
  turnStartOf,
  type DispatchedTurn,
} from './plan-harness-checks';
export {
  planSettle,
  settleFailed,
  stepEventOf,
  type HarnessEnd,
  type SettleInput,
  type SettlePlan,
} from './plan-settle';
export {
  authorizeResolve,
  planResolve,
  UNKNOWN_RESULT_TEXT,
  type ResolveInput,
  type ResolvePlan,
} from './plan-resolve';
