import { StandingState, standingOf } from '../../common/turn-standing';
import { createPrefixRequestHasher, type RequestHasher } from './agent-config';
import { readJournal, type MemoryErasure, type ReplayEntry, type TurnLog } from './journal-turns';
import { replayAttempt, type RecordedInputs } from './replay-attempt';
import type { Message } from './ports/model-port';
import { noteOf, transcriptOf } from './replay-notes';
import {
  ReplayMode,
  ReplayTurnStatus,
  type JournalReplay,
  type TurnReplay,
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
 * pauses, is compared with the next recorded event of the attempt. Pure: the journal comes
 * in decoded, the verdicts go out. Reading the journal: `journal-turns.ts`; one attempt:
 * `replay-attempt.ts`; turns recorded before configurations were: `weak-replay.ts`; the
 * report: `replay-verdict.ts`.
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
  const { skipped, turns: order, configs, configPositions, memoryEvents } = journal;
  const history: Message[] = [];
  /** The message position of the turn each history message came from. */
  const historyPositions: number[] = [];
  const results: TurnReplay[] = [];
  const hasher = options.requestHasher ?? createPrefixRequestHasher();
  for (const log of order) {
    const earlier = { messages: history, positions: historyPositions };
    const recorded = { configs, configPositions, memoryEvents };
    const erasedBy = erasedMemoryOf(log, journal.memoryErasures);
    const result = replayTurn(log, earlier, recorded, options, hasher, erasedBy);
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
  return {
    ok: results.every((r) => r.ok),
    events: entries.length,
    turns: results,
    skipped,
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
  recorded: RecordedInputs,
  options: ReplayOptions,
  hasher: RequestHasher,
  erasedMemoryBy: number | undefined,
): TurnReplay {
  const standing = standingOf(log.events);
  const status = REPLAY_STATUS_OF[standing.state];
  const transcript = transcriptOf(log);
  const dispatches = log.events.filter((e) => e.kind === 'turn_dispatched');
  const base = { turnId: log.turnId, position: log.position, status, transcript };
  const full = log.events.some((e) => e.kind === 'model_call' && e.payload.configSha256.length > 0);
  if (!full || erasedMemoryBy !== undefined) {
    const divergence = weakCheck(log, options);
    const erased = erasedMemoryBy === undefined ? {} : { erasedMemoryBy };
    return {
      ...base,
      mode: ReplayMode.Weak,
      attempts: dispatches.length,
      ok: divergence === undefined,
      ...(divergence === undefined ? {} : { divergence }),
      ...erased,
      ...noteOf(log, standing),
    };
  }
  for (const [index, dispatch] of dispatches.entries()) {
    const next = dispatches[index + 1];
    const end = next === undefined ? Number.POSITIVE_INFINITY : next.position;
    const divergence = replayAttempt(
      log,
      windowOf(earlier, dispatch.payload.historyFrom),
      dispatch.position,
      end,
      recorded,
      options,
      hasher,
    );
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
  };
}
