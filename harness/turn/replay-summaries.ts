import {
  summaryRequestSha256,
  type SummarizedTurn,
  type SummaryInput,
} from '../../common/model/summary-request';
import type { EventPayloads } from '../../common/event-kinds';
import { hex } from './agent-config';
import type { Decoded, ErasedEntry, JournalTurns } from './journal-turns';

type Summary = EventPayloads['summary'];

/**
 * The summary check of replay (docs/replay.md, "Summaries"): every `summary` event's
 * request is rebuilt from the journal and its digest compared with the recorded
 * `request_sha256`. Pure.
 *
 * The rule (docs/turns.md, "Summaries"): a summary S extends the summary at
 * `previous_position` (its request carries that text as `previous`; 0: none), and adds,
 * oldest first, every turn whose message position is after the previous summary's
 * `to_position` (any, with none) and at most S's `to_position`, and that was in history
 * when S was written: dispatched, settled by a `turn_complete` before S (the first terminal
 * marker, or the first after a `turn_resolved`), and neither its message nor its answer
 * erased by a record before S. A turn's text is its `message_received` text, its reply its
 * `turn_complete` text. S's `from_position` is the previous summary's, or the first added
 * turn's message position, and its `to_position` the last added turn's; the previous
 * summary is the newest one not erased before S.
 *
 * An erased summary is reported `erased` and not checked. A summary whose request carried
 * content erased after it was written (a covered turn's message or answer, or the summary
 * it extends) cannot be rebuilt: it is reported `unchecked`, with the reason, and is not a
 * failure.
 */

/** How a summary was found. */
export const SummaryStatus = {
  /** Its request follows from the turns it covers. */
  Ok: 'ok',
  /** It does not: `problem` says what differs. */
  Diverged: 'diverged',
  /** An admin erased it: skipped. */
  Erased: 'erased',
  /** Content its request carried was erased since: `problem` says which. */
  Unchecked: 'unchecked',
} as const;
export type SummaryStatus = (typeof SummaryStatus)[keyof typeof SummaryStatus];

/** The verdict on one `summary` event. */
export interface SummaryReplay {
  readonly position: number;
  readonly status: SummaryStatus;
  /** As recorded; 0 for an erased summary (its payload is gone). */
  readonly fromPosition: number;
  readonly toPosition: number;
  readonly previousPosition: number;
  /** The message positions of the turns its request adds, as rebuilt from the journal. */
  readonly turns: readonly number[];
  readonly problem?: string;
}

/** A turn as the summary rule reads it, folded up to the summary being checked. */
interface TurnFold {
  readonly messagePosition: number;
  /** Undefined when the message was erased (its content is gone from the journal). */
  readonly text: string | undefined;
  /** Position of the record that erased the message, if one did. */
  messageErasedAt?: number;
  dispatched: boolean;
  /** The turn's terminal marker that stands. */
  terminal?: { kind: string; position: number; text: string | undefined; erasedAt?: number };
}

/** A summary as the fold keeps it. */
interface SummaryFold {
  readonly position: number;
  readonly fromPosition: number;
  readonly toPosition: number;
  /** Undefined for an erased summary. */
  readonly text: string | undefined;
  erasedAt?: number;
}

/** Checks every summary of a journal read by `readJournal`. */
export function checkSummaries(journal: JournalTurns): SummaryReplay[] {
  const fold = new SummaryCheck(journal.erasures);
  // The positions that are not decoded events: excised by repair or unknown, and erased.
  const gaps = [...journal.skipped, ...journal.erased].map((e) => e.position).sort((a, b) => a - b);
  let next = 0;
  const out: SummaryReplay[] = [];
  const skipTo = (position: number): void => {
    for (; next < gaps.length && (gaps[next] ?? 0) < position; next++) {
      const verdict = fold.excised(gaps[next] ?? 0);
      if (verdict !== undefined) out.push(verdict);
    }
  };
  for (const event of journal.events) {
    skipTo(event.position);
    const verdict = fold.event(event);
    if (verdict !== undefined) out.push(verdict);
  }
  skipTo(Number.POSITIVE_INFINITY);
  return out;
}

