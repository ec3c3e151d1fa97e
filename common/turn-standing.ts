/**
 * Where a turn stands, read from its journal events: the one rule the control plane
 * (operator/turns/turn-state.ts), replay (harness/turn/replay.ts) and the forensics UI
 * (ui/timeline.ts) all read a turn by (docs/turns.md, "Where a turn stands"). Pure, and no
 * Node-only API: the UI bundles it for the browser.
 *
 * The rule, over one turn's events in journal order:
 * 1. Before its first `turn_dispatched` the turn is `received`.
 * 2. Each `turn_dispatched` starts an attempt: `running`. Requests of earlier attempts no
 *    longer count. (A turn the control plane finds running without running it itself is an
 *    orphan, which it recovers.)
 * 3. In an attempt, an `approval_request` / `question_request` with no answer after it (an
 *    `approval_response` / `question_response` with the same request id) pauses the turn:
 *    `awaiting_approval` / `awaiting_answer`, naming the request; of two, the later one. An
 *    answer recorded before its request does not count.
 * 4. The first settling marker settles the turn, and nothing after it changes that:
 *    - `turn_complete` is `cancelled` when a `request_cancelled` came in the same attempt (an
 *      admin cancelled the pending request; the control plane wrote the reply), `failed`
 *      when it is the fixed fallback reply (`fallback`: attempts spent, a failure that
 *      cannot be retried, or a step budget that ended without text), else `complete`;
 *    - `handoff` is `handed_off`;
 *    - `turn_ambiguous` is `quarantined`.
 * 5. A quarantined turn changes only by a `turn_resolved` (an admin's resolution; on a turn
 *    that is not quarantined it counts for nothing): `resolved`, waiting to be dispatched
 *    again (2). Whatever settles it after says `afterResolution`: a turn resolved and then
 *    completed is `complete`, not quarantined.
 *
 * Every other kind (steps, directives, expiries, signed roots, ...) changes nothing.
 */

/** The states a turn can stand in; see the rule at the top of this file. */
export const StandingState = {
  Received: 'received',
  Running: 'running',
  AwaitingApproval: 'awaiting_approval',
  AwaitingAnswer: 'awaiting_answer',
  HandedOff: 'handed_off',
  Quarantined: 'quarantined',
  Resolved: 'resolved',
  Complete: 'complete',
  Failed: 'failed',
  Cancelled: 'cancelled',
} as const;
export type StandingState = (typeof StandingState)[keyof typeof StandingState];

/**
 * Where a turn stands, with what each state needs. Positions are journal positions;
 * `afterResolution` says a quarantine of the turn was resolved before it settled.
 */
export type TurnStanding =
  | { readonly state: typeof StandingState.Received }
  | { readonly state: typeof StandingState.Running; readonly dispatchPosition: number }
  | {
      readonly state: typeof StandingState.AwaitingApproval | typeof StandingState.AwaitingAnswer;
      /** The request it waits on, and where it is. */
      readonly requestId: string;
      readonly position: number;
    }
  | {
      readonly state: typeof StandingState.HandedOff;
      readonly targetAgent: string;
      readonly position: number;
      readonly afterResolution: boolean;
    }
  | {
      readonly state: typeof StandingState.Quarantined;
      /** The side-effecting call whose outcome is unknown ('' when the quarantine names none). */
      readonly toolCallId: string;
      readonly reason: string;
      readonly position: number;
      readonly afterResolution: boolean;
    }
  | {
      readonly state: typeof StandingState.Resolved;
      /** Of the `turn_resolved`. */
      readonly position: number;
    }
  | {
      readonly state: typeof StandingState.Complete | typeof StandingState.Failed;
      /** Of the `turn_complete`. */
      readonly position: number;
      readonly afterResolution: boolean;
    }
  | {
      readonly state: typeof StandingState.Cancelled;
      /** The request an admin cancelled. */
      readonly requestId: string;
      /** Of the `turn_complete`. */
      readonly position: number;
      readonly afterResolution: boolean;
    };

/**
 * One event of the turn, as the rule reads it: its kind (common/event-kinds.ts) and its
 * payload, either decoded (`decodePayload`) or in its proto3 JSON form (the log stream's, and
 * the UI's); both name fields alike (`requestId`, `toolCallId`, `fallback`, ...).
 */
export interface StandingEvent {
  readonly position: number;
  readonly kind: string;
  readonly payload: unknown;
}

/** A request of the current attempt that has no answer yet. */
interface OpenRequest {
  readonly type: 'approval' | 'question';
  readonly requestId: string;
  readonly position: number;
}

/**
 * The rule's memory of a turn, folded event by event ({@link advanceStanding}), for readers
 * that keep a turn up to date as events come (the control plane's journal view). Immutable.
 */
export interface StandingFold {
  readonly standing: TurnStanding;
  /** The latest dispatch since the turn was received or resolved. */
  readonly dispatchPosition: number | undefined;
  /** Requests of the current attempt with no answer yet, in journal order. */
  readonly open: readonly OpenRequest[];
  /** The request a `request_cancelled` of the current attempt names. */
  readonly cancelledRequestId: string | undefined;
  readonly afterResolution: boolean;
}

