/**
 * The one rule both the control plane (the steps a retried turn's harness is given) and
 * replay (the steps a replayed attempt starts from) apply to an admin's `turn_resolved`
 * (docs/turns.md, "Resolving a quarantined turn"): a `did_not_run` resolution voids the
 * `tool_call`s of the call it names that come before it, so the call is run (and
 * committed) again. The journal keeps them. Pure.
 */

/** A `turn_resolved`, as the rule reads it. */
export interface ResolutionMark {
  readonly position: number;
  readonly toolCallId: string;
  readonly didNotRun: boolean;
}

/** A `tool_call`, as the rule reads it. */
export interface ToolCallMark {
  readonly position: number;
  readonly toolCallId: string;
}

/** Positions of the `tool_call`s that `did_not_run` resolutions void. */
export function voidedToolCalls(
  resolutions: Iterable<ResolutionMark>,
  toolCalls: readonly ToolCallMark[],
): ReadonlySet<number> {
  const voided = new Set<number>();
  for (const resolution of resolutions) {
    if (!resolution.didNotRun || resolution.toolCallId === '') continue;
    for (const call of toolCalls) {
      if (call.position < resolution.position && call.toolCallId === resolution.toolCallId) {
        voided.add(call.position);
      }
    }
  }
  return voided;
}