class SummaryCheck {
  private readonly turns = new Map<string, TurnFold>();
  /** The turns by message position, in journal order. */
  private readonly order: TurnFold[] = [];
  private readonly summaries = new Map<number, SummaryFold>();

  constructor(private readonly erasures: ReadonlyMap<number, ErasedEntry>) {}

  /** An excised position: an erased message, answer or summary keeps its place. */
  excised(position: number): SummaryReplay | undefined {
    const note = this.erasures.get(position);
    if (note === undefined) return undefined;
    if (note.kind === 'message_received') this.open(note.turnId, position, undefined);
    if (note.kind === 'turn_complete')
      this.settle(note.turnId, 'turn_complete', position, undefined);
    if (note.kind !== 'summary') return undefined;
    this.summaries.set(position, { position, fromPosition: 0, toPosition: 0, text: undefined });
    return {
      position,
      status: SummaryStatus.Erased,
      fromPosition: 0,
      toPosition: 0,
      previousPosition: 0,
      turns: [],
      problem: `erased by the record at ${String(note.recordPosition)}; not checked`,
    };
  }

  event(event: Decoded): SummaryReplay | undefined {
    switch (event.kind) {
      case 'message_received':
        this.open(event.payload.turnId, event.position, event.payload.text);
        return undefined;
      case 'turn_dispatched': {
        const turn = this.turns.get(event.payload.turnId);
        if (turn !== undefined) turn.dispatched = true;
        return undefined;
      }
      case 'turn_complete':
        this.settle(event.payload.turnId, event.kind, event.position, event.payload.text);
        return undefined;
      case 'turn_ambiguous':
      case 'handoff':
        this.settle(event.payload.turnId, event.kind, event.position, undefined);
        return undefined;
      case 'turn_resolved': {
        // A resolution ends the quarantine: the next terminal marker is the one that stands.
        const turn = this.turns.get(event.payload.turnId);
        if (turn?.terminal?.kind === 'turn_ambiguous') turn.terminal = undefined;
        return undefined;
      }
      case 'excision':
        if (event.payload.erased) this.erased(event.payload.position, event.position);
        return undefined;
      case 'summary':
        return this.summary(event.position, event.payload);
      default:
        return undefined;
    }
  }

  private open(turnId: string, position: number, text: string | undefined): void {
    if (this.turns.has(turnId)) return;
    const turn: TurnFold = { messagePosition: position, text, dispatched: false };
    this.turns.set(turnId, turn);
    this.order.push(turn);
  }

  private settle(turnId: string, kind: string, position: number, text: string | undefined): void {
    const turn = this.turns.get(turnId);
    if (turn !== undefined && turn.terminal === undefined) turn.terminal = { kind, position, text };
  }

  /** An erasure record at `at` of the entry at `position`: from here on, it is out of history. */
  private erased(position: number, at: number): void {
    const note = this.erasures.get(position);
    if (note === undefined) return;
    const summary = this.summaries.get(position);
    if (summary !== undefined) summary.erasedAt = at;
    const turn = this.turns.get(note.turnId);
    if (turn === undefined) return;
    if (turn.messagePosition === position) turn.messageErasedAt = at;
    if (turn.terminal?.position === position) turn.terminal.erasedAt = at;
  }

  private summary(position: number, s: Summary): SummaryReplay {
    this.summaries.set(position, {
      position,
      fromPosition: s.fromPosition,
      toPosition: s.toPosition,
      text: s.text,
    });
    const verdict = (status: SummaryStatus, turns: readonly number[], problem?: string) => ({
      position,
      status,
      fromPosition: s.fromPosition,
      toPosition: s.toPosition,
      previousPosition: s.previousPosition,
      turns,
      ...(problem === undefined ? {} : { problem }),
    });
    const previous = this.previousOf(position, s.previousPosition);
    if (typeof previous === 'string') return verdict(SummaryStatus.Diverged, [], previous);
    if (previous !== undefined && previous.text === undefined) {
      return verdict(
        SummaryStatus.Unchecked,
        [],
        `cannot be checked: the summary it extends, at position ${String(previous.position)}, was erased`,
      );
    }
    const covered = this.covered(position, previous?.toPosition ?? -1, s.toPosition);
    const positions = covered.map((t) => t.messagePosition);
    const gone = covered.find((t) => t.text === undefined || t.terminal?.text === undefined);
    if (gone !== undefined) {
      const what = gone.text === undefined ? 'message' : 'answer';
      return verdict(
        SummaryStatus.Unchecked,
        positions,
        `cannot be checked: the ${what} of the turn at position ${String(gone.messagePosition)}, which it covers, was erased since`,
      );
    }
    const problem = this.problemOf(s, previous, covered);
    return problem === undefined
      ? verdict(SummaryStatus.Ok, positions)
      : verdict(SummaryStatus.Diverged, positions, problem);
  }

