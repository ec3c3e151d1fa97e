import { canonicalJson } from '../../common/canonical-json';
import { AppError, isAppError } from '../../common/errors';
import {
  decodePayload,
  isEventKind,
  payloadCodecs,
  type EventKind,
  type EventPayloads,
} from '../../common/event-kinds';
import { voidedToolCalls } from '../../common/turn-resolution';
import { ResolveDecision } from '../../proto/gen/polychrome/events/v1/events';
import { memoryEventOf, type MemoryEvent } from '../../common/memory';
import { decodeAgentConfig, hex, type EncodedAgentConfig } from './agent-config';

/**
 * A journal read for replay (docs/replay.md): its events decoded and grouped by turn, in
 * the order the turns' messages arrived, every recorded agent configuration by digest, and
 * the summaries (docs/replay.md, "Summaries"). Excised or unknown positions are skipped and
 * kept for the report. An erased entry (docs/journal-format.md, "Erasure"; its sealed
 * `excision` record names its kind and turn) keeps its place in its turn as a stand-in of
 * its kind with no content, listed in the turn's `erased`, so the turn keeps its shape and
 * standing and replay knows which checks it cannot make (`erased-inputs.ts`).
 */

/** One journal event as read from the state plane or an export. */
export interface ReplayEntry {
  readonly position: number;
  readonly kind: string;
  readonly payload: Uint8Array;
}

export type Decoded = {
  [K in EventKind]: { position: number; kind: K; payload: EventPayloads[K] };
}[EventKind];

export interface TurnLog {
  readonly turnId: string;
  readonly position: number;
  /** The message; empty when it was erased (its position is then in `erased`). */
  readonly text: string;
  readonly directive: EventPayloads['ingress_directive'] | undefined;
  /** The turn's events after its message, in journal order; an erased one is a stand-in. */
  readonly events: Decoded[];
  /** The turn's erased entries (its message's included), by position. */
  readonly erased: Map<number, ErasedEntry>;
}

/** An erased entry, as its sealed `excision` record describes it. */
export interface ErasedEntry {
  readonly position: number;
  /** The kind the entry had. */
  readonly kind: string;
  /** The turn it belonged to; empty when it named none (a `memory_set`). */
  readonly turnId: string;
  /** The position of the `excision` record that erased it. */
  readonly recordPosition: number;
}

/** A journal grouped for replay. */
export interface JournalTurns {
  /** Excised (not erased) or unknown positions, in journal order. */
  readonly skipped: readonly { readonly position: number; readonly kind: string }[];
  /** Erased positions, in journal order. */
  readonly erased: readonly ErasedEntry[];
  /** The turns, in the order their messages arrived. */
  readonly turns: readonly TurnLog[];
  /** Every recorded agent configuration, by the hex of its digest. */
  readonly configs: ReadonlyMap<string, EncodedAgentConfig>;
  /** Position and digest of every agent_config, in order. */
  readonly configPositions: readonly { position: number; sha256: string }[];
  /** Every `memory_set` and `memory_cleared`, in journal order (common/memory.ts). */
  readonly memoryEvents: readonly MemoryEvent[];
  /**
   * Every `memory_cleared` whose `memory_set`s are excised (a person's clear erases them,
   * docs/turns.md "Memory"): its position and the excised set positions it names.
   */
  readonly memoryErasures: readonly MemoryErasure[];
  /** Every decoded event, in journal order (the summary check reads them: replay-summaries.ts). */
  readonly events: readonly Decoded[];
  /** Every readable `summary`, by position. */
  readonly summaries: ReadonlyMap<number, EventPayloads['summary']>;
  /** The erasure records (`excision` marked erased), by the position they erased. */
  readonly erasures: ReadonlyMap<number, ErasedEntry>;
}

/** A clear at `position` whose named `memory_set`s at `setPositions` are excised. */
export interface MemoryErasure {
  readonly position: number;
  readonly setPositions: readonly number[];
}

/**
 * Decodes a journal and groups its events by turn.
 *
 * @throws AppError `data_loss` when an event does not decode or a recorded configuration
 *   is not readable (the journal must be verified first).
 */
