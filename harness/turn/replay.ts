import { StandingState, standingOf } from '../../common/turn-standing';
import { createPrefixRequestHasher, type RequestHasher } from './agent-config';
import {
  describe,
  readJournal,
  type JournalTurns,
  type ReplayEntry,
  type TurnLog,
} from './journal-turns';
import type { Message } from '../../common/model/model-port';
import { noteOf, transcriptOf } from './replay-notes';
import { replayAttempt } from './replay-attempt';
import { checkSummaries, SummaryStatus } from './replay-summaries';
import {
  ReplayMode,
  ReplayTurnStatus,
  type Divergence,
  type JournalReplay,
  type TurnReplay,
  type UncheckedAttempt,
} from './replay-verdict';
import type { ReplayOptions } from './replay-options';
import { weakCheck } from './weak-replay';

/**
 * Replay (docs/replay.md): every committed turn of a journal driven through the real turn
 * machine (`turn-machine.ts`), fed only from the journal, with no model and no tool.
 * Each `call_model` is answered from the recorded `model_call` once the digest of the
 * request the machine built equals the recorded one; each tool call from the recorded
 * `tool_result`; approvals from the recorded signed answers, verified by the machine with
 * the approval public key. Every step the machine wants to commit, and how it ends or
 * pauses, is compared with the next recorded event of the attempt. An attempt given a
 * summary gets its text, as the harness did. Pure: the journal comes in decoded, the
 * verdicts go out. Reading the journal: `journal-turns.ts`; one attempt:
 * `replay-attempt.ts`; turns recorded before configurations were: `weak-replay.ts`; the
 * `summary` events: `replay-summaries.ts`; the report: `replay-verdict.ts`.
 */

/** Replay's name for each standing: settled with a reply, a fallback or a cancel is complete. */
const REPLAY_STATUS_OF: { readonly [S in StandingState]: ReplayTurnStatus } = {
  [StandingState.Received]: ReplayTurnStatus.Received,
  [StandingState.Running]: ReplayTurnStatus.Orphaned,
  [StandingState.AwaitingApproval]: ReplayTurnStatus.Paused,
  [StandingState.AwaitingAnswer]: ReplayTurnStatus.Paused,
  [StandingState.HandedOff]: ReplayTurnStatus.Handoff,
  [StandingState.Quarantined]: ReplayTurnStatus.Quarantined,
  [StandingState.Resolved]: ReplayTurnStatus.Resolved,
  [StandingState.Complete]: ReplayTurnStatus.Complete,
  [StandingState.Failed]: ReplayTurnStatus.Complete,
  [StandingState.Cancelled]: ReplayTurnStatus.Complete,
};

/**
 * Replays a journal.
 *
 * @throws AppError `data_loss` when an event does not decode or a recorded configuration
 *   is not readable (the journal must be verified first).
 */
export function replayJournal(
  entries: readonly ReplayEntry[],
  options: ReplayOptions,
): JournalReplay {
  const journal = readJournal(entries);
  const { skipped, turns: order, configPositions } = journal;
  const history: Message[] = [];
  /** The message position of the turn each history message came from. */
  const historyPositions: number[] = [];
  const results: TurnReplay[] = [];
  const hasher = options.requestHasher ?? createPrefixRequestHasher();
  for (const log of order) {
    const earlier = { messages: history, positions: historyPositions };
    const result = replayTurn(log, earlier, journal, configPositions, options, hasher);
    results.push(result);
    const terminal = log.events.find((e) => e.kind === 'turn_complete');
    const dispatched = log.events.some((e) => e.kind === 'turn_dispatched');
    if (terminal?.kind === 'turn_complete' && dispatched) {
      history.push(
        { role: 'user', content: [{ type: 'text', text: log.text }] },
        { role: 'assistant', content: [{ type: 'text', text: terminal.payload.text }] },
      );
      historyPositions.push(log.position, log.position);
    }
  }
  const divergence = results.find((r) => r.divergence !== undefined)?.divergence;
  const summaries = checkSummaries(journal);
  return {
    ok: results.every((r) => r.ok) && summaries.every((s) => s.status !== SummaryStatus.Diverged),
    events: entries.length,
    turns: results,
    skipped,
    summaries,
    ...(divergence === undefined ? {} : { divergence }),
  };
}

