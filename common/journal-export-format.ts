/**
 * The journal export file's writer side (docs/journal-format.md, "Export file"): NDJSON,
 * UTF-8, a header line with the partition, the public keys, a checkpoint and the control
 * plane's approval public key, then one line per event. `polychrome state export` and the control plane's export route
 * (operator/forensics) write the same bytes with these functions; common/journal-export-parse.ts
 * reads them back. Pure.
 *
 *   line 1   {"format":"polychrome-journal-export/v1","partition":"conv-…",
 *             "publicKeys":[{"keyId":"…","publicKey":"<base64, 32 bytes>"}],
 *             "checkpoint":{"head":N,"rootHex":"<64 hex>","keyId":"…"},   (optional)
 *             "approvalKeyId":"<32 hex>","approvalPublicKey":"<base64, 32 bytes>"}   (optional)
 *   then     {"position":0,"kind":"message_received","payload":"<base64>"}  per event, or
 *            {"position":4,"excised":true,"leafHex":"<64 hex>"}            for an excised one
 *
 * The header's checkpoint is the state plane's own claim (its head and last signed root
 * when the export began); checking against it proves nothing the roots do not. Check
 * against one kept elsewhere (`journal verify --checkpoint`). The approval key is the
 * control plane's word (its export route writes it; `state export` cannot): it is not
 * signed, so replay trusts it only when no `--approval-key` is pinned.
 */

/** The format tag on the first line (the same as the store's EXPORT_FORMAT). */
export const EXPORT_FORMAT = 'polychrome-journal-export/v1';

/** A public key named in the header. */
export interface ExportPublicKey {
  readonly keyId: string;
  readonly publicKey: Uint8Array;
}

/** A checkpoint: the head, the last signed root (over the first head − 1 entries), its key id. */
export interface ExportCheckpoint {
  readonly head: number;
  readonly root: Uint8Array;
  readonly keyId?: string;
}

/**
 * The control plane's approval public key (docs/approvals.md), which replay checks the
 * recorded approval answers with. `keyId` is `approvalKeyId(publicKey)`
 * (common/approval-bytes.ts).
 */
export interface ExportApprovalKey {
  readonly keyId: string;
  readonly publicKey: Uint8Array;
}

/** The header line. */
export interface ExportHeader {
  readonly format: typeof EXPORT_FORMAT;
  readonly partition: string;
  readonly publicKeys: readonly ExportPublicKey[];
  /** What the state plane claimed when it exported; absent in older exports. */
  readonly checkpoint?: ExportCheckpoint;
  /**
   * The approval key the exporter signs approvals with; only the control plane's export
   * route writes it (the state plane does not know it), and older exports have none.
   */
  readonly approvalKey?: ExportApprovalKey;
}

/** What the header carries besides the partition and the journal keys. */
export interface ExportHeaderExtras {
  readonly checkpoint?: ExportCheckpoint | undefined;
  readonly approvalKey?: ExportApprovalKey | undefined;
}

/** One event line; an excised entry has `excisedLeaf` and an empty kind and payload. */
export interface ExportEvent {
  readonly position: number;
  readonly kind: string;
  readonly payload: Uint8Array;
  readonly excisedLeaf?: Uint8Array;
}

/** Serializes the header line (with its newline). */
export function formatExportHeader(
  partition: string,
  publicKeys: readonly ExportPublicKey[],
  extras: ExportHeaderExtras = {},
): string {
  const { checkpoint, approvalKey } = extras;
  return `${JSON.stringify({
    format: EXPORT_FORMAT,
    partition,
    publicKeys: publicKeys.map((k) => ({
      keyId: k.keyId,
      publicKey: Buffer.from(k.publicKey).toString('base64'),
    })),
    ...(checkpoint === undefined
      ? {}
      : {
          checkpoint: {
            head: checkpoint.head,
            rootHex: Buffer.from(checkpoint.root).toString('hex'),
            ...(checkpoint.keyId === undefined ? {} : { keyId: checkpoint.keyId }),
          },
        }),
    ...(approvalKey === undefined
      ? {}
      : {
          approvalKeyId: approvalKey.keyId,
          approvalPublicKey: Buffer.from(approvalKey.publicKey).toString('base64'),
        }),
  })}\n`;
}

/** Serializes one event line (with its newline). */
export function formatExportEvent(event: ExportEvent): string {
  if (event.excisedLeaf !== undefined) {
    return `${JSON.stringify({
      position: event.position,
      excised: true,
      leafHex: Buffer.from(event.excisedLeaf).toString('hex'),
    })}\n`;
  }
  return `${JSON.stringify({
    position: event.position,
    kind: event.kind,
    payload: Buffer.from(event.payload).toString('base64'),
  })}\n`;
}

/** What an export is read from: public keys first, then events (`StateClient.export`). */
export type ExportSourceEntry =
  | { readonly type: 'public_key'; readonly keyId: string; readonly publicKey: Uint8Array }
  | {
      readonly type: 'event';
      readonly event: {
        readonly position: number;
        readonly kind: string;
        readonly payload: Uint8Array;
        readonly excised?: boolean;
        readonly leafDigest?: Uint8Array;
      };
    };

/**
 * The lines of an export file (each with its newline) from the state plane's export
 * stream: the header once every public key has arrived (before the first event, or at the
 * end of an empty partition), then one line per event, an excised entry as such.
 */
export async function* exportFileLines(
  partition: string,
  entries: AsyncIterable<ExportSourceEntry>,
  extras: ExportHeaderExtras = {},
): AsyncGenerator<string> {
  const keys: ExportPublicKey[] = [];
  let headerWritten = false;
  for await (const entry of entries) {
    if (entry.type === 'public_key') {
      keys.push({ keyId: entry.keyId, publicKey: entry.publicKey });
      continue;
    }
    if (!headerWritten) {
      yield formatExportHeader(partition, keys, extras);
      headerWritten = true;
    }
    const { event } = entry;
    yield formatExportEvent(
      event.excised === true && event.leafDigest !== undefined
        ? { ...event, excisedLeaf: event.leafDigest }
        : event,
    );
  }
  if (!headerWritten) yield formatExportHeader(partition, keys, extras);
}
