import {
  isEventKind,
  payloadCodecs,
  type EventKind,
  type EventPayloads,
  type PayloadCodec,
} from '../../common/event-kinds';
import type { JournalEntry } from '../../common/state-journal';

function payloadJson<K extends EventKind>(kind: K, bytes: Uint8Array): unknown {
  const codec: PayloadCodec<EventPayloads[K]> = payloadCodecs[kind];
  return codec.toJSON(codec.decode(bytes));
}

/** The `data` of a committed event on the stream. */
export interface EventData {
  readonly position: number;
  readonly kind: string;
  /**
   * The payload message in proto3 JSON (camelCase fields, bytes as base64, fields at their
   * default left out); `null` when the kind is unknown to this control plane or the bytes
   * do not decode, and then `payloadBase64` carries the raw bytes.
   */
  readonly payload: unknown;
  readonly payloadBase64?: string;
}

/** The stream form of a committed journal event. */
export function eventData(entry: JournalEntry): EventData {
  if (isEventKind(entry.kind)) {
    try {
      return {
        position: entry.position,
        kind: entry.kind,
        payload: payloadJson(entry.kind, entry.payload),
      };
    } catch {
      // Undecodable bytes: fall through to the raw form; a verifier still gets the event.
    }
  }
  return {
    position: entry.position,
    kind: entry.kind,
    payload: null,
    payloadBase64: Buffer.from(entry.payload).toString('base64'),
  };
}
