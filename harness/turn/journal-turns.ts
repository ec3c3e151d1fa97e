import { canonicalJson } from '../../common/canonical-json';
import { AppError, isAppError } from '../../common/errors';
import {
  decodePayload,
  isEventKind,
  payloadCodecs,
  type EventKind,
  type EventPayloads,
} from '../../common/event-kinds';
import { memoryEventOf, type MemoryEvent } from '../../common/memory';
import { decodeAgentConfig, hex, type EncodedAgentConfig } from './agent-config';

/**
 * A journal read for replay (docs/replay.md): its events decoded and grouped by turn, in
 * the order the turns' messages arrived, and every recorded agent configuration by digest.
 * Excised or unknown positions are skipped and kept for the report.
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
  readonly text: string;
  readonly directive: EventPayloads['ingress_directive'] | undefined;
  /** The turn's events after its message, in journal order. */
  readonly events: Decoded[];
}

/** A journal grouped for replay. */
export interface JournalTurns {
  /** Excised or unknown positions, in journal order. */
  readonly skipped: readonly { readonly position: number; readonly kind: string }[];
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
  const skipped: { position: number; kind: string }[] = [];
  const turns = new Map<string, TurnLog>();
  const order: TurnLog[] = [];
  const configs = new Map<string, EncodedAgentConfig>();
  /** Position and digest of every agent_config, in order. */
  const configPositions: { position: number; sha256: string }[] = [];
  const memoryEvents: MemoryEvent[] = [];
  const clears: MemoryErasure[] = [];
  for (const entry of entries) {
    if (!isEventKind(entry.kind)) {
      // Seam for excision (docs/replay.md): an excised or unknown position is skipped.
      skipped.push({ position: entry.position, kind: entry.kind });
      continue;
    }
    const event = decode(entry);
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
      const log: TurnLog = {
        turnId: event.payload.turnId,
        position: event.position,
        text: event.payload.text,
        directive: undefined,
        events: [],
      };
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
  const excised = new Set(skipped.filter((e) => e.kind === '').map((e) => e.position));
  const memoryErasures = clears.flatMap(({ position, setPositions }) => {
    const gone = setPositions.filter((p) => excised.has(p));
    return gone.length === 0 ? [] : [{ position, setPositions: gone }];
  });
  return { skipped, turns: order, configs, configPositions, memoryEvents, memoryErasures };
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