/** The fold of a turn no event has been read for: `received`. */
export const NEW_TURN: StandingFold = {
  standing: { state: StandingState.Received },
  dispatchPosition: undefined,
  open: [],
  cancelledRequestId: undefined,
  afterResolution: false,
};

/** Where a turn stands after `events`, its events in journal order (the rule above). */
export function standingOf(events: Iterable<StandingEvent>): TurnStanding {
  let fold = NEW_TURN;
  for (const event of events) fold = advanceStanding(fold, event);
  return fold.standing;
}

/** Whether a turn in `state` is settled: only a resolution (of a quarantine) moves it on. */
export function isSettled(state: StandingState): boolean {
  return SETTLED.has(state);
}

const SETTLED: ReadonlySet<StandingState> = new Set([
  StandingState.HandedOff,
  StandingState.Quarantined,
  StandingState.Complete,
  StandingState.Failed,
  StandingState.Cancelled,
]);

/** The fold with one more event of the turn (the rule above); `fold` is not modified. */
export function advanceStanding(fold: StandingFold, event: StandingEvent): StandingFold {
  const { state } = fold.standing;
  if (state === StandingState.Quarantined) {
    return event.kind === 'turn_resolved' ? resolve(event.position) : fold;
  }
  if (isSettled(state)) return fold;
  switch (event.kind) {
    case 'turn_dispatched': {
      const dispatchPosition = event.position;
      return attemptStanding({
        ...fold,
        dispatchPosition,
        open: [],
        cancelledRequestId: undefined,
      });
    }
    case 'approval_request':
    case 'question_request':
      return request(fold, event);
    case 'approval_response':
    case 'question_response':
      return answer(fold, event);
    case 'request_cancelled':
      return { ...fold, cancelledRequestId: stringField(event.payload, 'requestId') };
    case 'turn_complete':
    case 'handoff':
    case 'turn_ambiguous':
      return { ...fold, open: [], standing: settle(fold, event) };
    default:
      return fold;
  }
}

/** A quarantine resolved: no attempt until the next dispatch. */
function resolve(position: number): StandingFold {
  return {
    standing: { state: StandingState.Resolved, position },
    dispatchPosition: undefined,
    open: [],
    cancelledRequestId: undefined,
    afterResolution: true,
  };
}

function request(fold: StandingFold, event: StandingEvent): StandingFold {
  if (fold.dispatchPosition === undefined) return fold;
  const open: OpenRequest = {
    type: event.kind === 'approval_request' ? 'approval' : 'question',
    requestId: stringField(event.payload, 'requestId'),
    position: event.position,
  };
  return attemptStanding({ ...fold, open: [...fold.open, open] });
}

function answer(fold: StandingFold, event: StandingEvent): StandingFold {
  if (fold.dispatchPosition === undefined) return fold;
  const type = event.kind === 'approval_response' ? 'approval' : 'question';
  const requestId = stringField(event.payload, 'requestId');
  const open = fold.open.filter((r) => r.type !== type || r.requestId !== requestId);
  return open.length === fold.open.length ? fold : attemptStanding({ ...fold, open });
}

/** An attempt in progress: paused on its latest open request, or running. */
function attemptStanding(fold: StandingFold): StandingFold {
  if (fold.dispatchPosition === undefined) return fold;
  const latest = fold.open.at(-1);
  const standing: TurnStanding =
    latest === undefined
      ? { state: StandingState.Running, dispatchPosition: fold.dispatchPosition }
      : {
          state:
            latest.type === 'approval'
              ? StandingState.AwaitingApproval
              : StandingState.AwaitingAnswer,
          requestId: latest.requestId,
          position: latest.position,
        };
  return { ...fold, standing };
}

function settle(fold: StandingFold, event: StandingEvent): TurnStanding {
  const { position } = event;
  const { afterResolution } = fold;
  const payload = event.payload;
  if (event.kind === 'handoff') {
    const targetAgent = stringField(payload, 'targetAgent');
    return { state: StandingState.HandedOff, targetAgent, position, afterResolution };
  }
  if (event.kind === 'turn_ambiguous') {
    return {
      state: StandingState.Quarantined,
      toolCallId: stringField(payload, 'toolCallId'),
      reason: stringField(payload, 'reason'),
      position,
      afterResolution,
    };
  }
  if (fold.cancelledRequestId !== undefined) {
    const requestId = fold.cancelledRequestId;
    return { state: StandingState.Cancelled, requestId, position, afterResolution };
  }
  const state = field(payload, 'fallback') === true ? StandingState.Failed : StandingState.Complete;
  return { state, position, afterResolution };
}

/** A payload field; proto3 JSON leaves defaults out, so a missing field is its default. */
function field(payload: unknown, name: string): unknown {
  return typeof payload === 'object' && payload !== null ? Reflect.get(payload, name) : undefined;
}

function stringField(payload: unknown, name: string): string {
  const value = field(payload, name);
  return typeof value === 'string' ? value : '';
}
