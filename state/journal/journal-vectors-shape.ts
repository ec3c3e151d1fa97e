import type { JournalVectors } from './journal-vectors';

/* Whether parsed JSON has the shape of docs/journal-vectors.json. */

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function hasFields(value: unknown, fields: Record<string, 'string' | 'number'>): boolean {
  return isRecord(value) && Object.entries(fields).every(([k, t]) => typeof value[k] === t);
}

function isListOf(value: unknown, check: (item: unknown) => boolean): boolean {
  return Array.isArray(value) && value.every(check);
}

/**
 * True when `value` has the shape of a vectors file (field names and types; the values
 * themselves are what the tests check).
 */
export function isJournalVectors(value: unknown): value is JournalVectors {
  const s = 'string';
  const n = 'number';
  return (
    isRecord(value) &&
    typeof value.description === 'string' &&
    isListOf(value.keys, (k) => hasFields(k, { note: s, seedHex: s, publicKeyHex: s, keyId: s })) &&
    isListOf(value.leaves, (l) =>
      hasFields(l, { position: n, kind: s, payloadHex: s, leafHex: s }),
    ) &&
    isListOf(value.roots, (r) => hasFields(r, { leafCount: n, sizeNodes: n, rootHex: s })) &&
    isListOf(value.nodesHex, (h) => typeof h === 'string') &&
    isListOf(value.signedRoots, (r) =>
      hasFields(r, {
        position: n,
        leafCount: n,
        rootHex: s,
        publicKeyHex: s,
        keyId: s,
        messageHex: s,
        signatureHex: s,
      }),
    ) &&
    isListOf(value.keyRotations, (r) =>
      hasFields(r, {
        position: n,
        oldKeyId: s,
        oldPublicKeyHex: s,
        newKeyId: s,
        newPublicKeyHex: s,
        messageHex: s,
        signatureHex: s,
      }),
    ) &&
    isListOf(
      value.inclusionProofs,
      (p) =>
        hasFields(p, { leafIndex: n, leafCount: n, leafHex: s, rootHex: s }) &&
        isRecord(p) &&
        isListOf(p.proofHex, (h) => typeof h === 'string'),
    ) &&
    isSmallJournal(value.version2) &&
    isRecord(value.version2) &&
    hasFields(value.version2.otherPartition, { partition: s, position: n }) &&
    isSmallJournal(value.erasure) &&
    isRecord(value.erasure) &&
    isListOf(value.erasure.erased, (p) => typeof p === 'number') &&
    isRecord(value.erasure.record) &&
    hasFields(value.erasure.record, { position: n, payloadHex: s }) &&
    hasFields(value.erasure.record.fields, {
      position: n,
      leafDigestHex: s,
      actor: s,
      reason: s,
      excisedAtMs: n,
      problem: s,
      erasedKind: s,
      turnId: s,
    }) &&
    isSummaryVectors(value.summary) &&
    hasFields(value.retirement, {
      description: s,
      partition: s,
      head: n,
      rootHex: s,
      retiredAtMs: n,
      keyId: s,
      messageHex: s,
      signatureHex: s,
    })
  );
}

/** The shape of a small version-2 journal of the vectors (`version2`, `erasure`). */
function isSmallJournal(value: unknown): boolean {
  const s = 'string';
  const n = 'number';
  return (
    isRecord(value) &&
    hasFields(value, { description: s, partition: s }) &&
    isListOf(
      value.leaves,
      (l) =>
        hasFields(l, { position: n, kind: s, payloadHex: s, leafHex: s }) ||
        (hasFields(l, { position: n, leafHex: s }) && isRecord(l) && l.excised === true),
    ) &&
    isListOf(value.signedRoots, (r) =>
      hasFields(r, {
        position: n,
        leafCount: n,
        rootHex: s,
        keyId: s,
        messageHex: s,
        signatureHex: s,
      }),
    ) &&
    isListOf(value.excised, (p) => typeof p === 'number')
  );
}

/** The shape of the `summary` vectors: a small journal, its summaries and a dispatch. */
function isSummaryVectors(value: unknown): boolean {
  const s = 'string';
  const n = 'number';
  return (
    isSmallJournal(value) &&
    isRecord(value) &&
    isListOf(
      value.summaries,
      (v) =>
        hasFields(v, { position: n, payloadHex: s }) &&
        isRecord(v) &&
        hasFields(v.fields, {
          fromPosition: n,
          toPosition: n,
          previousPosition: n,
          model: s,
          maxTokens: n,
          requestSha256Hex: s,
          text: s,
          inputTokens: n,
          outputTokens: n,
          createdAtMs: n,
        }) &&
        isRecord(v.request) &&
        hasFields(v.request, { json: s, sha256Hex: s }) &&
        (v.request.previous === null || typeof v.request.previous === 'string') &&
        isListOf(v.request.turns, (t) => hasFields(t, { user: s, assistant: s })),
    ) &&
    isRecord(value.dispatch) &&
    hasFields(value.dispatch, { position: n, payloadHex: s }) &&
    hasFields(value.dispatch.fields, {
      turnId: s,
      attempt: n,
      messagePosition: n,
      historyFrom: n,
      summaryPosition: n,
      dispatchedAtMs: n,
    })
  );
}
