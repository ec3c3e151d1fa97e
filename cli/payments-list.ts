import { auditJournalPayments, type PaymentAudit } from '../common/payment-audit';
import { withPinnedExport } from './pinned-export';
import { PAYMENT_COLUMNS, paymentCells } from '../common/payment-rows';
import { nodeEd25519Verifier } from '../harness/crypto/node-ed25519';
import type { ApiClient } from './api-client';
import { ExitCode, Format, write, type CliIo } from './cli-support';
import type { KeyOptions } from './conversation-export';
import type { ForensicRequest } from './forensic-request';
import { journalKeyJson, journalKeyLine } from './journal-key-pin';
import {
  approvalKeyLine,
  loadVerifiedExport,
  paymentFindingLines,
  type VerifiedExport,
} from './journal-replay';

/*
 * `payments NAME` (`kubectl polychrome payments NAME`, `polychrome payments ID`): a
 * conversation's payments, one line per charge, read from its export as `replay` reads it
 * (admin only; verified first, with a pinned journal key), and audited on this machine with
 * the rule replay and the forensics UI use (common/payment-audit.ts; docs/payments.md,
 * "Auditing payments"). Exit 1 when the audit finds a problem.
 */

/** What `payments NAME` takes besides the request. */
export interface PaymentsListOptions extends KeyOptions {
  /** `--approval-key`: wins over the export header's (a mismatch is reported). */
  readonly approvalKey?: Uint8Array;
}

/** The audit of a verified export's payments, with the approval key it used. */
export function auditExportPayments(loaded: VerifiedExport): PaymentAudit {
  const { approvalPublicKey, verification, entries } = loaded;
  return auditJournalPayments(entries, {
    approvalKeys: approvalPublicKey === undefined ? [] : [approvalPublicKey],
    verifier: { verify: (key, message, sig) => nodeEd25519Verifier.verify(message, sig, key) },
    conversationId: verification.partition.replace(/^conv-/u, ''),
  });
}

/** Lists and audits the payments of the conversation `request` names. */
export async function listConversationPayments(
  client: ApiClient,
  request: ForensicRequest,
  io: CliIo,
  options: PaymentsListOptions = {},
): Promise<ExitCode> {
  const source = `conversation ${request.conversationId}`;
  return withPinnedExport(client, request, options, 'payments', async (file, pin, named) => {
    const loaded = await named(() => loadVerifiedExport(file, pin.keys, options.approvalKey));
    const audit = auditExportPayments(loaded);
    await write(
      io.stdout,
      request.format === Format.Json
        ? `${JSON.stringify({ source, journalKey: journalKeyJson(pin), approvalKey: loaded.approvalKeyUse, ...audit })}\n`
        : [
            journalKeyLine(pin),
            approvalKeyLine(loaded.approvalKeyUse),
            formatPayments(audit, source),
          ].join('\n'),
    );
    return audit.ok ? ExitCode.Ok : ExitCode.VerifyFailed;
  });
}

/** One row per charge, then each problem, then the verdict. */
export function formatPayments(audit: PaymentAudit, source: string): string {
  const rows: string[][] = [[...PAYMENT_COLUMNS], ...audit.payments.map(paymentCells)];
  const widths = PAYMENT_COLUMNS.map((_, i) => Math.max(...rows.map((row) => row[i]?.length ?? 0)));
  const table =
    audit.payments.length === 0
      ? []
      : rows.map((row) =>
          row
            .map((cell, i) => (i === row.length - 1 ? cell : cell.padEnd(widths[i] ?? 0)))
            .join('  '),
        );
  const verdict = audit.ok ? 'OK' : 'PROBLEMS FOUND';
  return `${[
    ...table,
    ...paymentFindingLines(audit),
    `${source}: ${verdict}: ${String(audit.payments.length)} charges, ${String(audit.findings.length)} problems`,
  ].join('\n')}\n`;
}
