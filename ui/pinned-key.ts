/**
 * The public key the user pinned, kept in this browser's localStorage: once pinned, only
 * that key is accepted; the export header's keys are no longer trusted.
 */
const STORAGE_KEY = 'polychrome.pinnedPublicKey';

export function pinnedKeyText(): string | undefined {
  return localStorage.getItem(STORAGE_KEY) ?? undefined;
}

export function pinKey(text: string): void {
  localStorage.setItem(STORAGE_KEY, text.trim());
}

export function unpinKey(): void {
  localStorage.removeItem(STORAGE_KEY);
}

/**
 * The control plane's approval public key the user pinned: once pinned, payment receipts
 * and approvals are checked with it, not with the export header's (docs/ui.md, "Payments").
 */
const APPROVAL_STORAGE_KEY = 'polychrome.pinnedApprovalKey';

export function pinnedApprovalKeyText(): string | undefined {
  return localStorage.getItem(APPROVAL_STORAGE_KEY) ?? undefined;
}

export function pinApprovalKey(text: string): void {
  localStorage.setItem(APPROVAL_STORAGE_KEY, text.trim());
}

export function unpinApprovalKey(): void {
  localStorage.removeItem(APPROVAL_STORAGE_KEY);
}
