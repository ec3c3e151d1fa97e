/**
 * A journal view built lazily: a base view plus the decoded events after it, folded into
 * its contents (view-state.ts) when it is first read. Never throws: decoding checked
 * everything.
 */
import { AppError } from '../../common/errors';
import type { DecodedEvent } from './decoded-event-types';
import type {
  AgentConfigRef,
  AgentRosterRef,
  JournalAnomaly,
  JournalView,
  Lookup,
  LostCheckpoint,
  PaymentPolicyRef,
  SpentPayment,
  SignedRootRef,
  SummaryRecord,
  TurnView,
} from './journal-view-types';
import type { MemoryState } from './memory-fold';
import { StateBuilder, turnIn, type ViewState } from './view-state';

/** What a view hands out as arrays, built from its state on first read. */
interface Listed {
  turns?: readonly TurnView[];
  openTurns?: readonly TurnView[];
  anomalies?: readonly JournalAnomaly[];
  acceptedLosses?: readonly LostCheckpoint[];
  spentPayments?: readonly SpentPayment[];
}

/**
 * A view: either materialized (`state`) or a base view plus the decoded events after it,
 * folded on first read. Reading folds from the nearest materialized ancestor, then drops
 * the link to it, so a long chain of unread views costs one fold.
 */
export class LazyView implements JournalView {
  readonly head: number;
  #base: LazyView | undefined;
  #events: readonly DecodedEvent[];
  #state: ViewState | undefined;
  readonly #listed: Listed = {};

  constructor(
    head: number,
    base: LazyView | undefined,
    events: readonly DecodedEvent[],
    state: ViewState | undefined,
  ) {
    this.head = head;
    this.#base = base;
    this.#events = events;
    this.#state = state;
  }

  get lastSignedRoot(): SignedRootRef | undefined {
    return this.#resolve().lastSignedRoot;
  }

  get turns(): readonly TurnView[] {
    return (this.#listed.turns ??= [...this.#resolve().turnsById.values()]);
  }

  get openTurns(): readonly TurnView[] {
    const state = this.#resolve();
    return (this.#listed.openTurns ??= state.openTurnIds.map((id) => turnIn(state, id)));
  }

  get turnIdsByKey(): Lookup<string, string> {
    return this.#resolve().turnIdsByKey;
  }

  get turnsById(): Lookup<string, TurnView> {
    return this.#resolve().turnsById;
  }

  newestTurns(): Iterable<TurnView> {
    return this.#resolve().turnsById.valueSeq().reverse();
  }

  get anomalies(): readonly JournalAnomaly[] {
    return (this.#listed.anomalies ??= this.#resolve().anomalies.toArray());
  }

  get newestAgentConfig(): AgentConfigRef | undefined {
    return this.#resolve().newestAgentConfig;
  }
  get agentConfigs(): Lookup<string, AgentConfigRef> {
    return this.#resolve().agentConfigs;
  }

  get newestAgentRoster(): AgentRosterRef | undefined {
    return this.#resolve().newestAgentRoster;
  }

  newestSummaries(): Iterable<SummaryRecord> {
    return this.#resolve().summaries.valueSeq().reverse();
  }

  summaryAt(position: number): SummaryRecord | undefined {
    return this.#resolve().summaries.get(position);
  }

  get acceptedLosses(): readonly LostCheckpoint[] {
    return (this.#listed.acceptedLosses ??= this.#resolve().acceptedLosses.toArray());
  }

  get paymentPolicy(): PaymentPolicyRef | undefined {
    return this.#resolve().paymentPolicy;
  }

  get spentPayments(): readonly SpentPayment[] {
    return (this.#listed.spentPayments ??= this.#resolve().spentPayments.toArray());
  }

  get memory(): MemoryState {
    return this.#resolve().memory;
  }

  #resolve(): ViewState {
    if (this.#state !== undefined) return this.#state;
    const chain: LazyView[] = [this];
    let base = this.#base;
    while (base !== undefined && base.#state === undefined) {
      chain.push(base);
      base = base.#base;
    }
    const state = base === undefined ? undefined : base.#state;
    if (state === undefined) throw new AppError('internal', 'journal view: a view has no base');
    const builder = new StateBuilder(state);
    for (const view of chain.reverse()) {
      for (const event of view.#events) builder.apply(event);
    }
    const built = builder.build();
    this.#state = built;
    this.#base = undefined;
    this.#events = [];
    return built;
  }
}
