/**
 * Verification in the browser (docs/ui.md): fetch the export, replay it with the
 * project's pure journal code and @noble (ui/verify), against the pinned key and the
 * Conversation's status.journal; show the header's key id and fingerprint; pin a key;
 * check any event's inclusion proof.
 */
import { loadNobleCrypto, type NobleJournalCrypto } from '../state/journal/noble-crypto';
import { exportText, HttpError, type Conversation } from './api';
import { button, h, replace } from './dom';
import { pinKey, pinnedApprovalKeyText, pinnedKeyText, unpinKey } from './pinned-key';
import type { Seal, TimelineEvent } from './timeline';
import {
  checkInclusion,
  fingerprintOf,
  parsePublicKey,
  statusJournalCheckpoint,
  verifyExportText,
  type BrowserVerification,
} from './verify/browser-verify';

export class VerifyPanel {
  readonly element = h('section', { id: 'verify' });
  private conversation: Conversation | undefined;
  private verification: BrowserVerification | undefined;
  private readonly proofs = new Map<number, { ok: boolean; message: string }>();
  private note: HTMLElement = h(
    'p',
    {},
    'Not verified yet: the events below are as the server decoded them.',
  );
  private crypto: NobleJournalCrypto | undefined;

  constructor(
    private readonly ns: string,
    private readonly name: string,
    private readonly changed: () => void,
  ) {}

  setConversation(conversation: Conversation): void {
    this.conversation = conversation;
    this.render();
    void this.noble().then(() => this.render());
  }

  /** The audit of the verified export's payments; undefined until an export verified. */
  payments(): BrowserVerification['payments'] | undefined {
    return this.verification?.ok === true ? this.verification.payments : undefined;
  }

  /** The events as the verified export holds them, once verified. */
  verifiedEvents(): TimelineEvent[] | undefined {
    const events = this.verification?.events;
    if (events === undefined) return undefined;
    // An erased entry keeps the kind its sealed erasure record names, as on the stream.
    const erasedKinds = new Map<number, string>();
    for (const e of events) {
      const p = (e.kind === 'excision' ? e.payload : null) as {
        erased?: boolean;
        position?: number;
        erasedKind?: string;
      } | null;
      if (p?.erased === true) erasedKinds.set(p.position ?? 0, p.erasedKind ?? '');
    }
    return events.map((e) => ({
      position: e.position,
      kind: e.excised ? (erasedKinds.get(e.position) ?? e.kind) : e.kind,
      payload: e.payload,
      excised: e.excised,
      erased: e.excised && erasedKinds.has(e.position),
    }));
  }

  sealOf(position: number): Seal {
    const v = this.verification;
    if (v === undefined) return 'unverified';
    if (v.failure !== undefined && v.failure.position === position) return 'failed';
    const event = v.events.find((e) => e.position === position);
    if (event?.sealed === true && v.ok) return 'sealed';
    if (event?.sealed === true && v.failure !== undefined && position < v.failure.position)
      return 'sealed';
    return v.failure === undefined ? 'unsealed' : 'unverified';
  }

  sealCell(position: number, seal: Seal): HTMLElement {
    const labels: Record<Seal, string> = {
      sealed: '✓ verified',
      unsealed: 'not sealed yet',
      failed: '✗ failed here',
      unverified: this.verification === undefined ? '' : 'not verified',
    };
    const cls = seal === 'sealed' ? 'badge ok' : seal === 'failed' ? 'badge bad' : 'badge';
    const proof = this.proofs.get(position);
    return h(
      'span',
      {},
      labels[seal] === '' ? '' : h('span', { class: cls }, labels[seal]),
      seal === 'sealed' ? ' ' : '',
      seal === 'sealed'
        ? button('check proof', () => this.prove(position), { 'data-proof': position })
        : '',
      proof === undefined
        ? ''
        : h(
            'div',
            { class: proof.ok ? 'verified proof' : 'failed proof', 'data-proof-result': position },
            proof.message,
          ),
    );
  }

  private async noble(): Promise<NobleJournalCrypto> {
    this.crypto ??= await loadNobleCrypto();
    return this.crypto;
  }

  private prove(position: number): void {
    const v = this.verification;
    const crypto = this.crypto;
    if (v === undefined || crypto === undefined) return;
    const check = checkInclusion(v, position, crypto.sha256);
    this.proofs.set(position, {
      ok: check.ok,
      message: `${check.ok ? 'proof ok' : 'proof FAILED'}: ${check.message}`,
    });
    this.changed();
  }

