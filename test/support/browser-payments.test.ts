/**
 * The forensics UI's payment audit (ui/verify/browser-payments.ts, run by
 * ui/verify/browser-verify.ts with @noble, as the browser runs it) over a journal the real
 * stack wrote while paying on anvil through the @x402 packages. It lives here, not in ui/,
 * because it drives the real paid turn (test/support). The attacker holds the journal's
 * signing key (the journal is re-appended and re-signed, so it verifies) but not the
 * approval key: the receipt they change stops verifying in the browser; the approval key
 * they put in the export header instead is caught once the real one is pinned.
 */
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { generateKeyPairSync, sign } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { build } from 'esbuild';
import pino from 'pino';
import puppeteer, { type Browser } from 'puppeteer-core';
import { approvalKeyId } from '../../common/approval-bytes';
import { decodePayload, encodePayload } from '../../common/event-kinds';
import { parseExportHeader } from '../../common/journal-export-parse';
import { receiptSigningBytes } from '../../common/payment-receipt';
import type { JournalEntry } from '../../common/state-journal';
import { loadNobleCrypto, type NobleJournalCrypto } from '../../state/journal/noble-crypto';
import { createNodeEd25519Signer } from '../../state/journal/node-ed25519';
import { toHex } from '../../state/journal/hex';
import { verifyExportText, type BrowserVerification } from '../../ui/verify/browser-verify';
import { startBoughtJournal, type PaidTurns } from './paid-turns';
import { reSignedExport } from './re-signed-export';

const signer = createNodeEd25519Signer(new Uint8Array(32).fill(11));
let dir: string;
let paid: PaidTurns;
let entries: JournalEntry[];
let approvalKey: Uint8Array;
let noble: NobleJournalCrypto;

beforeAll(async () => {
  noble = await loadNobleCrypto();
  dir = await mkdtemp(join(tmpdir(), 'polychrome-browser-payments-'));
  ({ paid, entries, approvalKey } = await startBoughtJournal('1000000', pino({ level: 'silent' })));
}, 90_000);

afterAll(async () => {
  await paid.close();
  await rm(dir, { recursive: true, force: true });
});

/** The export text of `journal`, re-signed with the test journal key. */
async function exportOf(journal: readonly JournalEntry[]): Promise<string> {
  const partition = `conv-${paid.conversationId}`;
  return readFile(await reSignedExport(journal, { dir, signer, partition }), 'utf8');
}

/** Verified as the page verifies it: the journal key pinned, the header's checkpoint. */
function verified(text: string, pinnedApprovalKey?: Uint8Array): BrowserVerification {
  const header = parseExportHeader(text.slice(0, text.indexOf('\n')));
  if (typeof header === 'string') throw new Error(header);
  if (header.checkpoint === undefined) throw new Error('the export header has no checkpoint');
  return verifyExportText(text, noble, {
    source: 'the export',
    pinnedKey: signer.publicKey,
    checkpoint: header.checkpoint,
    ...(pinnedApprovalKey === undefined ? {} : { approvalKey: pinnedApprovalKey }),
  });
}

/** The receipt changed by `change`, and re-signed by `resign` when given. */
function rewrittenReceipt(
  change: Record<string, unknown>,
  resign?: (message: Uint8Array) => Uint8Array,
): JournalEntry[] {
  return entries.map((entry) => {
    if (entry.kind !== 'outbound_payment_receipt') return entry;
    const receipt = { ...decodePayload('outbound_payment_receipt', entry.payload), ...change };
    const signature =
      resign === undefined ? receipt.signature : Buffer.from(resign(receiptSigningBytes(receipt)));
    return {
      ...entry,
      payload: encodePayload('outbound_payment_receipt', { ...receipt, signature }),
    };
  });
}

const receiptPosition = () => entries.find((e) => e.kind === 'outbound_payment_receipt')?.position;

