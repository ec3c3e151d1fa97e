/**
 * The state a journal view folds its decoded events into (decoded-event.ts), and the fold:
 * persistent containers a view extended by a few events shares with the view it extends.
 * Never throws: decoding checked everything.
 */
import { AppError } from '../../common/errors';
import type { EventKind } from '../../common/event-kinds';
import {
  advanceStanding,
  isSettled,
  NEW_TURN,
  StandingState,
  type StandingEvent,
} from '../../common/turn-standing';
import type { MessageReceived } from '../../proto/gen/polychrome/events/v1/events';
import { EMPTY_MEMORY, MemoryFold, type MemoryState } from './memory-fold';
import { recordedAttribution } from './decoded-event';
import type { DecodedEvent, TurnEventKind } from './decoded-event-types';
import { eraseInTurn, type ErasedRef } from './erased-entries';
import { List, Map as PersistentMap, OrderedMap } from 'immutable';
import type {
  AgentConfigRef,
  AgentRosterRef,
  LostCheckpoint,
  PaymentPolicyRef,
  SpentPayment,
  SignedRootRef,
  SummaryRecord,
  TurnView,
} from './journal-view-types';

import { AnomalyProblem, type JournalAnomaly } from './journal-view-types';

/**
 * The materialized contents of a view. Persistent: a view extended by a few events shares
 * everything but the paths to what changed with the view it extends, so extending costs
 * O(log turns) per event, not a copy of every turn. Never modified once a view holds it.
 */
export interface ViewState {
  readonly lastSignedRoot: SignedRootRef | undefined;
  /** Insertion order is message order: a turn is added by its `message_received`. */
  readonly turnsById: OrderedMap<string, TurnView>;
  readonly turnIdsByKey: PersistentMap<string, string>;
  /** The turns that are not settled, by message position: few, so copied when they change. */
  readonly openTurnIds: readonly string[];
  readonly anomalies: List<JournalAnomaly>;
  readonly acceptedLosses: List<LostCheckpoint>;
  readonly paymentPolicy: PaymentPolicyRef | undefined;
  readonly spentPayments: List<SpentPayment>;
  readonly newestAgentConfig: AgentConfigRef | undefined;
  /** The newest configuration of each agent, by name: few, one per agent. */
  readonly agentConfigs: PersistentMap<string, AgentConfigRef>;
  readonly newestAgentRoster: AgentRosterRef | undefined;
  /** The summaries that are not erased, by position (oldest first). */
  readonly summaries: OrderedMap<number, SummaryRecord>;
  /** At most the memory's key limit (common/memory.ts): copied when it changes. */
  readonly memory: MemoryState;
}

/** The contents of an empty journal. */
export function emptyState(): ViewState {
  return {
    lastSignedRoot: undefined,
    turnsById: OrderedMap(),
    turnIdsByKey: PersistentMap(),
    openTurnIds: [],
    anomalies: List(),
    acceptedLosses: List(),
    paymentPolicy: undefined,
    spentPayments: List(),
    newestAgentConfig: undefined,
    agentConfigs: PersistentMap(),
    newestAgentRoster: undefined,
    summaries: OrderedMap(),
    memory: EMPTY_MEMORY,
  };
}

/** What a turn's `message_received` says of it. */
export type TurnOpening = Pick<
  TurnView,
  'turnId' | 'idempotencyKey' | 'text' | 'attribution' | 'receivedAtMs' | 'messagePosition'
>;

/** A turn its message just opened: nothing else of it is recorded yet. */
export function openedTurn(opening: TurnOpening): TurnView {
  return {
    ...opening,
    directive: undefined,
    dispatches: [],
    steps: [],
    approvalRequests: [],
    payments: [],
    approvalResponses: [],
    questionRequests: [],
    questionResponses: [],
    cancellations: [],
    expiries: [],
    terminal: undefined,
    resolutions: [],
    standingFold: NEW_TURN,
  };
}

export function turnIn(state: ViewState, turnId: string): TurnView {
  const turn = state.turnsById.get(turnId);
  if (turn === undefined) throw new AppError('internal', `journal view: no turn ${turnId}`);
  return turn;
}

/**
 * A working copy of a state: mutable copies of its persistent containers (which never
 * change what the state holds), and a copy of the open turns once they change.
 */