  private async verify(): Promise<void> {
    this.note = h('p', {}, 'Fetching the export…');
    this.render();
    let text: string;
    try {
      text = await exportText(this.ns, this.name);
    } catch (error) {
      this.note =
        error instanceof HttpError && error.status === 403
          ? h(
              'p',
              { class: 'error', id: 'verify-forbidden' },
              `Forbidden: verifying needs the RBAC verb "get" on "conversations/export" in the API group api.polychrome.dev ` +
                `(the polychrome-conversation-admin role, which the namespace's admin role includes). The cluster said: ${error.message}`,
            )
          : h(
              'p',
              { class: 'error' },
              `The export could not be read: ${error instanceof Error ? error.message : String(error)}`,
            );
      this.render();
      return;
    }
    const crypto = await this.noble();
    const pinned = pinnedKeyText();
    const key = pinned === undefined ? undefined : parsePublicKey(pinned);
    const approvalText = pinnedApprovalKeyText();
    const approvalKey = approvalText === undefined ? undefined : parsePublicKey(approvalText);
    const checkpoint = statusJournalCheckpoint(this.conversation?.status?.journal);
    if (
      typeof key === 'string' ||
      typeof approvalKey === 'string' ||
      typeof checkpoint === 'string'
    ) {
      this.note = h(
        'p',
        { class: 'error' },
        typeof key === 'string'
          ? `The pinned key does not read: ${key}`
          : typeof approvalKey === 'string'
            ? `The pinned approval key does not read: ${approvalKey}`
            : (checkpoint as string),
      );
      this.render();
      return;
    }
    try {
      this.verification = verifyExportText(text, crypto, {
        source: `the export of ${this.name}`,
        ...(key === undefined ? {} : { pinnedKey: key }),
        ...(checkpoint === undefined ? {} : { checkpoint }),
        ...(approvalKey === undefined ? {} : { approvalKey }),
      });
    } catch (error) {
      this.note = h(
        'p',
        { class: 'error' },
        error instanceof Error ? error.message : String(error),
      );
      this.render();
      return;
    }
    this.proofs.clear();
    this.note = this.verdict(this.verification, key !== undefined);
    this.render();
    this.changed();
  }

  private verdict(v: BrowserVerification, pinned: boolean): HTMLElement {
    const trust = pinned
      ? 'against the pinned key'
      : "against the export header's key, which is NOT pinned: this proves integrity, not who signed; pin the key for authenticity";
    if (v.failure !== undefined) {
      return h(
        'p',
        {
          id: 'verify-result',
          'data-ok': 'false',
          'data-position': v.failure.position,
          'data-reason': v.failure.reason,
          class: 'failed',
        },
        `Verification FAILED at position ${String(v.failure.position)} (${v.failure.reason}): ${v.failure.message}`,
      );
    }
    return h(
      'p',
      { id: 'verify-result', 'data-ok': 'true', class: 'verified' },
      `Verified in this browser: ${String(v.result.events)} events, ${String(v.result.signedRoots)} signed roots, ` +
        `${trust}; checked against status.journal (head ${String(v.result.checkpoint?.head ?? 0)}).` +
        (v.result.unsealed > 0
          ? ` ${String(v.result.unsealed)} events after the last signed root are not sealed yet.`
          : ''),
    );
  }

  private render(): void {
    const journal = this.conversation?.status?.journal as { keyId?: string } | undefined;
    const pinned = pinnedKeyText();
    const input = h('input', {
      type: 'text',
      id: 'pin-input',
      placeholder: 'public key: base64 (as in the export header) or 64 hex digits',
    });
    const keys =
      this.verification === undefined
        ? []
        : this.verification.headerKeys.map((k) =>
            h(
              'li',
              { class: 'mono', 'data-key-id': k.keyId },
              `export header key ${k.keyId}, fingerprint ${k.fingerprint}`,
            ),
          );
    const pinnedInfo = (() => {
      if (pinned === undefined || this.crypto === undefined)
        return pinned === undefined ? "none: the export header's key is trusted" : pinned;
      const key = parsePublicKey(pinned);
      return typeof key === 'string'
        ? key
        : `fingerprint ${fingerprintOf(this.crypto.sha256, key)}`;
    })();
    replace(
      this.element,
      h('h3', {}, 'Verification in this browser'),
      h('p', { class: 'mono' }, `status.journal key id: ${journal?.keyId ?? 'none'}`),
      h('ul', {}, ...keys),
      h('p', { id: 'pinned-key' }, 'Pinned key: ', h('span', { class: 'mono' }, pinnedInfo)),
      h(
        'p',
        {},
        input,
        ' ',
        button(
          'pin',
          () => {
            const key = parsePublicKey(input.value);
            if (typeof key === 'string') {
              this.note = h('p', { class: 'error' }, key);
            } else {
              pinKey(input.value);
            }
            this.render();
          },
          { id: 'pin' },
        ),
        ' ',
        button(
          'unpin',
          () => {
            unpinKey();
            this.render();
          },
          { id: 'unpin' },
        ),
      ),
      h(
        'p',
        {},
        button('verify the export', () => void this.verify(), { id: 'verify-button' }),
      ),
      this.note,
    );
  }
}
