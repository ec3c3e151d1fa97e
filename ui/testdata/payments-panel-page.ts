/**
 * A page for the Payments panel in a real browser (test/support/browser-payments.test.ts loads it):
 * the export text is verified with the UI's own code (ui/verify/browser-verify.ts, @noble)
 * and its payments shown by the UI's own panel (ui/payments-panel.ts). esbuild bundles this
 * file as hack/build-ui.ts bundles the UI (the `buffer` shim, the browser platform).
 */
import { parseExportHeader } from '../../common/journal-export-parse';
import { loadNobleCrypto } from '../../state/journal/noble-crypto';
import { PaymentsPanel } from '../payments-panel';
import { parsePublicKey, verifyExportText } from '../verify/browser-verify';

/** Verifies `text` against `journalKey` (hex), pinning `approvalKey` (hex) when given. */
async function showPayments(
  text: string,
  journalKey: string,
  approvalKey?: string,
): Promise<boolean> {
  const header = parseExportHeader(text.slice(0, text.indexOf('\n')));
  const pinned = parsePublicKey(journalKey);
  const approval = approvalKey === undefined ? undefined : parsePublicKey(approvalKey);
  if (typeof header === 'string' || typeof pinned === 'string' || typeof approval === 'string') {
    return false;
  }
  const verification = verifyExportText(text, await loadNobleCrypto(), {
    source: 'the export',
    pinnedKey: pinned,
    ...(header.checkpoint === undefined ? {} : { checkpoint: header.checkpoint }),
    ...(approval === undefined ? {} : { approvalKey: approval }),
  });
  const panel = new PaymentsPanel();
  document.body.replaceChildren(panel.element);
  panel.show(verification.ok ? verification.payments : undefined);
  return verification.ok;
}

(globalThis as { showPayments?: typeof showPayments }).showPayments = showPayments;