export class StateBuilder {
  private lastSignedRoot: SignedRootRef | undefined;
  private readonly turnsById: OrderedMap<string, TurnView>;
  private readonly turnIdsByKey: PersistentMap<string, string>;
  private openTurnIds: readonly string[];
  private openTurnsCopied = false;
  private readonly anomalies: List<JournalAnomaly>;
  private newestAgentConfig: AgentConfigRef | undefined;
  private agentConfigs: PersistentMap<string, AgentConfigRef>;
  private newestAgentRoster: AgentRosterRef | undefined;
  private readonly acceptedLosses: List<LostCheckpoint>;
  private paymentPolicy: PaymentPolicyRef | undefined;
  private readonly spentPayments: List<SpentPayment>;
  private readonly summaries: OrderedMap<number, SummaryRecord>;
  private readonly memory: MemoryFold;

  constructor(state: ViewState) {
    this.memory = new MemoryFold(state.memory);
    this.lastSignedRoot = state.lastSignedRoot;
    this.turnsById = state.turnsById.asMutable();
    this.turnIdsByKey = state.turnIdsByKey.asMutable();
    this.openTurnIds = state.openTurnIds;
    this.anomalies = state.anomalies.asMutable();
    this.newestAgentConfig = state.newestAgentConfig;
    this.agentConfigs = state.agentConfigs;
    this.newestAgentRoster = state.newestAgentRoster;
    this.acceptedLosses = state.acceptedLosses.asMutable();
    this.paymentPolicy = state.paymentPolicy;
    this.spentPayments = state.spentPayments.asMutable();
    this.summaries = state.summaries.asMutable();
  }

  build(): ViewState {
    return {
      lastSignedRoot: this.lastSignedRoot,
      turnsById: this.turnsById.asImmutable(),
      turnIdsByKey: this.turnIdsByKey.asImmutable(),
      openTurnIds: this.openTurnIds,
      anomalies: this.anomalies.asImmutable(),
      acceptedLosses: this.acceptedLosses.asImmutable(),
      paymentPolicy: this.paymentPolicy,
      spentPayments: this.spentPayments.asImmutable(),
      newestAgentConfig: this.newestAgentConfig,
      agentConfigs: this.agentConfigs,
      newestAgentRoster: this.newestAgentRoster,
      summaries: this.summaries.asImmutable(),
      memory: this.memory.build(),
    };
  }

  apply(event: DecodedEvent): void {
    switch (event.type) {
      case 'message':
        return this.message(event.position, event.message, event.erased === true);
      case 'erasure':
        return this.erasure(event.erased);
      case 'root':
        this.lastSignedRoot = event.root;
        return;
      case 'config':
        this.newestAgentConfig = event.config;
        this.agentConfigs = this.agentConfigs.set(event.config.agent, event.config);
        return;
      case 'roster':
        this.newestAgentRoster = event.roster;
        return;
      case 'summary':
        this.summaries.set(event.summary.position, event.summary);
        return;
      case 'rollback_accepted':
        this.acceptedLosses.push(event.lost);
        return;
      case 'payment_policy':
        this.paymentPolicy = event.policy;
        return;
      case 'turn':
        if (event.spent !== undefined) this.spentPayments.push(event.spent);
        return this.turnEvent(event, event.kind, event.turnId, event.apply);
      case 'memory':
        return this.memory.apply(event.event);
      case 'ignored':
        return;
    }
  }

  private message(position: number, message: MessageReceived, erased: boolean): void {
    const kind = 'message_received';
    // An erased message keeps no key (erased-entries.ts).
    const firstTurnId = erased ? undefined : this.turnIdsByKey.get(message.idempotencyKey);
    if (firstTurnId !== undefined) {
      this.anomaly(
        position,
        kind,
        message.turnId,
        AnomalyProblem.DuplicateIdempotencyKey,
        `idempotency key ${JSON.stringify(message.idempotencyKey)} already opened turn ${firstTurnId}; the first message keeps the key`,
      );
    }
    if (this.turnsById.has(message.turnId)) {
      if (firstTurnId === undefined) {
        this.anomaly(
          position,
          kind,
          message.turnId,
          AnomalyProblem.DuplicateTurnId,
          `turn ${message.turnId} was already opened by another message; this one is ignored`,
        );
      }
      return;
    }
    const turn = openedTurn({
      turnId: message.turnId,
      idempotencyKey: message.idempotencyKey,
      text: message.text,
      attribution: recordedAttribution(message.attribution),
      receivedAtMs: message.receivedAtMs,
      messagePosition: position,
    });
    this.turnsById.set(turn.turnId, turn);
    this.setOpen(turn, true);
    if (firstTurnId === undefined && !erased) {
      this.turnIdsByKey.set(message.idempotencyKey, turn.turnId);
    }
  }

