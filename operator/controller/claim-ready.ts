/**
 * Whether a SandboxClaim is Ready, by agent-sandbox v1.0's rule: its `Ready` condition
 * carries the claim's own `observedGeneration`, so only a condition written for the
 * claim's current `metadata.generation` counts. A Ready left over from an older
 * generation, one with no observedGeneration, or one carrying another object's generation
 * (agent-sandbox 0.5.x forwarded the Sandbox's condition as it was) says nothing about the
 * claim as it is now. Pure.
 */
import type { ObservedClaim, ObservedCondition } from './snapshot';

/** The outcome of {@link claimReadiness}. */
export type ClaimReadiness =
  | { readonly ready: true }
  | {
      readonly ready: false;
      /** Why not, naming the claim, for `Ready`'s message while the sandbox is pending. */
      readonly message: string;
    };

/**
 * The claim's `Ready` condition when it was written for the claim's current generation;
 * undefined when there is none, or it is stale (another generation, or none recorded).
 */
export function currentClaimReady(claim: ObservedClaim): ObservedCondition | undefined {
  const ready = claim.conditions.find((c) => c.type === 'Ready');
  if (ready === undefined || claim.generation === undefined) return undefined;
  return ready.observedGeneration === claim.generation ? ready : undefined;
}

/** Whether `claim` is Ready for its current generation, and if not, why. */
export function claimReadiness(claim: ObservedClaim): ClaimReadiness {
  const ready = claim.conditions.find((c) => c.type === 'Ready');
  const waiting = `waiting for SandboxClaim ${claim.name} to be Ready`;
  if (ready === undefined)
    return { ready: false, message: `${waiting}: ${describeCondition(ready)}` };
  if (claim.generation === undefined) {
    return { ready: false, message: `${waiting}: the claim has no metadata.generation` };
  }
  if (ready.observedGeneration !== claim.generation) {
    const seen =
      ready.observedGeneration === undefined
        ? 'records no observedGeneration'
        : `is for generation ${ready.observedGeneration}`;
    return {
      ready: false,
      message: `${waiting}: its Ready condition ${seen}, the claim is at generation ${claim.generation} (agent-sandbox has not observed it yet; agent-sandbox v1.0 or later is needed)`,
    };
  }
  if (ready.status !== 'True')
    return { ready: false, message: `${waiting}: ${describeCondition(ready)}` };
  return { ready: true };
}

/** A condition in a message: `reason: message`, the reason alone, or that there is none yet. */
export function describeCondition(condition: ObservedCondition | undefined): string {
  if (condition === undefined) return 'no Ready condition yet';
  const reason = condition.reason ?? condition.status;
  return condition.message !== undefined && condition.message !== ''
    ? `${reason}: ${condition.message}`
    : reason;
}
