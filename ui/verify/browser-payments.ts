/**
 * The payments of a verified export, audited in the browser (docs/ui.md, "Payments") with
 * the rule replay and `payments NAME` use (common/payment-audit.ts) and the browser's
 * @noble ed25519: each receipt's signature by the approval key, its binding to the
 * approved charge, and the totals against the limits in force. Pure and DOM-free.
 */
import { approvalKeyId } from '../../common/approval-bytes';
import type { ExportEvent, ExportHeader } from '../../common/journal-export-format';
import {
  auditJournalPayments,
  type PaymentAudit,
  type SignatureCheck,
} from '../../common/payment-audit';

/** Where the approval key the receipts were checked with came from. */
export type ApprovalKeySource = 'pinned' | 'export-header';

/** The audit, and the approval key it trusted (none: nothing could be verified). */
export interface BrowserPayments {
  readonly audit: PaymentAudit;
  readonly approvalKey: { readonly keyId: string; readonly source: ApprovalKeySource } | undefined;
}

/**
 * Audits the payments among `events` (an export's, as read; excised entries left out).
 *
 * @param pinned the approval key the user pinned; without one, the export header's is
 *   trusted (it is not signed: whoever rewrote the journal could write it too).
 */
export function auditBrowserPayments(
  events: readonly ExportEvent[],
  header: ExportHeader,
  verifier: SignatureCheck,
  pinned: Uint8Array | undefined,
): BrowserPayments {
  const key = pinned ?? header.approvalKey?.publicKey;
  const audit = auditJournalPayments(
    events.filter((e) => e.excisedLeaf === undefined),
    {
      approvalKeys: key === undefined ? [] : [key],
      verifier,
      conversationId: header.partition.replace(/^conv-/u, ''),
    },
  );
  return {
    audit,
    approvalKey:
      key === undefined
        ? undefined
        : { keyId: approvalKeyId(key), source: pinned === undefined ? 'export-header' : 'pinned' },
  };
}
