import { encodePayload, EventKind, payloadCodecs } from '../../common/event-kinds';
import {
  summaryRequestJson,
  type SummaryInput,
  type SummaryModel,
} from '../../common/model/summary-request';
import type { Ed25519Signer } from './ed25519';
import { toHex } from './hex';
import { smallV2Journal, type V2Vectors } from './journal-vectors-v2';
import type { Sha256 } from './sha256';

/**
 * A small journal with summaries (docs/journal-format.md, "Summaries"), of partition
 * `partition`, signed by `keys[0]` with version-2 roots: turn-1 (0 message_received, 1
 * turn_dispatched, 2 turn_complete), 3 signed_root, 4 summary of turn-1, 5 signed_root,
 * turn-2 (6 message_received, 7 turn_dispatched given the summary at 4, 8 turn_complete),
 * 9 signed_root, 10 summary extending the one at 4 with turn-2, 11 signed_root. `summaries`
 * gives each summary event field by field and as bytes, with its request: what it is made
 * of, its canonical JSON and that JSON's SHA-256 (the event's `request_sha256`); `dispatch`
 * the `turn_dispatched` with `summary_position`.
 */
export interface SummaryVectors {
  readonly description: string;
  readonly partition: string;
  readonly leaves: V2Vectors['leaves'];
  readonly signedRoots: V2Vectors['signedRoots'];
  readonly excised: readonly number[];
  readonly summaries: readonly SummaryVector[];
  readonly dispatch: {
    readonly position: number;
    readonly fields: {
      readonly turnId: string;
      readonly attempt: number;
      readonly messagePosition: number;
      readonly historyFrom: number;
      readonly summaryPosition: number;
      readonly dispatchedAtMs: number;
    };
    readonly payloadHex: string;
  };
}

/** One `summary` event of the vectors and its request. */
export interface SummaryVector {
  readonly position: number;
  readonly fields: {
    readonly fromPosition: number;
    readonly toPosition: number;
    readonly previousPosition: number;
    readonly model: string;
    readonly maxTokens: number;
    readonly requestSha256Hex: string;
    readonly text: string;
    readonly inputTokens: number;
    readonly outputTokens: number;
    readonly createdAtMs: number;
  };
  readonly payloadHex: string;
  readonly request: {
    /** The text of the summary it extends; null when it extends none. */
    readonly previous: string | null;
    readonly turns: readonly { readonly user: string; readonly assistant: string }[];
    /** The canonical JSON that `request_sha256` hashes (its UTF-8 bytes). */
    readonly json: string;
    readonly sha256Hex: string;
  };
}

const SUMMARY_PARTITION = 'conv-00000000-0000-4000-8000-000000000004';
const MODEL: SummaryModel = { model: 'claude-summarizer', maxTokens: 1024 };

/** Builds the summary vectors, signed by `signer`. */
export function buildSummaryVectors(hash: Sha256, signer: Ed25519Signer): SummaryVectors {
  const { push, seal, signedRoots, leaves } = smallV2Journal(hash, signer, SUMMARY_PARTITION);
  const turn = (turnId: string, text: string, reply: string, dispatch: DispatchFields) => {
    push(
      EventKind.MessageReceived,
      encodePayload(EventKind.MessageReceived, {
        turnId,
        idempotencyKey: `key-${turnId}`,
        text,
        attribution: {
          caller: 'email:ada@example.com',
          participants: [],
          persona: '',
          session: '',
        },
        receivedAtMs: 1_700_000_000_000,
      }),
    );
    const payload = dispatchPayload(dispatch);
    push(EventKind.TurnDispatched, payload);
    push(
      EventKind.TurnComplete,
      encodePayload(EventKind.TurnComplete, {
        turnId,
        text: reply,
        steps: 1,
        completedAtMs: 1_700_000_001_000,
        fallback: false,
      }),
    );
    seal();
    return payload;
  };
  const summary = (
    position: number,
    fields: Omit<SummaryVector['fields'], 'requestSha256Hex' | 'model' | 'maxTokens'>,
    input: SummaryInput,
  ): SummaryVector => {
    const json = summaryRequestJson(input, MODEL);
    const sha256Hex = toHex(hash(new TextEncoder().encode(json)));
    // In the order of the proto's fields.
    const all = {
      fromPosition: fields.fromPosition,
      toPosition: fields.toPosition,
      previousPosition: fields.previousPosition,
      model: MODEL.model,
      maxTokens: MODEL.maxTokens,
      requestSha256Hex: sha256Hex,
      text: fields.text,
      inputTokens: fields.inputTokens,
      outputTokens: fields.outputTokens,
      createdAtMs: fields.createdAtMs,
    };
    const { requestSha256Hex: _hex, ...rest } = all;
    const payload = encodePayload(EventKind.Summary, {
      ...rest,
      requestSha256: Buffer.from(sha256Hex, 'hex'),
    });
    push(EventKind.Summary, payload);
    seal();
    const request = { previous: input.previous ?? null, turns: input.turns, json, sha256Hex };
    return { position, fields: all, payloadHex: toHex(payload), request };
  };
  const first = { user: 'My name is Ada and I live in Lyon.', assistant: 'Nice to meet you, Ada.' };
  const second = { user: 'I prefer tea to coffee.', assistant: 'Noted: tea.' };
  turn('turn-1', first.user, first.assistant, {
    turnId: 'turn-1',
    attempt: 1,
    messagePosition: 0,
    historyFrom: 0,
    summaryPosition: 0,
    dispatchedAtMs: 1_700_000_000_500,
  });
  const s1 = summary(
    4,
    {
      fromPosition: 0,
      toPosition: 0,
      previousPosition: 0,
      text: 'The user is Ada, who lives in Lyon.',
      inputTokens: 180,
      outputTokens: 12,
      createdAtMs: 1_700_000_002_000,
    },
    { turns: [first] },
  );
  const dispatch = {
    turnId: 'turn-2',
    attempt: 1,
    messagePosition: 6,
    historyFrom: 1,
    summaryPosition: 4,
    dispatchedAtMs: 1_700_000_002_500,
  };
  const dispatchBytes = turn('turn-2', second.user, second.assistant, dispatch);
  const s2 = summary(
    10,
    {
      fromPosition: 0,
      toPosition: 6,
      previousPosition: 4,
      text: 'The user is Ada, who lives in Lyon and prefers tea.',
      inputTokens: 200,
      outputTokens: 14,
      createdAtMs: 1_700_000_004_000,
    },
    { previous: s1.fields.text, turns: [second] },
  );
  return {
    description:
      'Summaries: the summary at 4 covers turn-1; turn-2 is dispatched with it ' +
      '(summary_position 4, history_from 1); the summary at 10 extends it with turn-2. Each ' +
      "summary's request_sha256 is the SHA-256 of its request's canonical JSON (request.json).",
    partition: SUMMARY_PARTITION,
    leaves: leaves([]),
    signedRoots,
    excised: [],
    summaries: [s1, s2],
    dispatch: { position: 7, fields: dispatch, payloadHex: toHex(dispatchBytes) },
  };
}

interface DispatchFields {
  readonly turnId: string;
  readonly attempt: number;
  readonly messagePosition: number;
  readonly historyFrom: number;
  readonly summaryPosition: number;
  readonly dispatchedAtMs: number;
}

function dispatchPayload(d: DispatchFields): Uint8Array {
  return encodePayload(EventKind.TurnDispatched, payloadCodecs.turn_dispatched.fromPartial(d));
}