export function readJournal(entries: readonly ReplayEntry[]): JournalTurns {
  const erasures = erasuresOf(entries);
  const erased: ErasedEntry[] = [];
  const skipped: { position: number; kind: string }[] = [];
  const turns = new Map<string, TurnLog>();
  const order: TurnLog[] = [];
  const configs = new Map<string, EncodedAgentConfig>();
  /** Position and digest of every agent_config, in order. */
  const configPositions: { position: number; sha256: string }[] = [];
  const memoryEvents: MemoryEvent[] = [];
  const clears: MemoryErasure[] = [];
  const events: Decoded[] = [];
  const summaries = new Map<number, EventPayloads['summary']>();
  for (const entry of entries) {
    const erasure = erasures.get(entry.position);
    if (erasure !== undefined && !isEventKind(entry.kind)) {
      erased.push(erasure);
      if (erasure.kind === 'message_received') {
        if (turns.has(erasure.turnId) || erasure.turnId === '') continue;
        const log: TurnLog = { ...newLog(erasure.turnId, entry.position, ''), erased: new Map() };
        log.erased.set(entry.position, erasure);
        turns.set(log.turnId, log);
        order.push(log);
        continue;
      }
      const log = turns.get(erasure.turnId);
      const standIn = standInOf(erasure);
      if (log === undefined || standIn === undefined) continue;
      log.erased.set(entry.position, erasure);
      log.events.push(standIn);
      continue;
    }
    if (!isEventKind(entry.kind)) {
      // Seam for excision (docs/replay.md): an excised or unknown position is skipped.
      skipped.push({ position: entry.position, kind: entry.kind });
      continue;
    }
    const event = decode(entry);
    events.push(event);
    if (event.kind === 'summary') summaries.set(event.position, event.payload);
    // An excision record names the turn an erased entry belonged to; it is not a step of it.
    if (event.kind === 'excision') continue;
    if (event.kind === 'agent_config') {
      const encoded = decodeAgentConfig(event.payload.configJson);
      if (hex(encoded.sha256) !== hex(event.payload.sha256)) {
        throw new AppError(
          'data_loss',
          `journal position ${event.position} (agent_config): its digest is not the SHA-256 of its config_json; verify the journal`,
        );
      }
      configs.set(hex(encoded.sha256), encoded);
      configPositions.push({ position: event.position, sha256: hex(encoded.sha256) });
    }
    const memory = memoryEventIn(event);
    if (memory !== undefined) memoryEvents.push(memory);
    if (event.kind === 'memory_cleared') {
      clears.push({ position: event.position, setPositions: event.payload.setPositions });
    }
    if (event.kind === 'message_received') {
      if (turns.has(event.payload.turnId)) continue;
      const log = newLog(event.payload.turnId, event.position, event.payload.text);
      turns.set(log.turnId, log);
      order.push(log);
      continue;
    }
    const turnId = turnIdOf(event);
    if (turnId === undefined) continue;
    const log = turns.get(turnId);
    if (log === undefined) continue;
    if (event.kind === 'ingress_directive' && log.directive === undefined) {
      turns.set(turnId, { ...log, directive: event.payload });
      const index = order.indexOf(log);
      order[index] = turns.get(turnId) ?? log;
      continue;
    }
    log.events.push(event);
  }
  const excised = new Set([
    ...skipped.filter((e) => e.kind === '').map((e) => e.position),
    ...erased.map((e) => e.position),
  ]);
  const memoryErasures = clears.flatMap(({ position, setPositions }) => {
    const gone = setPositions.filter((p) => excised.has(p));
    return gone.length === 0 ? [] : [{ position, setPositions: gone }];
  });
  return {
    skipped,
    erased,
    turns: order,
    configs,
    configPositions,
    memoryEvents,
    memoryErasures,
    events,
    summaries,
    erasures,
  };
}

function newLog(turnId: string, position: number, text: string): TurnLog {
  return { turnId, position, text, directive: undefined, events: [], erased: new Map() };
}

/**
 * The erasures the journal records, by erased position: its `excision` records marked
 * erased (read ahead, since the record comes after the entry it erased). A record that
 * does not decode is left out here; reading it in order fails on it.
 */
export function erasuresOf(entries: readonly ReplayEntry[]): ReadonlyMap<number, ErasedEntry> {
  const found = new Map<number, ErasedEntry>();
  for (const entry of entries) {
    if (entry.kind !== 'excision') continue;
    let record: EventPayloads['excision'];
    try {
      record = decodePayload('excision', entry.payload);
    } catch {
      continue;
    }
    if (!record.erased) continue;
    found.set(record.position, {
      position: record.position,
      kind: record.erasedKind,
      turnId: record.turnId,
      recordPosition: entry.position,
    });
  }
  return found;
}

/** An erased entry of a turn as replay holds it: its kind, its turn, no content. */
function standInOf(erasure: ErasedEntry): Decoded | undefined {
  if (!isEventKind(erasure.kind) || erasure.turnId === '') return undefined;
  const codec = payloadCodecs[erasure.kind] as {
    fromPartial(object: { turnId: string }): unknown;
  };
  return {
    position: erasure.position,
    kind: erasure.kind,
    payload: codec.fromPartial({ turnId: erasure.turnId }),
  } as Decoded;
}

/** A memory event as the memory fold reads it, or undefined for any other kind. */
function memoryEventIn(event: Decoded): MemoryEvent | undefined {
  return event.kind === 'memory_set' || event.kind === 'memory_cleared'
    ? memoryEventOf(event.position, event)
    : undefined;
}

/** An event payload as canonical JSON, as replay compares and reports it. */
export function eventJson(event: Decoded): string {
  const codec = payloadCodecs[event.kind] as { toJSON(message: unknown): unknown };
  return canonicalJson(codec.toJSON(event.payload));
}

/** An event as a divergence names it: its kind and payload. */
export function describe(event: Decoded): string {
  return `${event.kind} ${eventJson(event)}`;
}

function turnIdOf(event: Decoded): string | undefined {
  const payload: unknown = event.payload;
  if (typeof payload === 'object' && payload !== null && 'turnId' in payload) {
    const id = payload.turnId;
    return typeof id === 'string' && id !== '' ? id : undefined;
  }
  return undefined;
}

function decode(entry: ReplayEntry): Decoded {
  const kind = entry.kind as EventKind;
  try {
    return {
      position: entry.position,
      kind,
      payload: decodePayload(kind, entry.payload),
    } as Decoded;
  } catch (cause) {
    if (isAppError(cause)) throw cause;
    throw new AppError(
      'data_loss',
      `journal position ${entry.position} (${entry.kind}): the payload does not decode; verify the journal`,
      { cause },
    );
  }
}

/** The `tool_call`s `did_not_run` resolutions void (common/turn-resolution.ts). */
export function voidedCallsOf(log: TurnLog): ReadonlySet<number> {
  return voidedToolCalls(
    log.events.flatMap((e) =>
      e.kind === 'turn_resolved'
        ? [
            {
              position: e.position,
              toolCallId: e.payload.toolCallId,
              didNotRun: e.payload.decision === ResolveDecision.RESOLVE_DECISION_DID_NOT_RUN,
            },
          ]
        : [],
    ),
    log.events.flatMap((e) =>
      e.kind === 'tool_call' ? [{ position: e.position, toolCallId: e.payload.toolCallId }] : [],
    ),
  );
}
