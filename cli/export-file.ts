/**
 * The journal export file (`polychrome state export`): NDJSON, UTF-8, one JSON object per
 * line, verifiable offline with docs/journal-format.md alone.
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
 *
 * The reader also takes the state store's own export (`JournalStore.export`), whose header
 * has no `publicKeys` and whose events carry `payloadHex` instead of `payload`.
 */

export {
  EXPORT_FORMAT,
  formatExportEvent,
  formatExportHeader,
  type ExportApprovalKey,
  type ExportCheckpoint,
  type ExportEvent,
  type ExportHeader,
  type ExportPublicKey,
} from '../common/journal-export-format';
export {
  decodeBase64,
  parseCheckpoint,
  parseExportEvent,
  parseExportHeader,
} from '../common/journal-export-parse';
