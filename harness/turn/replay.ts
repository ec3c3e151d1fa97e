import { StandingState, standingOf } from '../../common/turn-standing';
import { createPrefixRequestHasher, type RequestHasher } from './agent-config';
import {
  describe,
  readJournal,
  type JournalTurns,
  type MemoryErasure,
  type ReplayEntry,
  type TurnLog,
} from './journal-turns';
import { replayAttempt } from './replay-attempt';
import type { Message } from '../../common/model/model-port';
import { ERASED_TEXT, type AttemptHistory } from './erased-inputs';
import { noteOf, transcriptOf } from './replay-notes';
import { checkSummaries, SummaryStatus } from './replay-summaries';
import { auditRecordedPayments } from './replay-payments';
import {
  ReplayMode,
  ReplayTurnStatus,
  type Divergence,
  type JournalReplay,
  type TurnReplay,
  type UncheckedStep,
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
  const { skipped, erased, turns: order } = journal;
  const history: Message[] = [];
  /** The message position of the turn each history message came from. */
  const historyPositions: number[] = [];
  const erasedTurns: ErasedTurn[] = [];
  const results: TurnReplay[] = [];
  const hasher = options.requestHasher ?? createPrefixRequestHasher();
  for (const log of order) {
    const earlier = { messages: history, positions: historyPositions, erasedTurns };
    const erasedBy = erasedMemoryOf(log, journal.memoryErasures);
    const result = replayTurn(log, earlier, journal, options, hasher, erasedBy);
    results.push(result);
    const terminal = log.events.find((e) => e.kind === 'turn_complete');
    const dispatched = log.events.some((e) => e.kind === 'turn_dispatched');
    if (terminal?.kind === 'turn_complete' && dispatched) {
      const text = (position: number, recorded: string): string =>
        log.erased.has(position) ? ERASED_TEXT : recorded;
      history.push(
        { role: 'user', content: [{ type: 'text', text: text(log.position, log.text) }] },
        {
          role: 'assistant',
          content: [{ type: 'text', text: text(terminal.position, terminal.payload.text) }],
        },
      );
      historyPositions.push(log.position, log.position);
      const erasedTurn = erasedTurnOf(log, terminal.position);
      if (erasedTurn !== undefined) erasedTurns.push(erasedTurn);
    }
  }
  const divergence = results.find((r) => r.divergence !== undefined)?.divergence;
  const summaries = checkSummaries(journal);
  const payments = auditRecordedPayments(entries, options);
  return {
    ok:
      results.every((r) => r.ok) &&
      summaries.every((s) => s.status !== SummaryStatus.Diverged) &&
      payments.ok,
    events: entries.length,
    turns: results,
    skipped,
    erased: erased.map(({ position, kind, turnId }) => ({ position, kind, turnId })),
    summaries,
    payments,
    ...(divergence === undefined ? {} : { divergence }),
  };
}

/** Every complete turn before a turn, as history messages, and where each turn's message is. */
interface EarlierTurns {
  readonly messages: readonly Message[];
  readonly positions: readonly number[];
  /** The earlier complete turns whose message or answer was erased. */
  readonly erasedTurns: readonly ErasedTurn[];
}

/** A complete turn whose message or answer was erased. */
interface ErasedTurn {
  /** Its message's position. */
  readonly position: number;
  /** The first of its message and answer erased, and its kind. */
  readonly erasedPosition: number;
  readonly erasedKind: string;
  /** Where the first erasure of either was recorded. */
  readonly recordPosition: number;
}

function erasedTurnOf(log: TurnLog, answerPosition: number): ErasedTurn | undefined {
  const erasures = [log.erased.get(log.position), log.erased.get(answerPosition)].flatMap((e) =>
    e === undefined ? [] : [e],
  );
  const [first] = erasures;
  if (first === undefined) return undefined;
  return {
    position: log.position,
    erasedKind: first.kind,
    erasedPosition: Math.min(...erasures.map((e) => e.position)),
    recordPosition: Math.min(...erasures.map((e) => e.recordPosition)),
  };
}

/**
 * The history an attempt dispatched at `dispatchPosition` was given. A turn whose message or
 * answer was erased before the dispatch was left out of it by the control plane (docs/turns.md,
 * "Erased entries"), so it is left out here too; one erased after the dispatch was in it, so
 * the attempt's requests held erased content.
 */
