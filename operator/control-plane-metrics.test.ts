import { describe, expect, it } from '@jest/globals';
import { Registry } from 'prom-client';
import {
  createControlPlaneMetrics,
  KubeEventLabel,
  LeaseEventLabel,
  ResumedOutcomeLabel,
  TurnOutcomeLabel,
} from './control-plane-metrics';
import type { ResumedOutcome } from './turns/resume-turns';
import { EventWriteResult } from './controller/event-recorder';
import type { ConversationLeasesOptions } from './lease/lease-options';
import type { TurnStatusChange } from './turns/turn-status';

type LeaseEvent = Parameters<NonNullable<ConversationLeasesOptions['onTransition']>>[0];
// What the coordinator's observer reports: batch two's status kind, or `orphaned`.
// A resolution is no dispatch's end (docs/turns.md, "Resolving a quarantined turn").
type TurnOutcome =
  | Exclude<
      TurnStatusChange['kind'],
      'running' | 'resolved' | 'journal_rolled_back' | 'journal_restored' | 'rollback_accepted'
    >
  | 'orphaned';

/** `name{label="value"} n` lines of the registry's exposition text, as `value -> n`. */
async function series(
  registry: Registry,
  name: string,
  label: string,
): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  const line = new RegExp(`^${name}\\{${label}="([^"]+)"\\} (\\S+)$`);
  for (const l of (await registry.metrics()).split('\n')) {
    const m = line.exec(l);
    if (m !== null) out.set(m[1] ?? '', Number(m[2]));
  }
  return out;
}

describe('createControlPlaneMetrics', () => {
  it('exports every lease event and turn outcome at 0 before any happened, so increase() sees the first one', async () => {
    const registry = new Registry();
    createControlPlaneMetrics(registry);
    const leases = await series(registry, 'polychrome_lease_transitions_total', 'event');
    expect(Object.fromEntries(leases)).toEqual({
      acquired: 0,
      taken_over: 0,
      renewed: 0,
      lost: 0,
      released: 0,
    });
    const turns = await series(registry, 'polychrome_turns_total', 'outcome');
    expect(Object.fromEntries(turns)).toEqual({
      settled: 0,
      awaiting_approval: 0,
      awaiting_answer: 0,
      ambiguous: 0,
      orphaned: 0,
    });
    const kubeEvents = await series(registry, 'polychrome_kubernetes_events_total', 'result');
    expect(Object.fromEntries(kubeEvents)).toEqual({ created: 0, series_updated: 0, failed: 0 });
    const resumed = await series(registry, 'polychrome_turns_resumed_total', 'outcome');
    expect(Object.fromEntries(resumed)).toEqual({
      complete: 0,
      paused: 0,
      ambiguous: 0,
      handoff: 0,
      orphaned: 0,
    });
  });

  it('counts on top of the zeroed series', async () => {
    const registry = new Registry();
    const metrics = createControlPlaneMetrics(registry);
    metrics.turns.inc({ outcome: TurnOutcomeLabel.Ambiguous });
    metrics.leaseEvents.inc({ event: LeaseEventLabel.TakenOver });
    metrics.leaseEvents.inc({ event: LeaseEventLabel.TakenOver });
    expect((await series(registry, 'polychrome_turns_total', 'outcome')).get('ambiguous')).toBe(1);
    expect(
      (await series(registry, 'polychrome_lease_transitions_total', 'event')).get('taken_over'),
    ).toBe(2);
  });

  it('names exactly the events the leases report and the outcomes the coordinator reports', () => {
    // Records keyed by the source types: a new event or outcome fails to compile here.
    const events: Record<LeaseEvent, true> = {
      acquired: true,
      taken_over: true,
      renewed: true,
      lost: true,
      released: true,
    };
    const outcomes: Record<TurnOutcome, true> = {
      settled: true,
      awaiting_approval: true,
      awaiting_answer: true,
      ambiguous: true,
      orphaned: true,
    };
    expect(Object.values(LeaseEventLabel).sort()).toEqual(Object.keys(events).sort());
    expect(Object.values(TurnOutcomeLabel).sort()).toEqual(Object.keys(outcomes).sort());
    const resumed: Record<ResumedOutcome, true> = {
      complete: true,
      paused: true,
      ambiguous: true,
      handoff: true,
      orphaned: true,
    };
    expect(Object.values(ResumedOutcomeLabel).sort()).toEqual(Object.keys(resumed).sort());
    // The Event recorder's results are the metric's labels.
    expect(Object.values(KubeEventLabel).sort()).toEqual(Object.values(EventWriteResult).sort());
  });

  it('refuses a second registration on the same registry', () => {
    const registry = new Registry();
    createControlPlaneMetrics(registry);
    expect(() => createControlPlaneMetrics(registry)).toThrow(/already been registered/);
  });
});