  /** The summary S extends, undefined for none, or what is wrong with its `previous_position`. */
  private previousOf(at: number, previousPosition: number): SummaryFold | undefined | string {
    const newest = [...this.summaries.values()]
      .filter((x) => x.position < at && (x.erasedAt === undefined || x.erasedAt > at))
      .at(-1);
    if (previousPosition === 0) {
      return newest === undefined
        ? undefined
        : `it extends no summary (previous_position 0), but the summary at position ${String(newest.position)} stood before it`;
    }
    const previous = this.summaries.get(previousPosition);
    if (previous === undefined || previousPosition >= at) {
      return `previous_position ${String(previousPosition)} is not a summary before it`;
    }
    if (previous.erasedAt !== undefined && previous.erasedAt < at) {
      return `previous_position ${String(previousPosition)} names a summary erased before it`;
    }
    if (newest !== previous) {
      return `previous_position ${String(previousPosition)} is not the newest summary before it (${String(newest?.position)} is)`;
    }
    return previous;
  }

  /** The turns in history before `at`, after `after` and up to `to`, oldest first. */
  private covered(at: number, after: number, to: number): TurnFold[] {
    return this.order.filter(
      (t) =>
        t.messagePosition > after &&
        t.messagePosition <= to &&
        t.dispatched &&
        t.terminal?.kind === 'turn_complete' &&
        t.terminal.position < at &&
        !(t.messageErasedAt !== undefined && t.messageErasedAt < at) &&
        !(t.terminal.erasedAt !== undefined && t.terminal.erasedAt < at),
    );
  }

  /** What differs between the recorded summary and the one rebuilt, or undefined. */
  private problemOf(
    s: Summary,
    previous: SummaryFold | undefined,
    covered: readonly TurnFold[],
  ): string | undefined {
    const first = covered[0];
    if (first === undefined) {
      return `its request does not follow from the turns it covers: no turn in history is after ${previous === undefined ? 'the start' : `the summary at ${String(previous.position)}`} and at or before position ${String(s.toPosition)}`;
    }
    const last = covered.at(-1)?.messagePosition ?? first.messagePosition;
    if (s.toPosition !== last) {
      return `to_position ${String(s.toPosition)} should be ${String(last)}, the message position of the last turn it covers`;
    }
    const from = previous?.fromPosition ?? first.messagePosition;
    if (s.fromPosition !== from) {
      return `from_position ${String(s.fromPosition)} should be ${String(from)} (${previous === undefined ? 'the first turn it covers' : `the from_position of the summary at ${String(previous.position)}`})`;
    }
    const turns: SummarizedTurn[] = covered.map((t) => ({
      user: t.text ?? '',
      assistant: t.terminal?.text ?? '',
    }));
    const input: SummaryInput =
      previous?.text === undefined ? { turns } : { previous: previous.text, turns };
    const rebuilt = hex(summaryRequestSha256(input, { model: s.model, maxTokens: s.maxTokens }));
    if (rebuilt === hex(s.requestSha256)) return undefined;
    const range = covered.map((t) => String(t.messagePosition)).join(', ');
    return (
      `its request does not follow from the turns it covers: rebuilt from ${previous === undefined ? 'no previous summary' : `the summary at ${String(previous.position)}`} ` +
      `and the turns at ${range} (model ${s.model}, max_tokens ${String(s.maxTokens)}), its request_sha256 is ${rebuilt}; the event records ${hex(s.requestSha256)}`
    );
  }
}