describe('the forensics UI audits payments in the browser', () => {
  it('lists the paid charge with its receipt verified by the pinned approval key', async () => {
    const v = verified(await exportOf(entries), approvalKey);
    expect(v.ok).toBe(true);
    expect(v.payments.approvalKey).toEqual({ keyId: approvalKeyId(approvalKey), source: 'pinned' });
    expect(v.payments.audit.findings).toEqual([]);
    expect(v.payments.audit.payments).toEqual([
      expect.objectContaining({ toolCallId: 'toolu_buy', state: 'paid', receiptVerified: true }),
    ]);
  });

  it('cannot verify a receipt with no approval key, and says so', async () => {
    const v = verified(await exportOf(entries));
    expect(v.payments.approvalKey).toBeUndefined();
    expect(v.payments.audit.payments[0]?.receiptVerified).toBe(false);
    expect(v.payments.audit.findings.map((f) => f.problem)).toContainEqual(
      expect.stringMatching(/no approval public key was given/),
    );
  });

  it('fails a receipt changed in a journal that still verifies', async () => {
    const v = verified(
      await exportOf(rewrittenReceipt({ payer: `0x${'00'.repeat(20)}` })),
      approvalKey,
    );
    expect(v.ok).toBe(true); // the journal's own signatures hold: the attacker re-signed it
    expect(v.payments.audit.ok).toBe(false);
    expect(v.payments.audit.payments[0]?.receiptVerified).toBe(false);
    expect(v.payments.audit.findings).toEqual([
      expect.objectContaining({
        position: receiptPosition(),
        problem: expect.stringMatching(/the receipt has a signature that does not verify/),
      }),
    ]);
  });

  it('trusts an approval key the attacker wrote into the header only until the real one is pinned', async () => {
    const forged = generateKeyPairSync('ed25519');
    const forgedKey = Buffer.from(
      String(forged.publicKey.export({ format: 'jwk' }).x),
      'base64url',
    );
    const journal = rewrittenReceipt(
      { payer: `0x${'00'.repeat(20)}`, keyId: approvalKeyId(forgedKey) },
      (message) => sign(null, message, forged.privateKey),
    );
    const text = await exportOf(journal);
    const [first = '', ...rest] = text.split('\n');
    const header = {
      ...(JSON.parse(first) as object),
      approvalKeyId: approvalKeyId(forgedKey),
      approvalPublicKey: forgedKey.toString('base64'),
    };
    const withForgedHeader = [JSON.stringify(header), ...rest].join('\n');
    // The header's key is not signed: unpinned, the forged receipt verifies (the panel says
    // the header's key is NOT pinned), though the approval it rests on does not.
    const unpinned = verified(withForgedHeader);
    expect(unpinned.payments.approvalKey?.source).toBe('export-header');
    expect(unpinned.payments.audit.payments[0]?.receiptVerified).toBe(true);
    expect(unpinned.payments.audit.findings).toEqual([
      expect.objectContaining({
        problem: expect.stringMatching(/^sent without approval: .*not the approval key/),
      }),
    ]);
    // Pinned, the real approval key refuses it.
    const pinned = verified(withForgedHeader, approvalKey);
    expect(pinned.payments.audit.payments[0]?.receiptVerified).toBe(false);
    expect(pinned.payments.audit.findings).toContainEqual(
      expect.objectContaining({
        position: receiptPosition(),
        problem: expect.stringMatching(
          new RegExp(`signed by key ${approvalKeyId(forgedKey)}, not the approval key`),
        ),
      }),
    );
  });
});

/*
 * The same, in a real headless Chromium (Debian's `chromium`, driven by puppeteer-core, as
 * test/integration/ui-browser.test.ts drives the whole UI): the page bundles the UI's own
 * verifier and Payments panel (ui/testdata/payments-panel-page.ts) as hack/build-ui.ts
 * bundles the UI, verifies the real export in the browser and renders the panel.
 */
