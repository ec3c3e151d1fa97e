import { Counter, Histogram, type Registry } from 'prom-client';
import type { TurnOutcome } from '../turn/turn-outcome';
import type { TurnStep } from '../turn/turn-records';

/**
 * The harness's Prometheus metrics, registered on the registry `main.ts` serves on the side
 * port. Labels are closed sets (outcome kinds, step kinds, token directions), never ids or
 * tool names the model chose, so cardinality stays fixed.
 */
export interface HarnessMetrics {
  /** Turns settled, by outcome (`completed`, `awaiting_approval`, ..., `error` for a broken call). */
  readonly turns: Counter<'outcome'>;
  readonly turnDuration: Histogram<'outcome'>;
  /** Committed steps, by kind. */
  readonly steps: Counter<'kind'>;
  /** How long the control plane took to ack a step (the journal append). */
  readonly stepCommitDuration: Histogram<'kind'>;
  /** Model round trips, first request to settled answer. */
  readonly modelCallDuration: Histogram;
  readonly modelTokens: Counter<'direction'>;
  /** Tool results that report an error (denials excluded). */
  readonly toolErrors: Counter;
}

/** Registers the harness metrics on `registry`. */
export function createHarnessMetrics(registry: Registry): HarnessMetrics {
  const registers = [registry];
  return {
    turns: new Counter({
      name: 'polychrome_harness_turns_total',
      help: 'Turns the harness ran, by how they ended.',
      labelNames: ['outcome'],
      registers,
    }),
    turnDuration: new Histogram({
      name: 'polychrome_harness_turn_duration_seconds',
      help: 'Wall time of a turn call, start to terminal message.',
      labelNames: ['outcome'],
      buckets: [0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300],
      registers,
    }),
    steps: new Counter({
      name: 'polychrome_harness_steps_total',
      help: 'Steps committed to the journal, by kind.',
      labelNames: ['kind'],
      registers,
    }),
    stepCommitDuration: new Histogram({
      name: 'polychrome_harness_step_commit_duration_seconds',
      help: 'Time from sending a step to the control plane acking its journal append.',
      labelNames: ['kind'],
      buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5],
      registers,
    }),
    modelCallDuration: new Histogram({
      name: 'polychrome_harness_model_call_duration_seconds',
      help: 'Model round trips, request to settled answer.',
      buckets: [0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
      registers,
    }),
    modelTokens: new Counter({
      name: 'polychrome_harness_model_tokens_total',
      help: 'Model tokens, by direction (input, output).',
      labelNames: ['direction'],
      registers,
    }),
    toolErrors: new Counter({
      name: 'polychrome_harness_tool_errors_total',
      help: 'Tool results that report an error (denials not counted).',
      registers,
    }),
  };
}

/** Records a committed step and its ack latency (none for a step carried with the result). */
export function observeStep(
  metrics: HarnessMetrics,
  step: TurnStep,
  commitSeconds: number | undefined,
): void {
  metrics.steps.inc({ kind: step.kind });
  if (commitSeconds !== undefined) {
    metrics.stepCommitDuration.observe({ kind: step.kind }, commitSeconds);
  }
  switch (step.kind) {
    case 'model_call':
      metrics.modelCallDuration.observe(
        Math.max(0, step.record.finishedAtMs - step.record.startedAtMs) / 1000,
      );
      metrics.modelTokens.inc({ direction: 'input' }, step.record.usage.inputTokens);
      metrics.modelTokens.inc({ direction: 'output' }, step.record.usage.outputTokens);
      return;
    case 'tool_result':
      if (step.record.isError && !step.record.denied) metrics.toolErrors.inc();
      return;
    case 'tool_call':
    case 'agent_config':
    case 'agent_handoff':
      return;
    default: {
      const never: never = step;
      return never;
    }
  }
}

/** Records a settled turn (`error` when the call broke instead of reporting an outcome). */
export function observeTurn(
  metrics: HarnessMetrics,
  outcome: TurnOutcome['kind'] | 'error',
  seconds: number,
): void {
  metrics.turns.inc({ outcome });
  metrics.turnDuration.observe({ outcome }, seconds);
}
