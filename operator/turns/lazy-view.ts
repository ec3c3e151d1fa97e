/**
 * The fold of decoded events (decoded-event.ts) into a journal view's contents, built
 * lazily: a view is a base view plus the events after it until it is first read. Never
 * throws: decoding checked everything.
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
import { recordedAttribution, type DecodedEvent, type TurnEventKind } from './decoded-event';
import type {
  AgentConfigRef,
  JournalView,
  LostCheckpoint,
  SignedRootRef,
  TurnView,
} from './journal-view-types';

import { AnomalyProblem, type JournalAnomaly } from './journal-view-types';

/** The materialized contents of a view (all but its head). Never modified once a view holds it. */
export type ViewState = Omit<JournalView, 'head'>;

/** The contents of an empty journal. */
export function emptyState(): ViewState {
  return {
    lastSignedRoot: undefined,
    turns: [],
    turnIdsByKey: new Map(),
    turnsById: new Map(),
    anomalies: [],
    acceptedLosses: [],
    memory: EMPTY_MEMORY,
  };
}

/** The contents of a view that is not a {@link LazyView}. */
export function stateOf(view: JournalView): ViewState {
  return {
    lastSignedRoot: view.lastSignedRoot,
    turns: view.turns,
    turnIdsByKey: view.turnIdsByKey,
    turnsById: view.turnsById,
    anomalies: view.anomalies,
    acceptedLosses: view.acceptedLosses,
    memory: view.memory,
    ...(view.newestAgentConfig === undefined ? {} : { newestAgentConfig: view.newestAgentConfig }),
  };
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
    return this.#resolve().turns;
  }

  get turnIdsByKey(): ReadonlyMap<string, string> {
    return this.#resolve().turnIdsByKey;
  }

  get turnsById(): ReadonlyMap<string, TurnView> {
    return this.#resolve().turnsById;
  }

  get anomalies(): readonly JournalAnomaly[] {
    return this.#resolve().anomalies;
  }

  get newestAgentConfig(): AgentConfigRef | undefined {
    return this.#resolve().newestAgentConfig;
  }

  get acceptedLosses(): readonly LostCheckpoint[] {
    return this.#resolve().acceptedLosses;
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

/** A working copy of a state: copies the containers once, replaces (never edits) turn records. */
class StateBuilder {
  private lastSignedRoot: SignedRootRef | undefined;
  private readonly turns: TurnView[];
  private readonly turnIdsByKey: Map<string, string>;
  private readonly turnsById: Map<string, TurnView>;
  private readonly anomalies: JournalAnomaly[];
  private newestAgentConfig: AgentConfigRef | undefined;
  private readonly acceptedLosses: LostCheckpoint[];
  private readonly memory: MemoryFold;

  constructor(state: ViewState) {
    this.memory = new MemoryFold(state.memory);
    this.acceptedLosses = [...state.acceptedLosses];
    this.newestAgentConfig = state.newestAgentConfig;
    this.lastSignedRoot = state.lastSignedRoot;
    this.turns = [...state.turns];
    this.turnIdsByKey = new Map(state.turnIdsByKey);
    this.turnsById = new Map(state.turnsById);
    this.anomalies = [...state.anomalies];
  }

  build(): ViewState {
    return {
      lastSignedRoot: this.lastSignedRoot,
      turns: this.turns,
      turnIdsByKey: this.turnIdsByKey,
      turnsById: this.turnsById,
      anomalies: this.anomalies,
      acceptedLosses: this.acceptedLosses,
      memory: this.memory.build(),
      ...(this.newestAgentConfig === undefined
        ? {}
        : { newestAgentConfig: this.newestAgentConfig }),
    };
  }

  apply(event: DecodedEvent): void {
    switch (event.type) {
      case 'message':
        return this.message(event.position, event.message);
      case 'root':
        this.lastSignedRoot = event.root;
        return;
      case 'config':
        this.newestAgentConfig = event.config;
        return;
      case 'rollback_accepted':
        this.acceptedLosses.push(event.lost);
        return;
      case 'turn':
        return this.turnEvent(event, event.kind, event.turnId, event.apply);
      case 'memory':
        return this.memory.apply(event.event);
      case 'ignored':
        return;
    }
  }

  private message(position: number, message: MessageReceived): void {
    const kind = 'message_received';
    const firstTurnId = this.turnIdsByKey.get(message.idempotencyKey);
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
    const turn: TurnView = {
      turnId: message.turnId,
      idempotencyKey: message.idempotencyKey,
      text: message.text,
      attribution: recordedAttribution(message.attribution),
      receivedAtMs: message.receivedAtMs,
      messagePosition: position,
      directive: undefined,
      dispatches: [],
      steps: [],
      approvalRequests: [],
      approvalResponses: [],
      questionRequests: [],
      questionResponses: [],
      cancellations: [],
      expiries: [],
      terminal: undefined,
      resolutions: [],
      standingFold: NEW_TURN,
    };
    this.turns.push(turn);
    this.turnsById.set(turn.turnId, turn);
    if (firstTurnId === undefined) this.turnIdsByKey.set(message.idempotencyKey, turn.turnId);
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
    // Turns are sorted by message position.
    let low = 0;
    let high = this.turns.length - 1;
    while (low <= high) {
      const mid = (low + high) >>> 1;
      const at = this.turns[mid]?.messagePosition ?? Number.NaN;
      if (at === turn.messagePosition) {
        this.turns[mid] = turn;
        return;
      }
      if (at < turn.messagePosition) low = mid + 1;
      else high = mid - 1;
    }
    throw new AppError('internal', `journal view: turn ${turn.turnId} is not in the turn list`);
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
