/**
 * The one Ready condition of an Agent or a ModelConfig: a verdict (status, reason,
 * message) from a pure core (`agent-ready.ts`, `model-config-ready.ts`) becomes the
 * object's next status here. Pure.
 */
import type { ConditionStatus } from '../api/v1alpha1/conditions';
import { ConditionType } from '../api/v1alpha1/conditions';
import type { Condition } from '../api/v1alpha1/conversation-status';
import type { ReadyStatus } from '../api/v1alpha1/ready-status';

/** What a core decided about Ready. */
export interface ReadyVerdict {
  readonly status: typeof ConditionStatus.True | typeof ConditionStatus.False;
  readonly reason: string;
  readonly message: string;
}

/** The stored Ready condition of a status, if any. */
export function readyConditionOf(status: ReadyStatus | undefined): Condition | undefined {
  return status?.conditions?.find((c) => c.type === ConditionType.Ready);
}

/**
 * The status to store: Ready from `verdict`, stamped with `generation`; its
 * lastTransitionTime moves only when its status does (metav1.Condition's rule).
 */
export function nextReadyStatus(
  previous: ReadyStatus | undefined,
  verdict: ReadyVerdict,
  generation: number,
  now: Date,
): ReadyStatus {
  const before = readyConditionOf(previous);
  const ready: Condition = {
    type: ConditionType.Ready,
    status: verdict.status,
    observedGeneration: generation,
    lastTransitionTime:
      before !== undefined && before.status === verdict.status
        ? before.lastTransitionTime
        : now.toISOString().replace(/\.\d{3}Z$/, 'Z'),
    reason: verdict.reason,
    message: verdict.message,
  };
  const others = (previous?.conditions ?? []).filter((c) => c.type !== ConditionType.Ready);
  return { observedGeneration: generation, conditions: [...others, ready] };
}

/** Whether writing `next` over `stored` would change nothing. */
export function isSameReadyStatus(stored: ReadyStatus | undefined, next: ReadyStatus): boolean {
  const a = readyConditionOf(stored);
  const b = readyConditionOf(next);
  return (
    stored?.observedGeneration === next.observedGeneration &&
    a !== undefined &&
    b !== undefined &&
    a.status === b.status &&
    a.reason === b.reason &&
    a.message === b.message &&
    a.observedGeneration === b.observedGeneration &&
    (stored?.conditions?.length ?? 0) === (next.conditions?.length ?? 0)
  );
}

/** Whether Ready's status or reason differs between two statuses (an Event is due). */
export function isReadyTransition(stored: ReadyStatus | undefined, next: ReadyStatus): boolean {
  const a = readyConditionOf(stored);
  const b = readyConditionOf(next);
  return a?.status !== b?.status || a?.reason !== b?.reason;
}
