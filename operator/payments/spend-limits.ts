import type { Charge } from './charge';
import {
  checkSpendLimits as checkLimits,
  type SpendDecision,
  type SpendLimits as Limits,
  type PriorPayment,
} from '../../common/spend-limits';

/**
 * The control plane's door to the spend-limit rule, which lives in common/spend-limits.ts
 * so that replay and the forensics UI audit recorded payments by the same rule
 * (docs/payments.md, "Auditing payments"). Kept for the turn plan's import
 * (operator/turns/plan-payments.ts); new code imports common/spend-limits.ts.
 */

/** The limits an admin linked (common/spend-limits.ts `SpendLimits`). */
export type SpendLimits = Limits;

/** Decides a charge against the limits (common/spend-limits.ts `checkSpendLimits`). */
export function checkSpendLimits(
  limits: SpendLimits,
  charge: Charge,
  prior: readonly PriorPayment[],
  now: Date,
): SpendDecision {
  return checkLimits(limits, charge, prior, now);
}
