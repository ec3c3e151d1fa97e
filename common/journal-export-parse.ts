/**
 * The journal export file's reader side (docs/journal-format.md, "Export file"): parses the
 * header line, each event line and a checkpoint given as `N:ROOTHEX[:KEYID]`. Pure, so the
 * CLI (cli/journal-verify.ts, cli/journal-replay.ts) and the browser verifier (ui/) read the same bytes with the same
 * code. The writer side is common/journal-export-format.ts.
 *
 * The reader also takes the state store's own export (`JournalStore.export`), whose header
 * has no `publicKeys` and whose events carry `payloadHex` instead of `payload`.
 */
import { approvalKeyId } from './approval-bytes';
import {
  EXPORT_FORMAT,
  type ExportApprovalKey,
  type ExportCheckpoint,
  type ExportEvent,
  type ExportHeader,
  type ExportPublicKey,
} from './journal-export-format';

const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/u;
const HEX = /^(?:[0-9a-f]{2})*$/u;
const DIGEST_HEX = /^[0-9a-f]{64}$/u;

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Decodes strict base64 (no whitespace, correct padding); `undefined` otherwise. */
export function decodeBase64(text: string): Uint8Array | undefined {
  if (text.length % 4 !== 0 || !BASE64.test(text)) return undefined;
  const bytes = Buffer.from(text, 'base64');
  // Round-trip: rejects non-canonical trailing bits, so one changed character never
  // decodes to the same bytes.
  return bytes.toString('base64') === text ? new Uint8Array(bytes) : undefined;
}

/**
 * Parses the header line; a string says what is wrong with it.
 */
export function parseExportHeader(line: string): ExportHeader | string {
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch {
    return 'the first line is not JSON';
  }
  if (!isRecord(value) || value.format !== EXPORT_FORMAT) {
    return `the first line is not a ${EXPORT_FORMAT} header`;
  }
  if (typeof value.partition !== 'string') return 'the header has no partition name';
  const keys: ExportPublicKey[] = [];
  const raw = value.publicKeys ?? [];
  if (!Array.isArray(raw)) return 'the header field publicKeys is not a list';
  for (const [i, entry] of raw.entries()) {
    const publicKey =
      isRecord(entry) && typeof entry.publicKey === 'string'
        ? decodeBase64(entry.publicKey)
        : undefined;
    if (!isRecord(entry) || typeof entry.keyId !== 'string' || publicKey === undefined) {
      return `header publicKeys[${String(i)}] needs a keyId and a base64 publicKey`;
    }
    keys.push({ keyId: entry.keyId, publicKey });
  }
  const approvalKey = parseApprovalKey(value);
  if (typeof approvalKey === 'string') return approvalKey;
  const header: ExportHeader = {
    format: EXPORT_FORMAT,
    partition: value.partition,
    publicKeys: keys,
    ...(approvalKey === undefined ? {} : { approvalKey }),
  };
  const claim = value.checkpoint;
  if (claim === undefined || claim === null) return header;
  if (
    !isRecord(claim) ||
    typeof claim.head !== 'number' ||
    !Number.isSafeInteger(claim.head) ||
    claim.head < 1 ||
    typeof claim.rootHex !== 'string' ||
    !DIGEST_HEX.test(claim.rootHex) ||
    (claim.keyId !== undefined && typeof claim.keyId !== 'string')
  ) {
    return 'the header field checkpoint needs a head (1 or more), a rootHex of 64 hex digits and an optional keyId';
  }
  return {
    ...header,
    checkpoint: {
      head: claim.head,
      root: new Uint8Array(Buffer.from(claim.rootHex, 'hex')),
      ...(typeof claim.keyId === 'string' ? { keyId: claim.keyId } : {}),
    },
  };
}

/**
 * The header's optional approval key: `approvalPublicKey` (base64 of 32 bytes) with
 * `approvalKeyId`, which must name that key (an export written before key ids were
 * added may have the key alone). A string says what is wrong.
 */
function parseApprovalKey(header: Record<string, unknown>): ExportApprovalKey | undefined | string {
  const { approvalPublicKey: raw, approvalKeyId: claimedId } = header;
  if (raw === undefined && claimedId === undefined) return undefined;
  const publicKey = typeof raw === 'string' ? decodeBase64(raw) : undefined;
  if (publicKey?.length !== 32) {
    return 'the header field approvalPublicKey must be the base64 of a 32-byte ed25519 public key';
  }
  const keyId = approvalKeyId(publicKey);
  if (claimedId !== undefined && claimedId !== keyId) {
    return `the header field approvalKeyId ${JSON.stringify(claimedId).slice(0, 42)} does not name approvalPublicKey, whose key id is ${keyId}; the header was changed`;
  }
  return { keyId, publicKey };
}

/**
 * Parses a checkpoint given as `N:ROOTHEX[:KEYID]`: N the head (entries, as the
 * Conversation's `status.journal.head` shows it), ROOTHEX the last signed root (64 hex
 * digits, `status.journal.lastSignedRoot`), KEYID optional (`status.journal.keyId`). A
 * string says what is wrong.
 */
export function parseCheckpoint(text: string): ExportCheckpoint | string {
  const match = /^([0-9]{1,16}):([0-9a-fA-F]{64})(?::([0-9a-f]{32}))?$/u.exec(text.trim());
  if (match === null) {
    return 'expected N:ROOTHEX[:KEYID]: N the head (number of entries), ROOTHEX the last signed root (64 hex digits), KEYID optional (32 hex digits)';
  }
  const head = Number(match[1]);
  if (!Number.isSafeInteger(head) || head < 1) return 'N, the head, must be 1 or more';
  return {
    head,
    root: new Uint8Array(Buffer.from(match[2]!.toLowerCase(), 'hex')),
    ...(match[3] === undefined ? {} : { keyId: match[3] }),
  };
}

/**
 * Parses one event line (`payload` base64, or `payloadHex`); a string says what is wrong.
 */
export function parseExportEvent(line: string): ExportEvent | string {
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch {
    return 'not JSON';
  }
  if (!isRecord(value)) return 'not a JSON object';
  const { position, kind } = value;
  if (typeof position !== 'number' || !Number.isSafeInteger(position) || position < 0) {
    return 'no valid position';
  }
  if (value.excised !== undefined) {
    if (
      value.excised !== true ||
      typeof value.leafHex !== 'string' ||
      !DIGEST_HEX.test(value.leafHex)
    ) {
      return 'an excised entry needs "excised": true and a "leafHex" of 64 hex digits';
    }
    return {
      position,
      kind: '',
      payload: new Uint8Array(0),
      excisedLeaf: new Uint8Array(Buffer.from(value.leafHex, 'hex')),
    };
  }
  if (typeof kind !== 'string') return 'no kind';
  let payload: Uint8Array | undefined;
  if (typeof value.payload === 'string') payload = decodeBase64(value.payload);
  else if (typeof value.payloadHex === 'string' && HEX.test(value.payloadHex)) {
    payload = new Uint8Array(Buffer.from(value.payloadHex, 'hex'));
  }
  if (payload === undefined) return 'no valid payload (base64 "payload" or "payloadHex")';
  return { position, kind, payload };
}
