import { canonicalJson } from '../../common/canonical-json';
import { AppError, isAppError } from '../../common/errors';
import {
  decodePayload,
  isEventKind,
  payloadCodecs,
  type EventKind,
  type EventPayloads,
} from '../../common/event-kinds';
import { decodeAgentConfig, hex, type EncodedAgentConfig } from './agent-config';

/**
 * A journal read for replay (docs/replay.md): its events decoded and grouped by turn, in
 * the order the turns' messages arrived, every recorded agent configuration by digest, and
 * the summaries and erasure records (docs/replay.md, "Summaries"). Excised or unknown
 * positions are skipped and kept for the report.
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
  /** Every decoded event, in journal order (the summary check reads them: replay-summaries.ts). */
  readonly events: readonly Decoded[];
  /** Every readable `summary`, by position. */
  readonly summaries: ReadonlyMap<number, EventPayloads['summary']>;
  /**
   * The erasure records (`excision` marked erased), by the position they erased: what the
   * entry was, and where the record is.
   */
  readonly erasures: ReadonlyMap<number, ErasureNote>;
}

/** What an erasure record says of the entry it erased (docs/journal-format.md, "Erasure"). */
export interface ErasureNote {
  readonly kind: string;
  readonly turnId: string;
  /** The position of the erasure record itself. */
  readonly recordPosition: number;
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
  const events: Decoded[] = [];
  const summaries = new Map<number, EventPayloads['summary']>();
  const erasures = new Map<number, ErasureNote>();
  for (const entry of entries) {
    if (!isEventKind(entry.kind)) {
      // Seam for excision (docs/replay.md): an excised or unknown position is skipped.
      skipped.push({ position: entry.position, kind: entry.kind });
      continue;
    }
    const event = decode(entry);
    events.push(event);
    if (event.kind === 'summary') summaries.set(event.position, event.payload);
    if (event.kind === 'excision' && event.payload.erased) {
      const { erasedKind: kind, turnId } = event.payload;
      erasures.set(event.payload.position, { kind, turnId, recordPosition: event.position });
    }
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
  return { skipped, turns: order, configs, configPositions, events, summaries, erasures };
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