/** Every complete turn before a turn, as history messages, and where each turn's message is. */
interface EarlierTurns {
  readonly messages: readonly Message[];
  readonly positions: readonly number[];
}

/**
 * The history an attempt was given: the earlier complete turns from the message position
 * its `turn_dispatched` records (`history_from`; 0: all of them), docs/turns.md "The
 * history window".
 */
function windowOf(earlier: EarlierTurns, historyFrom: number): readonly Message[] {
  if (historyFrom === 0) return earlier.messages;
  const start = earlier.positions.findIndex((position) => position >= historyFrom);
  return start < 0 ? [] : earlier.messages.slice(start);
}

function replayTurn(
  log: TurnLog,
  earlier: EarlierTurns,
  journal: JournalTurns,
  configPositions: readonly { position: number; sha256: string }[],
  options: ReplayOptions,
  hasher: RequestHasher,
): TurnReplay {
  const standing = standingOf(log.events);
  const status = REPLAY_STATUS_OF[standing.state];
  const transcript = transcriptOf(log);
  const dispatches = log.events.filter((e) => e.kind === 'turn_dispatched');
  const base = { turnId: log.turnId, position: log.position, status, transcript };
  const full = log.events.some((e) => e.kind === 'model_call' && e.payload.configSha256.length > 0);
  if (!full) {
    const divergence = weakCheck(log, options);
    return {
      ...base,
      mode: ReplayMode.Weak,
      attempts: dispatches.length,
      ok: divergence === undefined,
      ...(divergence === undefined ? {} : { divergence }),
      ...noteOf(log, standing),
    };
  }
  const unchecked: UncheckedAttempt[] = [];
  for (const [index, dispatch] of dispatches.entries()) {
    const next = dispatches[index + 1];
    const end = next === undefined ? Number.POSITIVE_INFINITY : next.position;
    const summary = summaryGiven(log, dispatch, journal);
    let divergence: Divergence | undefined;
    if (typeof summary === 'object') {
      divergence = summary.divergence;
    } else if (summary === ERASED) {
      unchecked.push({
        dispatchPosition: dispatch.position,
        reason: `cannot be checked: summary at position ${String(dispatch.payload.summaryPosition)} erased`,
      });
      continue;
    } else {
      divergence = replayAttempt(
        log,
        {
          history: windowOf(earlier, dispatch.payload.historyFrom),
          ...(summary === undefined ? {} : { summary }),
        },
        dispatch.position,
        end,
        journal.configs,
        configPositions,
        options,
        hasher,
      );
    }
    if (divergence !== undefined) {
      return { ...base, mode: ReplayMode.Full, attempts: dispatches.length, ok: false, divergence };
    }
  }
  return {
    ...base,
    mode: ReplayMode.Full,
    attempts: dispatches.length,
    ok: true,
    ...noteOf(log, standing),
    ...(unchecked.length === 0 ? {} : { unchecked }),
  };
}

/** A summary an attempt was given that has been erased since. */
const ERASED = Symbol('erased summary');

/**
 * The text of the summary a dispatch names (`summary_position`; undefined for none),
 * {@link ERASED}, or the divergence when the journal holds no summary there before it.
 */
function summaryGiven(
  log: TurnLog,
  dispatch: Extract<TurnLog['events'][number], { kind: 'turn_dispatched' }>,
  journal: JournalTurns,
): string | undefined | typeof ERASED | { divergence: Divergence } {
  const at = dispatch.payload.summaryPosition;
  if (at === 0) return undefined;
  if (at < dispatch.position && journal.erasures.get(at)?.kind === 'summary') return ERASED;
  const summary = at < dispatch.position ? journal.summaries.get(at) : undefined;
  if (summary !== undefined) return summary.text;
  return {
    divergence: {
      turnId: log.turnId,
      step: 0,
      position: dispatch.position,
      expected: `a summary at position ${String(at)}, before the dispatch (its summary_position)`,
      found: describe(dispatch),
    },
  };
}
