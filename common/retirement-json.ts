import type { RetirementRecord } from './retire-calls';

/*
 * The retirement record as a JSON file (`polychrome state retirement conv-<id> -o FILE`;
 * read by `polychrome journal verify FILE --retirement RECORD`): one object,
 * docs/journal-format.md, "Retirement record".
 */

/** The `format` of a retirement file. */
export const RETIREMENT_FORMAT = 'polychrome-journal-retirement/v1';

/** A retirement record as read back: the signed fields a verifier checks. */
export interface ParsedRetirement {
  readonly partition: string;
  readonly head: number;
  readonly root: Uint8Array;
  readonly retiredAtMs: number;
  readonly keyId: string;
  readonly signature: Uint8Array;
}

/** The record as one JSON line. */
export function formatRetirementJson(record: RetirementRecord): string {
  const { signed } = record;
  return `${JSON.stringify({
    format: RETIREMENT_FORMAT,
    partition: record.partition,
    policy: record.policy,
    retiredAtMs: record.retiredAtMs,
    actor: record.actor,
    reason: record.reason,
    ...(signed === undefined
      ? {}
      : {
          head: signed.head,
          rootHex: Buffer.from(signed.root).toString('hex'),
          keyId: signed.keyId,
          signatureHex: Buffer.from(signed.signature).toString('hex'),
        }),
  })}\n`;
}

const HEX = /^(?:[0-9a-f]{2})*$/;

function field(object: Record<string, unknown>, name: string): unknown {
  return Object.hasOwn(object, name) ? object[name] : undefined;
}

/**
 * Reads a retirement file's text; a string says what is wrong. A `delete` tombstone has
 * nothing signed, so it is refused too.
 */
export function parseRetirementJson(text: string): ParsedRetirement | string {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return 'it is not JSON';
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    return 'it is not a JSON object';
  const o = value as Record<string, unknown>;
  if (field(o, 'format') !== RETIREMENT_FORMAT) return `its format is not ${RETIREMENT_FORMAT}`;
  if (field(o, 'policy') !== 'checkpoint') {
    return 'it is not a checkpoint record (a partition retired with policy delete keeps nothing signed to check against)';
  }
  const partition = field(o, 'partition');
  const head = field(o, 'head');
  const retiredAtMs = field(o, 'retiredAtMs');
  const keyId = field(o, 'keyId');
  const rootHex = field(o, 'rootHex');
  const signatureHex = field(o, 'signatureHex');
  if (typeof partition !== 'string' || partition === '') return 'it names no partition';
  if (typeof head !== 'number' || !Number.isSafeInteger(head) || head < 0)
    return 'its head is not a whole number';
  if (typeof retiredAtMs !== 'number' || !Number.isSafeInteger(retiredAtMs) || retiredAtMs < 0) {
    return 'its retiredAtMs is not a whole number';
  }
  if (typeof keyId !== 'string' || !/^[0-9a-f]{32}$/.test(keyId))
    return 'its keyId is not 32 hex digits';
  if (typeof rootHex !== 'string' || rootHex.length !== 64 || !HEX.test(rootHex)) {
    return 'its rootHex is not 64 hex digits';
  }
  if (typeof signatureHex !== 'string' || signatureHex.length !== 128 || !HEX.test(signatureHex)) {
    return 'its signatureHex is not 128 hex digits';
  }
  return {
    partition,
    head,
    retiredAtMs,
    keyId,
    root: Uint8Array.from(Buffer.from(rootHex, 'hex')),
    signature: Uint8Array.from(Buffer.from(signatureHex, 'hex')),
  };
}
