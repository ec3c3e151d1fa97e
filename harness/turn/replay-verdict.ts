import type { PaymentAudit } from '../../common/payment-audit';
import type { SummaryReplay } from './replay-summaries';

/**
 * What replay reports (docs/replay.md): the verdict on a journal and on each turn, where a
 * turn stands, how it was replayed, its transcript, and the first divergence.
 */

/** The first place a recorded turn does not follow from its inputs. */
export interface Divergence {
  readonly turnId: string;
  /** The model round trip (1-based) the machine was in; 0 before the first. */
  readonly step: number;
  /** Journal position of the event found, or the turn's last position when one is missing. */
  readonly position: number;
  readonly expected: string;
  readonly found: string;
}

/**
 * A step replay could not check because an entry was erased (docs/replay.md, "Erased
 * entries"): never a divergence.
 */
export interface UncheckedStep {
  /** The step: the erased entry itself, the model call whose request held it, or the dispatch. */
  readonly position: number;
  /** The erased entry that makes it not checkable. */
  readonly erasedPosition: number;
  readonly what: string;
}

/** An erased journal position, as its sealed record names it: erased, cannot be checked. */
export interface ErasedPosition {
  readonly position: number;
  readonly kind: string;
  readonly turnId: string;
}

/** Where a turn stands in the journal, in replay's words (the rule: common/turn-standing.ts). */
export const ReplayTurnStatus = {
  Complete: 'complete',
  Paused: 'paused',
  Handoff: 'handoff',
  /** `turn_ambiguous`: quarantined, never retried automatically. */
  Quarantined: 'quarantined',
  /** An admin resolved its quarantine (`turn_resolved`); not dispatched again yet. */
  Resolved: 'resolved',
  /** Dispatched, never settled or paused. */
  Orphaned: 'orphaned',
  /** Never dispatched. */
  Received: 'received',
} as const;
export type ReplayTurnStatus = (typeof ReplayTurnStatus)[keyof typeof ReplayTurnStatus];

/** How a turn was replayed. */
export const ReplayMode = {
  /** Recorded configuration and request digests: every step checked by the machine. */
  Full: 'full',
  /**
   * Recorded before configurations were (no `agent_config`): outputs are re-read, tool
   * calls checked against them and the final text against the last reply; requests and
   * budgets cannot be checked.
   */
  Weak: 'weak',
} as const;
export type ReplayMode = (typeof ReplayMode)[keyof typeof ReplayMode];

/** A block of the reconstructed transcript. */
export type TranscriptItem =
  | { readonly type: 'user'; readonly text: string }
  | { readonly type: 'assistant'; readonly text: string }
  | { readonly type: 'tool_call'; readonly name: string; readonly argsJson: string }
  | { readonly type: 'tool_result'; readonly content: string; readonly isError: boolean }
  | { readonly type: 'approval'; readonly toolName: string; readonly decision: string }
  | { readonly type: 'question'; readonly question: string; readonly answer?: string };

/** The verdict on one turn. */
export interface TurnReplay {
  readonly turnId: string;
  readonly position: number;
  readonly status: ReplayTurnStatus;
  readonly mode: ReplayMode;
  readonly attempts: number;
  readonly ok: boolean;
  readonly divergence?: Divergence;
  /**
   * Steps not checkable because entries were erased (an attempt given a summary erased since
   * is one: docs/replay.md, "Summaries"); absent when there are none.
   */
  readonly unchecked?: readonly UncheckedStep[];
  /** Set for quarantined turns: the recorded reason. */
  readonly note?: string;
  /**
   * Position of the memory clear that erased memory the turn started from: its requests
   * held content that is gone, so it is replayed in the weak mode (docs/replay.md).
   */
  readonly erasedMemoryBy?: number;
  /** Every `turn_resolved` of the turn: who settled a quarantine, and how. */
  readonly resolutions?: readonly ReplayResolution[];
  readonly transcript: readonly TranscriptItem[];
}

/** An admin's `turn_resolved`, as replay reports it. */
export interface ReplayResolution {
  readonly position: number;
  readonly decision: 'ran' | 'did_not_run';
  readonly toolCallId: string;
  /** `ran` without a result: the turn was told the outcome is unknown. */
  readonly resultUnknown: boolean;
  readonly actor: string;
  readonly caller: string;
}

/** The verdict on a journal. */
export interface JournalReplay {
  readonly ok: boolean;
  readonly events: number;
  readonly turns: readonly TurnReplay[];
  /** Positions repair excised, or of unknown kinds: skipped and reported. */
  readonly skipped: readonly { readonly position: number; readonly kind: string }[];
  /** Erased positions (never a divergence): erased, cannot be checked. */
  readonly erased: readonly ErasedPosition[];
  /** Every `summary` of the journal, checked (replay-summaries.ts), in journal order. */
  readonly summaries: readonly SummaryReplay[];
  /**
   * The audit of every payment (common/payment-audit.ts, docs/payments.md "Auditing
   * payments"): a finding fails the replay.
   */
  readonly payments: PaymentAudit;
  /** The first divergence over all turns, if any. */
  readonly divergence?: Divergence;
}
