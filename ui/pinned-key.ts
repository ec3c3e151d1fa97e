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
