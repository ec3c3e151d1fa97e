/**
 * The summarizer (docs/turns.md, "Summaries"): the shell of summary-plan.ts, and the control
 * plane's one use of a model. After a turn settles, the turn runner hands it the
 * conversation's view; when the plan asks for a summary, it calls the model through the
 * same provider code the harness uses (common/model/), off every turn's path, then claims
 * the conversation as a turn does and commits a `summary` if the plan still holds. At most
 * one summary is in the making per conversation on a replica; one that fails is logged and
 * counted, and the next settled turn plans again. A turn never waits for it.
 */
import { AppError } from '../../common/errors';
import { EventKind } from '../../common/event-kinds';
import type { Logger } from 'pino';
import type { ModelProvider } from '../../common/model/model-port';
import {
  summaryRequest,
  summaryRequestSha256,
  type SummaryModel,
} from '../../common/model/summary-request';
import type { Conversation } from '../api/v1alpha1/conversation-types';
import type { LeaseHandle } from '../lease/lease-source';
import { historyBudgetOf } from './history-window';
import type { JournalView } from './journal-view-types';
import { planned, type PlannedEvent } from './plan-common';
import { planSummary, stillValid, type SummaryTask } from './summary-plan';

/** The model a summarizer calls, and the settings its requests are sent with. */
export interface SummaryModelClient {
  readonly provider: ModelProvider;
  readonly settings: SummaryModel;
}

/** How the summarizer claims a conversation and commits to its journal (the turn runner's). */
export interface SummaryJournal {
  claim<T>(
    conversation: Conversation,
    signal: AbortSignal,
    work: (lease: LeaseHandle, view: JournalView) => Promise<T>,
  ): Promise<T>;
  commit(uid: string, lease: LeaseHandle, events: readonly PlannedEvent[]): Promise<unknown>;
}

/** The outcome of one summary attempt, for the metrics. */
export type SummaryOutcome = 'made' | 'stale' | 'failed';

export interface SummarizerOptions {
  readonly model: SummaryModelClient;
  readonly journal: SummaryJournal;
  readonly logger: Logger;
  /** POLYCHROME_HISTORY_TOKENS: the budget where the agent sets none. */
  readonly historyTokens: number;
  readonly nowMs: () => number;
  readonly observer?: { onSummary?(outcome: SummaryOutcome, seconds: number): void };
}

/** What a turn coordinator has that its summarizer uses. */
export interface CoordinatorParts {
  readonly historyTokens: number;
  readonly nowMs: () => number;
  /** The coordinator's claims (turn-claims.ts). */
  readonly claims: {
    run<T>(c: Conversation, s: AbortSignal, work: (lease: LeaseHandle) => Promise<T>): Promise<T>;
  };
}

/** The coordinator's runner: its checked view and its commit (turn-runner.ts). */
type RunnerPort = () => {
  startView(c: Conversation, lease: LeaseHandle, s: AbortSignal): Promise<JournalView>;
  commit(uid: string, lease: LeaseHandle, events: readonly PlannedEvent[]): Promise<unknown>;
};

/**
 * A turn coordinator's summarizer, or undefined without a summary model: it claims the
 * conversation and appends through the runner exactly as a turn's events are.
 */
export function summarizerFor(
  options: {
    readonly summaryModel?: SummaryModelClient;
    readonly logger: Logger;
    readonly observer?: SummarizerOptions['observer'];
  },
  parts: CoordinatorParts,
  runner: RunnerPort,
): Summarizer | undefined {
  const { summaryModel: model, logger, observer } = options;
  if (model === undefined) return undefined;
  const { claims, historyTokens, nowMs } = parts;
  const journal: SummaryJournal = {
    claim: (conversation, signal, work) =>
      claims.run(conversation, signal, async (lease) =>
        work(lease, await runner().startView(conversation, lease, signal)),
      ),
    commit: (uid, lease, events) => runner().commit(uid, lease, events),
  };
  return new Summarizer({
    model,
    journal,
    logger,
    historyTokens,
    nowMs,
    ...(observer === undefined ? {} : { observer }),
  });
}

export class Summarizer {
  private readonly making = new Map<string, Promise<void>>();
  private readonly stopping = new AbortController();

  constructor(private readonly options: SummarizerOptions) {}

  /** Starts the summary `view` calls for, unless one is in the making for the conversation. */
  consider(conversation: Conversation, view: JournalView): void {
    const uid = conversation.metadata.uid ?? '';
    if (this.stopping.signal.aborted || this.making.has(uid)) return;
    const budget = historyBudgetOf(conversation, this.options.historyTokens);
    const task = planSummary(view, budget);
    if (task === undefined) return;
    const started = performance.now();
    const done = this.make(conversation, task)
      .then(
        (outcome) => outcome,
        (error: unknown): SummaryOutcome => {
          if (!this.stopping.signal.aborted) {
            this.options.logger.warn(
              { err: error, conversation: uid, toPosition: task.toPosition },
              'could not make a summary; the next settled turn tries again (turns go on with their window)',
            );
          }
          return 'failed';
        },
      )
      .then((outcome) => {
        this.making.delete(uid);
        this.options.observer?.onSummary?.(outcome, (performance.now() - started) / 1000);
      });
    this.making.set(uid, done);
  }

  /** Cancels the summaries in the making and waits for them to end. */
  async close(): Promise<void> {
    this.stopping.abort(new AppError('unavailable', 'the control plane is shutting down'));
    await Promise.all(this.making.values());
  }

  private async make(conversation: Conversation, task: SummaryTask): Promise<SummaryOutcome> {
    const { model, journal, logger } = this.options;
    const signal = this.stopping.signal;
    const response = await model.provider.complete(summaryRequest(task.input), { signal });
    const text = response.content
      .map((block) => (block.type === 'text' ? block.text : ''))
      .join('')
      .trim();
    if (text === '') {
      throw new AppError(
        'unavailable',
        `the model ${response.model} answered the summary request with no text`,
      );
    }
    const uid = conversation.metadata.uid ?? '';
    return journal.claim(conversation, signal, async (lease, view) => {
      if (!stillValid(view, task, model.settings)) {
        logger.info(
          { conversation: uid, toPosition: task.toPosition },
          'a summary was made for turns that changed since (erased, or summarized already); it is dropped',
        );
        return 'stale';
      }
      await journal.commit(uid, lease, [
        summaryEvent(task, model.settings, text, response, this.options.nowMs()),
      ]);
      logger.info(
        { conversation: uid, fromPosition: task.fromPosition, toPosition: task.toPosition },
        'summary committed',
      );
      return 'made';
    });
  }
}

/** The `summary` event of `task`, made with `settings`, whose answer was `text`. */
export function summaryEvent(
  task: SummaryTask,
  settings: SummaryModel,
  text: string,
  response: { readonly usage: { readonly inputTokens: number; readonly outputTokens: number } },
  nowMs: number,
): PlannedEvent {
  return planned(EventKind.Summary, {
    fromPosition: task.fromPosition,
    toPosition: task.toPosition,
    previousPosition: task.previous?.position ?? 0,
    model: settings.model,
    maxTokens: settings.maxTokens,
    requestSha256: Buffer.from(summaryRequestSha256(task.input, settings)),
    text,
    inputTokens: response.usage.inputTokens,
    outputTokens: response.usage.outputTokens,
    createdAtMs: nowMs,
  });
}