  /** An erasure record: the erased content leaves its turn, whose standing stays. */
  private erasure(erased: ErasedRef): void {
    // An erased summary is no longer one (summary-plan.ts makes a fresh one).
    if (erased.kind === 'summary') this.summaries.delete(erased.position);
    const turn = this.turnsById.get(erased.turnId);
    if (turn === undefined) return;
    const key = turn.idempotencyKey;
    const isMessage = erased.position === turn.messagePosition;
    if (isMessage && this.turnIdsByKey.get(key) === turn.turnId) this.turnIdsByKey.delete(key);
    this.replace(eraseInTurn(turn, erased));
  }

  private turnEvent(
    event: StandingEvent,
    kind: TurnEventKind,
    turnId: string,
    apply: (turn: TurnView) => TurnView,
  ): void {
    const { position } = event;
    const turn = this.turnsById.get(turnId);
    if (turn === undefined) {
      this.anomaly(
        position,
        kind,
        turnId,
        AnomalyProblem.UnknownTurn,
        `no message_received opened turn ${turnId}; the event is ignored`,
      );
      return;
    }
    // Where the turn stands is common/turn-standing.ts's rule: a resolution counts only for
    // a quarantined turn, and nothing else moves a settled one.
    const { state } = turn.standingFold.standing;
    if (kind === 'turn_resolved' && state !== StandingState.Quarantined) {
      this.anomaly(
        position,
        kind,
        turnId,
        AnomalyProblem.NotQuarantined,
        `turn ${turnId} is not quarantined (${turn.terminal?.kind ?? 'no terminal marker'}); the turn_resolved is ignored`,
      );
      return;
    }
    if (isSettled(state) && kind !== 'turn_resolved') {
      const terminal = kind === 'turn_complete' || kind === 'turn_ambiguous' || kind === 'handoff';
      this.anomaly(
        position,
        kind,
        turnId,
        AnomalyProblem.AfterTerminal,
        `turn ${turnId} was settled by ${turn.terminal?.kind ?? state} at position ${turn.terminal?.position ?? '?'}; ${terminal ? 'this marker is ignored' : 'the event is recorded, the turn stays settled'}`,
      );
      if (terminal) return;
    }
    if (kind === 'ingress_directive' && turn.directive !== undefined) {
      this.anomaly(
        position,
        kind,
        turnId,
        AnomalyProblem.DuplicateDirective,
        `turn ${turnId} already has the directive at position ${turn.directive.position}; it stands`,
      );
      return;
    }
    this.replace({ ...apply(turn), standingFold: advanceStanding(turn.standingFold, event) });
  }

  private replace(turn: TurnView): void {
    this.turnsById.set(turn.turnId, turn);
    this.setOpen(turn, !isSettled(turn.standingFold.standing.state));
  }

  /** Adds `turn` to the open turns (by message position) or takes it out. */
  private setOpen(turn: TurnView, open: boolean): void {
    const at = this.openTurnIds.indexOf(turn.turnId);
    if (open === at >= 0) return;
    const ids = this.openTurnsCopied ? (this.openTurnIds as string[]) : [...this.openTurnIds];
    this.openTurnIds = ids;
    this.openTurnsCopied = true;
    if (!open) {
      ids.splice(at, 1);
      return;
    }
    let index = ids.length;
    while (index > 0 && this.messagePosition(ids[index - 1]) > turn.messagePosition) index--;
    ids.splice(index, 0, turn.turnId);
  }

  private messagePosition(turnId: string | undefined): number {
    return (turnId === undefined ? undefined : this.turnsById.get(turnId))?.messagePosition ?? -1;
  }

  private anomaly(
    position: number,
    kind: EventKind,
    turnId: string,
    problem: AnomalyProblem,
    message: string,
  ): void {
    this.anomalies.push({ position, kind, turnId, problem, message });
  }
}
