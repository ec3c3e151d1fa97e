import { canonicalJson } from '../../common/canonical-json';
import { payloadCodecs } from '../../common/event-kinds';
import type { createErasureTracker } from './erased-inputs';
import { eventJson, type Decoded } from './journal-turns';
import { approvalRequestToProto, handoffToProto, questionRequestToProto } from './request-codec';
import type { TerminalEffect } from './turn-machine';

/**
 * How an attempt's end, as the machine decides it again, compares with what the journal
 * recorded there (docs/replay.md): the same `turn_complete`, pause request, handoff or
 * quarantine, or, for a failed or cancelled attempt, nothing of the harness's (the control
 * plane settles those). Pure.
 */
export type EndVerdict =
  /** The recorded end is this one: the attempt holds nothing after it. */
  | { readonly kind: 'matched' }
  /** Not checkable: the attempt was cut short, or it ended in a failure the control plane settled. */
  | { readonly kind: 'unchecked' }
  | { readonly kind: 'diverged'; readonly expected: string };

/** Compares the machine's `effect` with `found`, the next recorded event of the attempt. */
export function compareEnd(
  effect: TerminalEffect,
  found: Decoded | undefined,
  erasures: ReturnType<typeof createErasureTracker>,
): EndVerdict {
  const matched = { kind: 'matched' } as const;
  const diverged = (expected: string): EndVerdict => ({ kind: 'diverged', expected });
  switch (effect.type) {
    case 'finish': {
      if (found !== undefined && erasures.isErased(found, 'turn_complete')) return matched;
      const want = `turn_complete with text ${JSON.stringify(effect.text)}`;
      if (found?.kind !== 'turn_complete') return diverged(want);
      const p = found.payload;
      return p.text === effect.text && p.steps === effect.steps && p.fallback === effect.fallback
        ? matched
        : diverged(
            `turn_complete ${canonicalJson({ text: effect.text, steps: effect.steps, fallback: effect.fallback })}`,
          );
    }
    case 'pause_for_approval': {
      if (found === undefined) return { kind: 'unchecked' };
      const want = canonicalJson(
        payloadCodecs.approval_request.toJSON(approvalRequestToProto(effect.request)),
      );
      // requested_at_ms is the control plane's clock, stamped at commit (docs/turns.md,
      // "Expiry"): the machine never makes it, so it is not compared.
      return found.kind === 'approval_request' &&
        eventJson({ ...found, payload: { ...found.payload, requestedAtMs: 0 } }) === want
        ? matched
        : diverged(`approval_request ${want}`);
    }
    case 'pause_for_question': {
      if (found === undefined) return { kind: 'unchecked' };
      const want = canonicalJson(
        payloadCodecs.question_request.toJSON(questionRequestToProto(effect.request)),
      );
      if (erasures.isErased(found, 'question_request')) return matched;
      // requested_at_ms is the control plane's clock, as for an approval: not compared.
      return found.kind === 'question_request' &&
        eventJson({ ...found, payload: { ...found.payload, requestedAtMs: 0 } }) === want
        ? matched
        : diverged(`question_request ${want}`);
    }
    case 'handoff': {
      const want = canonicalJson(payloadCodecs.handoff.toJSON(handoffToProto(effect.handoff)));
      return found?.kind === 'handoff' && eventJson(found) === want
        ? matched
        : diverged(`handoff ${want}`);
    }
    case 'ambiguous':
      return found?.kind === 'turn_ambiguous'
        ? matched
        : diverged(`turn_ambiguous for tool call ${effect.toolCallId}`);
    case 'fail':
    case 'cancelled': {
      // The control plane settles a failed attempt (a retry or the fallback reply).
      if (found === undefined || found.kind === 'turn_complete') return { kind: 'unchecked' };
      const why = effect.type === 'fail' ? effect.message : effect.reason;
      return diverged(`nothing more (the machine ${effect.type}: ${why})`);
    }
  }
}