function historyOf(
  earlier: EarlierTurns,
  historyFrom: number,
  dispatchPosition: number,
): AttemptHistory {
  const window = windowOf(earlier, historyFrom);
  const inWindow = earlier.erasedTurns.filter(
    (t) => historyFrom === 0 || t.position >= historyFrom,
  );
  if (inWindow.length === 0) return { history: window };
  const leftOut = new Set(
    inWindow.filter((t) => t.recordPosition < dispatchPosition).map((t) => t.position),
  );
  const held = inWindow.filter((t) => t.recordPosition > dispatchPosition);
  // Turns are in journal order, so the first held is the first erased entry the history held.
  const [first] = held;
  const erasedInput =
    first === undefined
      ? {}
      : { erasedInput: { position: first.erasedPosition, kind: first.erasedKind } };
  if (leftOut.size === 0) return { history: window, ...erasedInput };
  const offset = earlier.messages.length - window.length;
  // Fresh message objects: the prefix hasher keys its saved digests by message object and
  // index, and leaving turns out moves the messages after them.
  const history = window.flatMap((message, index) =>
    leftOut.has(earlier.positions[offset + index] ?? -1) ? [] : [{ ...message }],
  );
  return { history, ...erasedInput };
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

/**
 * Whether a turn recorded its configuration and request digests: a model call names one,
 * or (all its model calls erased) a configuration was recorded before its first.
 */
function isFull(log: TurnLog, configPositions: readonly { position: number }[]): boolean {
  const calls = log.events.filter((e) => e.kind === 'model_call');
  if (calls.some((e) => !log.erased.has(e.position) && e.payload.configSha256.length > 0)) {
    return true;
  }
  const first = calls.find((e) => log.erased.has(e.position));
  return first !== undefined && configPositions.some((c) => c.position < first.position);
}

/**
 * The position of a clear that erased memory one of the turn's attempts started from (a
 * `memory_set` before its dispatch, cleared after it), or undefined. Such a turn's requests
 * held content that is gone, so they cannot be checked (docs/replay.md, "Erased entries").
 */
function erasedMemoryOf(log: TurnLog, erasures: readonly MemoryErasure[]): number | undefined {
  for (const dispatch of log.events) {
    if (dispatch.kind !== 'turn_dispatched') continue;
    const d = dispatch.position;
    const clear = erasures.find((c) => c.position > d && c.setPositions.some((p) => p < d));
    if (clear !== undefined) return clear.position;
  }
  return undefined;
}

function replayTurn(
  log: TurnLog,
  earlier: EarlierTurns,
  recorded: JournalTurns,
  options: ReplayOptions,
  hasher: RequestHasher,
  erasedMemoryBy: number | undefined,
): TurnReplay {
  const standing = standingOf(log.events);
  const status = REPLAY_STATUS_OF[standing.state];
  const transcript = transcriptOf(log);
  const dispatches = log.events.filter((e) => e.kind === 'turn_dispatched');
  const base = { turnId: log.turnId, position: log.position, status, transcript };
  if (!isFull(log, recorded.configPositions) || erasedMemoryBy !== undefined) {
    const weakUnchecked: UncheckedStep[] = [];
    const divergence = weakCheck(log, options, weakUnchecked);
    const erased = erasedMemoryBy === undefined ? {} : { erasedMemoryBy };
    return {
      ...base,
      mode: ReplayMode.Weak,
      attempts: dispatches.length,
      ok: divergence === undefined,
      ...(divergence === undefined ? {} : { divergence }),
      ...(weakUnchecked.length === 0 ? {} : { unchecked: weakUnchecked }),
      ...erased,
      ...noteOf(log, standing),
    };
  }
  const unchecked: UncheckedStep[] = [];
  const listed = (): { unchecked?: UncheckedStep[] } =>
    unchecked.length === 0 ? {} : { unchecked };
  for (const [index, dispatch] of dispatches.entries()) {
    const next = dispatches[index + 1];
    const end = next === undefined ? Number.POSITIVE_INFINITY : next.position;
    const summary = summaryGiven(log, dispatch, recorded);
    if (summary === ERASED) {
      const at = dispatch.payload.summaryPosition;
      unchecked.push({
        position: dispatch.position,
        erasedPosition: at,
        what: `the attempt was given the summary at position ${String(at)}, erased since: its requests cannot be checked`,
      });
      continue;
    }
    const given = historyOf(earlier, dispatch.payload.historyFrom, dispatch.position);
    const attempt =
      typeof summary === 'object'
        ? { divergence: summary.divergence, unchecked: [] }
        : replayAttempt(
            log,
            { ...given, ...(summary === undefined ? {} : { summary }) },
            dispatch.position,
            end,
            recorded,
            options,
            hasher,
          );
    unchecked.push(...attempt.unchecked);
    const { divergence } = attempt;
    if (divergence !== undefined) {
      const failed = { ...base, mode: ReplayMode.Full, attempts: dispatches.length, ok: false };
      return { ...failed, divergence, ...listed() };
    }
  }
  return {
    ...base,
    mode: ReplayMode.Full,
    attempts: dispatches.length,
    ok: true,
    ...listed(),
    ...noteOf(log, standing),
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
