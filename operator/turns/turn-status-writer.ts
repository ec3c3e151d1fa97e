/**
 * Writes the turn code's status fields off the turn's path (docs/turns.md "One message",
 * 5): the journal is the truth and the status a display, so a turn never waits for the
 * API server. Writes of one conversation run in order; while one runs, a waiting change is
 * replaced by a newer one (it carries the newest state) unless it is a quarantine, so a
 * burst of turns costs few writes.
 */
import type { Logger } from 'pino';
import type { Conversation } from '../api/v1alpha1/conversation-types';
import {
  journalKeyFromJson,
  journalKeyToJson,
  type JournalPublicKey,
} from '../../common/journal-keys';
import type { ConversationStore } from './conversation-access';
import type { JournalKeyRecorder } from './journal-keys';
import { partitionOf } from '../../common/partition-name';
import { applyTurnStatus, type JournalMark, type TurnStatusChange } from './turn-status';

export interface TurnStatusWriterOptions {
  readonly conversations: Pick<ConversationStore, 'updateStatus'>;
  readonly logger: Logger;
  readonly nowMs: () => number;
  /** Aborted on shutdown: waits end at once so queued writes go out. */
  readonly stopping: AbortSignal;
  /** Least time between two writes of one conversation. @default 1000 */
  readonly intervalMs?: number;
  readonly onWrite?: (result: 'ok' | 'failed') => void;
  /**
   * Learns the journal keys to record with a journal mark (journal-keys.ts). Absent: the
   * recorded keys stay as they are.
   */
  readonly keys?: Pick<JournalKeyRecorder, 'keysAfter'>;
}

/** One status change to write. */
interface StatusWork {
  readonly change: TurnStatusChange;
  readonly journal?: JournalMark;
}

/** A conversation's status writes: the one running (`done`) and the ones waiting. */
interface StatusWrites {
  done: Promise<void>;
  readonly waiting: StatusWork[];
  /** Ends the spacing wait early (an urgent change, shutdown). */
  wake: () => void;
}

/** `next` replacing `last` in the queue: the newest state, with the older turn time kept. */
function merged(last: StatusWork, next: StatusWork): StatusWork {
  const lastTurnTime = next.change.lastTurnTime ?? last.change.lastTurnTime;
  const journal = next.journal ?? last.journal;
  return {
    change: lastTurnTime === undefined ? next.change : { ...next.change, lastTurnTime },
    ...(journal === undefined ? {} : { journal }),
  };
}

/** Changes never merged into a later one. */
const KEPT: ReadonlySet<TurnStatusChange['kind']> = new Set([
  'ambiguous',
  'resolved',
  'journal_rolled_back',
  'journal_restored',
  'rollback_accepted',
]);
/** Changes that replace no earlier one. */
const ALONE: ReadonlySet<TurnStatusChange['kind']> = new Set([
  'resolved',
  'journal_rolled_back',
  'journal_restored',
  'rollback_accepted',
]);

export class TurnStatusWriter {
  private readonly writes = new Map<string, StatusWrites>();

  constructor(private readonly options: TurnStatusWriterOptions) {}

  /**
   * Queues `change` for the conversation. With `delayMs`, the first write waits that long,
   * so a fast turn's settled change replaces its running one (one write). A running change
   * without delay is needed now (it reopens the conversation) and cuts a spacing wait short.
   */
  queue(
    conversation: Conversation,
    change: TurnStatusChange,
    journal?: JournalMark,
    delayMs = 0,
  ): void {
    const uid = conversation.metadata.uid ?? '';
    const work: StatusWork = { change, ...(journal === undefined ? {} : { journal }) };
    const queued = this.writes.get(uid);
    if (queued !== undefined) {
      const last = queued.waiting.at(-1);
      // A quarantine, a rollback, or their end, must reach the status even if a newer
      // turn follows at once, and replaces no other change.
      if (last !== undefined && !KEPT.has(last.change.kind) && !ALONE.has(change.kind)) {
        queued.waiting[queued.waiting.length - 1] = merged(last, work);
      } else {
        queued.waiting.push(work);
      }
      if (delayMs === 0 && change.kind === 'running') queued.wake();
      return;
    }
    const entry: StatusWrites = { done: Promise.resolve(), waiting: [work], wake: () => {} };
    const stop = this.options.stopping;
    const wait = (ms: number): Promise<void> =>
      stop.aborted
        ? Promise.resolve()
        : new Promise((resolve) => {
            const timer = setTimeout(done, ms);
            function done(): void {
              clearTimeout(timer);
              stop.removeEventListener('abort', done);
              resolve();
            }
            stop.addEventListener('abort', done, { once: true });
            entry.wake = done;
          });
    entry.done = (async () => {
      if (delayMs > 0) await wait(delayMs);
      for (let next = entry.waiting.shift(); next !== undefined; next = entry.waiting.shift()) {
        await this.write(conversation, next.change, next.journal);
        // Changes that come during the spacing merge into the next write.
        await wait(this.options.intervalMs ?? 1_000);
      }
      this.writes.delete(uid);
    })();
    this.writes.set(uid, entry);
  }

  /** Resolves when every queued write has been tried (call after aborting `stopping`). */
  async flushed(): Promise<void> {
    await Promise.allSettled([...this.writes.values()].map((w) => w.done));
  }

  /**
   * The mark with the journal keys to record, learned from what `conversation` (the
   * snapshot the change was queued with) recorded. When learning fails the mark goes
   * without keys, so the recorded ones stay; the next mark tries again.
   */
  private async withKeys(conversation: Conversation, journal: JournalMark): Promise<JournalMark> {
    const { keys } = this.options;
    if (keys === undefined) return journal;
    const status = conversation.status?.journal;
    const recorded: JournalPublicKey[] = [];
    for (const json of status?.publicKeys ?? []) {
      const key = journalKeyFromJson(json);
      // A damaged record is learned again from the journal's first root.
      if (typeof key === 'string') {
        recorded.length = 0;
        break;
      }
      recorded.push(key);
    }
    try {
      const learned = await keys.keysAfter({
        partition: partitionOf(conversation.metadata.uid ?? ''),
        recorded,
        recordedHead: recorded.length === 0 ? 0 : (status?.head ?? 0),
        head: journal.head,
        keyId: journal.keyId,
        signal: this.options.stopping,
      });
      return { ...journal, publicKeys: learned.map(journalKeyToJson) };
    } catch (error) {
      this.options.logger.warn(
        { err: error, conversation: conversation.metadata.uid },
        'could not learn the journal keys; the recorded ones stay',
      );
      return journal;
    }
  }

  private async write(
    conversation: Conversation,
    change: TurnStatusChange,
    journal: JournalMark | undefined,
  ): Promise<void> {
    const marked = journal === undefined ? undefined : await this.withKeys(conversation, journal);
    try {
      await this.options.conversations.updateStatus(conversation, (fresh) =>
        applyTurnStatus(fresh, change, marked, new Date(this.options.nowMs()).toISOString()),
      );
      this.options.onWrite?.('ok');
    } catch (error) {
      this.options.onWrite?.('failed');
      // Status is a display; the journal is the truth. A failed write is logged, not fatal.
      this.options.logger.warn(
        { err: error, conversation: conversation.metadata.uid, change: change.kind },
        'could not write the turn status',
      );
    }
  }
}