describe('the Payments panel in Chromium', () => {
  const CHROMIUM = process.env.POLYCHROME_CHROMIUM ?? '/usr/bin/chromium';
  let browser: Browser | undefined;
  let server: Server | undefined;
  let url = '';

  beforeAll(async () => {
    const root = join(__dirname, '..', '..');
    const bundle = await build({
      entryPoints: [join(root, 'ui', 'testdata', 'payments-panel-page.ts')],
      bundle: true,
      write: false,
      format: 'iife',
      platform: 'browser',
      target: ['es2022'],
      inject: [join(root, 'ui', 'shims', 'buffer.ts')],
      tsconfig: join(root, 'ui', 'tsconfig.json'),
      logLevel: 'warning',
    });
    const script = bundle.outputFiles[0]?.text ?? '';
    server = createServer((request, response) => {
      const js = request.url === '/page.js';
      response.writeHead(200, { 'content-type': js ? 'text/javascript' : 'text/html' });
      response.end(
        js ? script : '<!doctype html><html><body></body><script src="/page.js"></script></html>',
      );
    });
    await new Promise<void>((done) => server?.listen(0, '127.0.0.1', done));
    url = `http://127.0.0.1:${String((server.address() as AddressInfo).port)}/`;
    browser = await puppeteer.launch({
      executablePath: CHROMIUM,
      headless: true,
      args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
    });
  }, 60_000);

  afterAll(async () => {
    await browser?.close();
    await new Promise((done) => server?.close(done));
  });

  /** The panel the page renders for `text`, read from its DOM. */
  async function panelOf(text: string, approval?: Uint8Array) {
    const page = await (browser as Browser).newPage();
    try {
      await page.goto(url);
      await page.waitForFunction('typeof globalThis.showPayments === "function"');
      const args = [
        text,
        toHex(signer.publicKey),
        ...(approval === undefined ? [] : [toHex(approval)]),
      ];
      const verified = await page.evaluate(`globalThis.showPayments(...${JSON.stringify(args)})`);
      const rows = (await page.evaluate(
        `[...document.querySelectorAll('#payments-table tbody tr')].map((r) => ({ state: r.getAttribute('data-state'), verified: r.getAttribute('data-verified'), cells: [...r.children].map((c) => c.textContent) }))`,
      )) as { state: string; verified: string; cells: string[] }[];
      const findings = (await page.evaluate(
        `[...document.querySelectorAll('#payment-findings li')].map((e) => e.textContent)`,
      )) as string[];
      const result = (await page.evaluate(
        `(() => { const e = document.querySelector('#payments-result'); return { ok: e.getAttribute('data-ok'), text: e.textContent, key: document.querySelector('#payments-key').textContent }; })()`,
      )) as { ok: string; text: string; key: string };
      return { verified, rows, findings, result };
    } finally {
      await page.close();
    }
  }

  it('verifies the export in the browser and lists the paid charge, its receipt verified', async () => {
    const panel = await panelOf(await exportOf(entries), approvalKey);
    expect(panel.verified).toBe(true);
    expect(panel.rows).toEqual([
      {
        state: 'paid',
        verified: 'yes',
        cells: [
          expect.stringMatching(/^\d{4}-\d\d-\d\dT/),
          'toolu_buy',
          'x402',
          `1000000 ${paid.fixture.token.address.toLowerCase()}`,
          expect.stringMatching(/^eip155:\d+$/),
          paid.fixture.payee.toLowerCase(),
          paid.paidUrl,
          'paid',
          expect.stringMatching(/^0x[0-9a-f]{64}$/),
          'yes',
        ],
      },
    ]);
    expect(panel.findings).toEqual([]);
    expect(panel.result.ok).toBe('true');
    expect(panel.result.key).toContain(`pinned approval key ${approvalKeyId(approvalKey)}`);
  }, 60_000);

  it('marks a receipt changed in a re-signed journal NO, and names the problem', async () => {
    const panel = await panelOf(await exportOf(rewrittenReceipt({ amount: '1' })), approvalKey);
    expect(panel.verified).toBe(true);
    expect(panel.rows.map((r) => [r.state, r.verified])).toEqual([['paid', 'NO']]);
    expect(panel.findings).toEqual([
      expect.stringMatching(
        new RegExp(
          `^payment problem at ${String(receiptPosition())} \\(charge [0-9a-f]{64}\\): the receipt differs from its charge .* in amount$`,
        ),
      ),
    ]);
    expect(panel.result).toMatchObject({ ok: 'false', text: 'Payments audit FAILED: 1 problems.' });
  }, 60_000);
});
