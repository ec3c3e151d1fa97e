import { Counter, Gauge, Histogram, type Registry } from 'prom-client';

/** Events of a conversation lease, as `ConversationLeases` reports them. */
export const LeaseEventLabel = {
  Acquired: 'acquired',
  TakenOver: 'taken_over',
  Renewed: 'renewed',
  Lost: 'lost',
  Released: 'released',
} as const;
export type LeaseEventLabel = (typeof LeaseEventLabel)[keyof typeof LeaseEventLabel];

/** How a turn dispatch ended, as the turn coordinator's observer reports it. */
export const TurnOutcomeLabel = {
  Settled: 'settled',
  AwaitingApproval: 'awaiting_approval',
  AwaitingAnswer: 'awaiting_answer',
  Ambiguous: 'ambiguous',
  Orphaned: 'orphaned',
} as const;
export type TurnOutcomeLabel = (typeof TurnOutcomeLabel)[keyof typeof TurnOutcomeLabel];

/** How a turn the control plane resumed by itself ended (operator/turns/turn-resumer.ts). */
export const ResumedOutcomeLabel = {
  Complete: 'complete',
  Paused: 'paused',
  Ambiguous: 'ambiguous',
  Handoff: 'handoff',
  Orphaned: 'orphaned',
} as const;
export type ResumedOutcomeLabel = (typeof ResumedOutcomeLabel)[keyof typeof ResumedOutcomeLabel];

/** Results of a Kubernetes Event write, as the controller's Event recorder reports them. */
export const KubeEventLabel = {
  Created: 'created',
  SeriesUpdated: 'series_updated',
  Failed: 'failed',
} as const;
export type KubeEventLabel = (typeof KubeEventLabel)[keyof typeof KubeEventLabel];

/** The control plane's own metrics (the public API registers its own, `ApiMetrics`). */
export interface ControlPlaneMetrics {
  readonly passes: Counter<'result'>;
  readonly passSeconds: Histogram;
  readonly leaseEvents: Counter<'event'>;
  readonly turns: Counter<'outcome'>;
  readonly turnSeconds: Histogram;
  readonly turnsResumed: Counter<'outcome'>;
  readonly statusWrites: Counter<'result'>;
  readonly commitSeconds: Histogram;
  readonly kubeEvents: Counter<'result'>;
  readonly summaries: Counter<'outcome'>;
}

/**
 * Registers the control plane's metrics on `registry`. Every lease event, turn outcome and
 * Event write result is exported at 0 from the start: `increase()` over a series that
 * appears at 1 sees no increase, so without the zero the first quarantined turn or
 * take-over after a restart would not alert.
 *
 * @throws Error from prom-client when `registry` already holds metrics of these names.
 */
export function createControlPlaneMetrics(registry: Registry): ControlPlaneMetrics {
  const registers = [registry];
  const leaseEvents = new Counter({
    name: 'polychrome_lease_transitions_total',
    help: 'Conversation lease events on this replica, by event: acquired, taken_over (from an expired holder), renewed, lost, released.',
    labelNames: ['event'],
    registers,
  });
  for (const event of Object.values(LeaseEventLabel)) leaseEvents.inc({ event }, 0);
  const turns = new Counter({
    name: 'polychrome_turns_total',
    help: 'Turn dispatches by how they ended (settled, awaiting_approval, awaiting_answer, ambiguous, orphaned).',
    labelNames: ['outcome'],
    registers,
  });
  for (const outcome of Object.values(TurnOutcomeLabel)) turns.inc({ outcome }, 0);
  const turnsResumed = new Counter({
    name: 'polychrome_turns_resumed_total',
    help: 'Interrupted turns this replica resumed with no request (after taking a conversation over, or at start), by how they ended (complete, paused, ambiguous, handoff, orphaned: interrupted again).',
    labelNames: ['outcome'],
    registers,
  });
  for (const outcome of Object.values(ResumedOutcomeLabel)) turnsResumed.inc({ outcome }, 0);
  const kubeEvents = new Counter({
    name: 'polychrome_kubernetes_events_total',
    help: 'Kubernetes Event writes about Conversations, by result (created, series_updated, failed).',
    labelNames: ['result'],
    registers,
  });
  for (const result of Object.values(KubeEventLabel)) kubeEvents.inc({ result }, 0);
  const summaries = new Counter({
    name: 'polychrome_summaries_total',
    help: 'Summaries of earlier turns this replica tried to make (docs/turns.md, "Summaries"), by outcome: made, stale (the turns changed meanwhile; dropped), failed (the model or the commit failed; the next settled turn tries again).',
    labelNames: ['outcome'],
    registers,
  });
  for (const outcome of ['made', 'stale', 'failed']) summaries.inc({ outcome }, 0);
  return {
    kubeEvents,
    summaries,
    passes: new Counter({
      name: 'polychrome_reconcile_total',
      help: 'Reconcile passes by result.',
      labelNames: ['result'],
      registers,
    }),
    passSeconds: new Histogram({
      name: 'polychrome_reconcile_duration_seconds',
      help: 'Duration of reconcile passes.',
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
      registers,
    }),
    leaseEvents,
    turns,
    turnsResumed,
    turnSeconds: new Histogram({
      name: 'polychrome_turn_duration_seconds',
      help: 'From dispatch to batch two (or to giving up), harness time included.',
      buckets: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120],
      registers,
    }),
    statusWrites: new Counter({
      name: 'polychrome_turn_status_writes_total',
      help: 'Turn-status writes to Conversations, by result (ok, failed); changes that came close together share one.',
      labelNames: ['result'],
      registers,
    }),
    commitSeconds: new Histogram({
      name: 'polychrome_journal_commit_duration_seconds',
      help: 'Durable appends to the state plane made by turns.',
      buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25],
      registers,
    }),
  };
}

/** `polychrome_conversations`: the Conversations this replica sees, by phase, read at scrape. */
export function conversationsGauge(registry: Registry, known: () => Iterable<object>): void {
  new Gauge({
    name: 'polychrome_conversations',
    help: 'Conversations this replica sees, by phase.',
    labelNames: ['phase'],
    registers: [registry],
    collect() {
      this.reset();
      for (const obj of known()) {
        const status: unknown = Reflect.get(obj, 'status');
        const phase: unknown =
          typeof status === 'object' && status !== null ? Reflect.get(status, 'phase') : undefined;
        this.inc({ phase: typeof phase === 'string' && phase !== '' ? phase : 'Unknown' });
      }
    },
  });
}
