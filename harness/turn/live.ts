import { AppError } from '../../common/errors';
import { decodePayload, isEventKind } from '../../common/event-kinds';
import type { ModelProvider } from '../../common/model/model-port';
import type { ToolCallOptions, ToolCallRequest, ToolOutcome, ToolRunner } from './ports/tool-port';
import type { ReplayEntry } from './journal-turns';
import type { ReplayAttempt } from './replay-options';
import { runTurn } from './run-turn';
import type { Clock } from './effect-calls';
import { type TurnOutcome } from './turn-outcome';
import { ToolEffect } from './turn-records';
import { whatIf, type WhatIfChange, type WhatIfOptions, type WhatIfReport } from './what-if';

/**
 * `--live` (docs/replay.md, "What-if"): after a what-if finds where the recorded run no
 * longer follows, a scratch run of that turn goes on from there through the harness's own
 * shell (`run-turn.ts`) and turn machine. The steps up to the departure are the changed
 * journal's, reused as a resumed turn reuses them; from there the model is called live,
 * pure tools the harness can run are run, and a side-effecting tool never runs: its
 * recorded result is reused when the turn recorded a call with the same name and
 * arguments, and otherwise the run stops there, saying what it would have called. Steps go
 * to a scratch list; nothing is written to any journal.
 */

/** What the scratch run needs besides the what-if's options. */
export interface LiveOptions extends WhatIfOptions {
  /** The model for a configuration's model name (the harness's adapters). */
  readonly modelFor: (model: string) => ModelProvider;
  /** Runs the pure tools named in {@link runnable} (the harness's built-in tools). */
  readonly tools: ToolRunner;
  readonly runnable: ReadonlySet<string>;
  readonly clock: Clock;
  readonly signal?: AbortSignal;
}

/** One tool call of the scratch run. */
export interface LiveToolCall {
  readonly name: string;
  readonly argsJson: string;
  /** `ran`: a pure tool, run; `reused`: the recorded result; `stopped`: not run, the run ends. */
  readonly how: 'ran' | 'reused' | 'stopped';
  readonly content?: string;
  readonly isError?: boolean;
}

/** How the scratch run went. */
export interface LiveRun {
  readonly turnId: string;
  /** The journal position the run went on from (the departure). */
  readonly from: number;
  /** `completed`, `awaiting_approval`, `awaiting_answer`, `stopped` (a side effect it would not run), `failed`, ... */
  readonly outcome: TurnOutcome['kind'] | 'stopped';
  /** The final text when it completed. */
  readonly text?: string;
  readonly modelCalls: number;
  readonly toolCalls: readonly LiveToolCall[];
  /** Why it ended, in a sentence. */
  readonly message: string;
}

/** The what-if report and, when the run departs, the scratch run from there. */
export interface LiveWhatIf {
  readonly report: WhatIfReport;
  readonly live?: LiveRun;
}

/**
 * Runs the what-if of `change`, then the scratch run from its departure.
 *
 * @throws AppError as {@link whatIf}; `failed_precondition` when the departing attempt
 *   cannot be found (a bug).
 */
export async function liveWhatIf(
  entries: readonly ReplayEntry[],
  change: WhatIfChange,
  options: LiveOptions,
): Promise<LiveWhatIf> {
  const attempts: ReplayAttempt[] = [];
  const report = whatIf(entries, change, { ...options, onAttempt: (a) => attempts.push(a) });
  const d = report.divergence;
  if (d === undefined) return { report };
  const attempt = attempts
    .filter((a) => a.turnId === d.turnId && a.dispatchPosition < d.position)
    .at(-1);
  if (attempt === undefined) {
    throw new AppError(
      'failed_precondition',
      `no attempt of turn ${d.turnId} before position ${String(d.position)}`,
    );
  }
  const input = {
    ...attempt.input,
    recordedSteps: [
      ...attempt.input.recordedSteps,
      ...attempt.steps.filter((s) => s.position < d.position).map((s) => s.step),
    ],
  };
  const toolCalls: LiveToolCall[] = [];
  // A call the run may not make ends it at once: the shell starts nothing after an abort.
  const stop = new AbortController();
  options.signal?.addEventListener('abort', () => stop.abort(options.signal?.reason), {
    once: true,
  });
  const policy = livePolicy(input.tools, recordedResults(entries, d.turnId), options, {
    log: toolCalls,
    stop: () => stop.abort(new Error('a call the scratch run may not make')),
  });
  let modelCalls = 0;
  const provider = options.modelFor(input.model?.model ?? '');
  const model: ModelProvider = {
    ...(provider.parameters === undefined ? {} : { parameters: provider.parameters }),
    complete: (request, callOptions) => {
      modelCalls += 1;
      return provider.complete(request, callOptions);
    },
  };
  const outcome = await runTurn(
    input,
    {
      modelFor: () => model,
      tools: policy,
      trustedTools: policy,
      steps: { commit: () => Promise.resolve() },
      clock: options.clock,
      ids: options.ids,
      approvalVerifier: options.verifier,
      approvalPublicKey: options.resigner.publicKey,
    },
    stop.signal,
  );
  const stopped = toolCalls.find((c) => c.how === 'stopped');
  return {
    report,
    live: {
      turnId: d.turnId,
      from: d.position,
      outcome: stopped === undefined ? outcome.kind : 'stopped',
      ...(outcome.kind === 'completed' ? { text: outcome.text } : {}),
      modelCalls,
      toolCalls,
      message: stopped === undefined ? messageOf(outcome) : stoppedMessage(stopped),
    },
  };
}

