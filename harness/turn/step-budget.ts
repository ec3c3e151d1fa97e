import { AppError } from '../../common/errors';

/** The deployment's step budget when its config sets none (docs/design.md, "One turn, end to end"). */
export const DEFAULT_MAX_STEPS = 8;

/**
 * The limits that may bound a turn's model round trips. Each is optional; `0` counts as
 * unset, as in `IngressDirective.max_steps`.
 */
export interface StepBudget {
  /** Deployment config. @default 8 */
  readonly deployment?: number;
  /** The Conversation's `spec`. */
  readonly conversation?: number;
  /** The edge's `ingress_directive` for this turn. */
  readonly directive?: number;
}

/**
 * The effective budget: the lowest of the limits that are set, the deployment default
 * included. A source can lower the budget, never raise it above another source's.
 *
 * @throws AppError `invalid_argument` when a limit is negative or not an integer.
 */
export function effectiveMaxSteps(budget: StepBudget): number {
  let lowest = DEFAULT_MAX_STEPS;
  const sources = [
    ['deployment', budget.deployment],
    ['conversation', budget.conversation],
    ['directive', budget.directive],
  ] as const;
  for (const [source, limit] of sources) {
    if (limit === undefined || limit === 0) continue;
    if (!Number.isInteger(limit) || limit < 0) {
      throw new AppError(
        'invalid_argument',
        `step budget: ${source} limit ${limit} is not a positive integer; use a whole number of steps, or 0 for no limit`,
        { details: { source, limit } },
      );
    }
    if (source === 'deployment') lowest = limit;
    else lowest = Math.min(lowest, limit);
  }
  return lowest;
}
