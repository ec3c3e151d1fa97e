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
  /** Set for quarantined turns: the recorded reason. */
  readonly note?: string;
  /** Every `turn_resolved` of the turn: who settled a quarantine, and how. */
  readonly resolutions?: readonly ReplayResolution[];
  /**
   * Attempts that cannot be checked, and why (the summary they were given was erased:
   * docs/replay.md, "Summaries"); skipped, not a divergence. Absent when there are none.
   */
  readonly unchecked?: readonly UncheckedAttempt[];
  readonly transcript: readonly TranscriptItem[];
}

/** An attempt replay could not check. */
export interface UncheckedAttempt {
  /** The position of its `turn_dispatched`. */
  readonly dispatchPosition: number;
  /** E.g. "cannot be checked: summary at position 12 erased". */
  readonly reason: string;
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
  /** Excised or unknown positions, skipped and reported. */
  readonly skipped: readonly { readonly position: number; readonly kind: string }[];
  /** Every `summary` of the journal, checked (replay-summaries.ts), in journal order. */
  readonly summaries: readonly SummaryReplay[];
  /** The first divergence over all turns, if any. */
  readonly divergence?: Divergence;
}