/** A turn's recorded tool results by tool name and canonical arguments. */
export type Recorded = Map<string, ToolOutcome>;

const callKey = (name: string, argsJson: string): string => `${name}\u0000${argsJson}`;

/** The turn's recorded tool results, by tool name and canonical arguments. */
export function recordedResults(entries: readonly ReplayEntry[], turnId: string): Recorded {
  const calls = new Map<string, string>();
  const out: Recorded = new Map();
  for (const entry of entries) {
    if (!isEventKind(entry.kind)) continue;
    if (entry.kind === 'tool_call') {
      const call = decodePayload('tool_call', entry.payload);
      if (call.turnId === turnId) calls.set(call.toolCallId, callKey(call.toolName, call.argsJson));
    }
    if (entry.kind === 'tool_result') {
      const result = decodePayload('tool_result', entry.payload);
      const key = calls.get(result.toolCallId);
      if (result.turnId === turnId && key !== undefined && !out.has(key)) {
        out.set(key, { content: result.content, isError: result.isError });
      }
    }
  }
  return out;
}

/** The scratch run's tools: pure ones run, side effects reused from the record or refused. */
export function livePolicy(
  tools: readonly { readonly name: string; readonly effect: ToolEffect }[],
  recorded: Recorded,
  options: Pick<LiveOptions, 'tools' | 'runnable'>,
  { log, stop }: { readonly log: LiveToolCall[]; readonly stop: () => void },
): ToolRunner {
  return {
    async call(request: ToolCallRequest, callOptions: ToolCallOptions): Promise<ToolOutcome> {
      const tool = tools.find((t) => t.name === request.name);
      const base = { name: request.name, argsJson: request.argsJson };
      if (tool?.effect === ToolEffect.Pure && options.runnable.has(request.name)) {
        const outcome = await options.tools.call(request, callOptions);
        log.push({ ...base, how: 'ran', ...outcome });
        return outcome;
      }
      const reused = recorded.get(callKey(request.name, request.argsJson));
      if (reused !== undefined) {
        log.push({ ...base, how: 'reused', ...reused });
        return reused;
      }
      log.push({ ...base, how: 'stopped' });
      stop();
      throw new AppError(
        'failed_precondition',
        `the scratch run does not call ${request.name} (not a pure tool it can run, and no recorded call has these arguments)`,
      );
    },
  };
}

function stoppedMessage(call: LiveToolCall): string {
  return `stopped: it would have called ${call.name} ${call.argsJson}, which it does not run (side-effecting or not runnable here) and the turn recorded no call with these arguments`;
}

function messageOf(outcome: TurnOutcome): string {
  switch (outcome.kind) {
    case 'completed':
      return `completed in ${String(outcome.steps)} steps${outcome.fallback ? ' (the fallback reply)' : ''}`;
    case 'awaiting_approval':
      return `stopped: the call of ${outcome.request.toolName} waits for an approval, which a scratch run does not ask for`;
    case 'awaiting_answer':
      return `stopped: the agent asks the user a question (${outcome.request.question})`;
    case 'handed_off':
      return 'stopped: the agent handed the conversation off';
    case 'ambiguous':
      return `stopped: ${outcome.reason}`;
    case 'failed':
      return `failed: ${outcome.message}`;
    case 'cancelled':
      return `cancelled: ${outcome.reason}`;
  }
}
