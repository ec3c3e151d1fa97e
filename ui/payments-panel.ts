/**
 * The Payments section (docs/ui.md, "Payments"): once the export verified, the
 * conversation's payments, one row per charge, audited in this browser with the common rule
 * (ui/verify/browser-payments.ts, common/payment-audit.ts): each receipt's signature by the
 * approval key, its binding to the approved charge, the totals against the limits in force.
 * The approval key can be pinned here, as the journal key is in the verification panel.
 */
import { findingLine, PAYMENT_COLUMNS, paymentCells } from '../common/payment-rows';
import { button, h, replace } from './dom';
import { pinApprovalKey, pinnedApprovalKeyText, unpinApprovalKey } from './pinned-key';
import type { BrowserPayments } from './verify/browser-payments';
import { parsePublicKey } from './verify/browser-verify';

export class PaymentsPanel {
  readonly element = h('section', { id: 'payments' });
  private payments: BrowserPayments | undefined;
  private note = '';

  /** Shows the audit of the verified export (undefined: not verified yet, or it failed). */
  show(payments: BrowserPayments | undefined): void {
    // Called on every render of the view: re-render only for a new audit, so a key being
    // typed into the pin field is not wiped by a live event.
    if (payments === this.payments && this.element.childElementCount > 0) return;
    this.payments = payments;
    this.render();
  }

  render(): void {
    replace(
      this.element,
      h('h3', {}, 'Payments'),
      ...this.pinControls(),
      ...(this.payments === undefined
        ? [
            h(
              'p',
              { id: 'payments-result' },
              'Verify the export to list the payments and check their receipts in this browser.',
            ),
          ]
        : this.audited(this.payments)),
    );
  }

  private audited(payments: BrowserPayments): HTMLElement[] {
    const { audit, approvalKey } = payments;
    const key =
      approvalKey === undefined
        ? "No approval key: the export header names none and none is pinned, so no receipt could be verified; pin the control plane's approval key."
        : approvalKey.source === 'pinned'
          ? `Receipts and approvals checked with the pinned approval key ${approvalKey.keyId}.`
          : `Receipts and approvals checked with the export header's approval key ${approvalKey.keyId}, which is NOT pinned: the header is not signed; pin the key for authenticity.`;
    const table = h(
      'table',
      { id: 'payments-table' },
      h('thead', {}, h('tr', {}, ...PAYMENT_COLUMNS.map((c) => h('th', {}, c)))),
      h(
        'tbody',
        {},
        ...audit.payments.map((p) => {
          const cells = paymentCells(p);
          return h(
            'tr',
            {
              'data-position': p.position,
              'data-state': p.state,
              'data-verified': cells.at(-1),
              class: cells.at(-1) === 'NO' ? 'failed' : undefined,
            },
            ...cells.map((cell) => h('td', { class: 'mono' }, cell)),
          );
        }),
      ),
    );
    return [
      h('p', { id: 'payments-key', class: 'mono' }, key),
      audit.payments.length === 0 ? h('p', {}, 'No charge is recorded.') : table,
      h(
        'ul',
        { id: 'payment-findings' },
        ...audit.findings.map((f) =>
          h('li', { class: 'error', 'data-position': f.position }, findingLine(f)),
        ),
      ),
      h(
        'p',
        {
          id: 'payments-result',
          'data-ok': String(audit.ok),
          class: audit.ok ? 'verified' : 'failed',
        },
        audit.ok
          ? `Payments audited in this browser: ${String(audit.payments.length)} charges, no problem.`
          : `Payments audit FAILED: ${String(audit.findings.length)} problems.`,
      ),
    ];
  }

  private pinControls(): HTMLElement[] {
    const pinned = pinnedApprovalKeyText();
    const input = h('input', {
      type: 'text',
      id: 'pin-approval-input',
      placeholder: 'approval public key: base64 or 64 hex digits',
    });
    const pin = (): void => {
      const key = parsePublicKey(input.value);
      if (typeof key === 'string') this.note = key;
      else {
        pinApprovalKey(input.value);
        this.note = 'Pinned: verify the export again to check the payments with it.';
      }
      this.render();
    };
    const unpin = (): void => {
      unpinApprovalKey();
      this.note = 'Unpinned: verify the export again.';
      this.render();
    };
    return [
      h(
        'p',
        { id: 'pinned-approval-key' },
        'Pinned approval key: ',
        h('span', { class: 'mono' }, pinned ?? "none: the export header's key is used"),
      ),
      h(
        'p',
        {},
        input,
        ' ',
        button('pin approval key', pin, { id: 'pin-approval' }),
        ' ',
        button('unpin', unpin, { id: 'unpin-approval' }),
        this.note === '' ? '' : h('span', { class: 'note' }, ` ${this.note}`),
      ),
    ];
  }
}
