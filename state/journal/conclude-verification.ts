import { AppError } from '../../common/errors';
import { EventKind } from '../../common/event-kinds';
import { toHex } from './hex';
import {
  VerifyFailureReason,
  type JournalVerification,
  type RootStep,
  type VerificationPlan,
  type VerificationStep,
  type VerifyFailure,
} from './verification-types';

/*
 * The verdict: a replay's plan and the outcome of its signature checks give the first
 * failure in position order, and for a root that does not match, whether it was forged by
 * its signer (the next root vouches for the events) or the events changed.
 */

/**
 * Combines a plan with the outcome of its signature checks (`signatureResults[i]` is the
 * result of `plan.signatureChecks[i]`) and names the first failure, in position order.
 *
 * @throws AppError `invalid_argument` when the number of results differs from the number
 *   of checks.
 */
export function concludeJournalVerification(
  plan: VerificationPlan,
  signatureResults: readonly boolean[],
): JournalVerification {
  if (signatureResults.length !== plan.signatureChecks.length) {
    throw new AppError(
      'invalid_argument',
      `the plan has ${String(plan.signatureChecks.length)} signature checks but ${String(signatureResults.length)} ` +
        'results were given; run every check in plan.signatureChecks, in order',
      { details: { checks: plan.signatureChecks.length, results: signatureResults.length } },
    );
  }
  const passed = (step: RootStep): boolean =>
    signatureResults[step.signatureIndex] === true && step.countMatches && step.rootMatches;
  let verifiedLeafCount = 0;
  let failure: VerifyFailure | undefined;
  for (const [i, step] of plan.steps.entries()) {
    failure = stepFailure(step, signatureResults, () => {
      // The next root vouches only if nothing between fails either.
      for (const later of plan.steps.slice(i + 1)) {
        if (later.type === 'failed') return false;
        if (later.type === 'root') return passed(later);
        if (signatureResults[later.signatureIndex] !== true) return false;
      }
      return false;
    });
    if (failure !== undefined) break;
    if (step.type === 'root') verifiedLeafCount = step.position;
  }
  return {
    ok: failure === undefined,
    leafCount: plan.leafCount,
    signedRootCount: plan.signedRootCount,
    verifiedLeafCount,
    rootHex: toHex(plan.root),
    unsealed: plan.unsealed,
    failure,
    excised: plan.excised,
    erased: plan.erased,
    checkpointChecked: plan.checkpointChecked,
  };
}

function stepFailure(
  step: VerificationStep,
  signatureResults: readonly boolean[],
  nextRootPasses: () => boolean,
): VerifyFailure | undefined {
  switch (step.type) {
    case 'failed':
      return step.failure;
    case 'rotation':
      if (signatureResults[step.signatureIndex] === true) return undefined;
      return {
        position: step.position,
        kind: EventKind.KeyRotated,
        reason: VerifyFailureReason.BadSignature,
        expected: step.oldKeyId,
        found: step.newKeyId,
        message:
          `key_rotated at ${String(step.position)}: the signature by key ${step.oldKeyId} over new key ` +
          `${step.newKeyId} does not verify; the rotation was forged or altered`,
      };
    case 'root':
      return rootFailure(step, signatureResults[step.signatureIndex] === true, nextRootPasses);
  }
}

function rootFailure(
  step: RootStep,
  signatureValid: boolean,
  nextRootPasses: () => boolean,
): VerifyFailure | undefined {
  if (signatureValid && step.countMatches && step.rootMatches) return undefined;
  const at = `signed_root at ${String(step.position)}`;
  const expectedRoot = toHex(step.expectedRoot);
  const foundRoot = toHex(step.foundRoot);
  const base = {
    position: step.position,
    kind: EventKind.SignedRoot,
    expected: expectedRoot,
    found: foundRoot,
  };
  if (!signatureValid) {
    return {
      ...base,
      reason: VerifyFailureReason.BadSignature,
      message:
        `${at}: the signature does not verify under key ${step.keyId} over leaf count ` +
        `${String(step.foundLeafCount)} and root ${foundRoot}; the signed root was altered`,
    };
  }
  if (!step.countMatches) {
    return {
      ...base,
      reason: VerifyFailureReason.EventChanged,
      message:
        `${at} was signed for ${String(step.foundLeafCount)} leaves but sits after ${String(step.position)} ` +
        'events: events were inserted or removed before it; restore the journal from a backup',
    };
  }
  if (nextRootPasses()) {
    return {
      ...base,
      reason: VerifyFailureReason.RootForged,
      message:
        `${at}: root ${foundRoot} is validly signed by ${step.keyId} but is not the root of the events ` +
        `(${expectedRoot}), while the next signed root vouches for those same events; the signer ` +
        'signed a false root: treat key ' +
        step.keyId +
        ' as misused and rotate it',
    };
  }
  return {
    ...base,
    reason: VerifyFailureReason.EventChanged,
    message:
      `${at}: the events before it hash to root ${expectedRoot}, not the signed ${foundRoot}; ` +
      'an event before this position was changed after signing; compare with a backup or an inclusion proof',
  };
}
