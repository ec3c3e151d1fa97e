import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import pino from 'pino';
import { decodePayload, encodePayload } from '../common/event-kinds';
import type { JournalEntry } from '../common/state-journal';
import { toHex } from '../state/journal/hex';
import { reSignedExport } from '../test/support/re-signed-export';
import { createNodeEd25519Signer } from '../state/journal/node-ed25519';
import { startBoughtJournal, type PaidTurns } from '../test/support/paid-turns';
import { ExitCode } from './cli-support';
import { loadVerifiedExport } from './journal-replay';
import { auditExportPayments, formatPayments } from './payments-list';
import { runCli } from './run-cli';

/*
 * `payments NAME`'s listing and `journal replay`'s payment audit on a journal the real stack
 * wrote while paying on anvil through the @x402 packages. The attacker of interest holds
 * the journal's signing key (so the export still verifies: the journal is re-appended batch
 * by batch to a real JournalStore signing with a test key) but not the approval key.
 */

const signer = createNodeEd25519Signer(new Uint8Array(32).fill(9));
let dir: string;
let paid: PaidTurns;
let entries: JournalEntry[];
let approvalKey: Uint8Array;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'polychrome-payments-list-'));
  ({ paid, entries, approvalKey } = await startBoughtJournal('1000000', pino({ level: 'silent' })));
}, 90_000);

afterAll(async () => {
  await paid.close();
  await rm(dir, { recursive: true, force: true });
});

/** The journal re-signed under the test key and exported (test/support/re-signed-export.ts). */
function signedExport(journal: readonly JournalEntry[]): Promise<string> {
  return reSignedExport(journal, { dir, signer, partition: `conv-${paid.conversationId}` });
}

/** The receipt's amount lowered, as a journal rewrite would. */
function lowered(): JournalEntry[] {
  return entries.map((entry) =>
    entry.kind === 'outbound_payment_receipt'
      ? {
          ...entry,
          payload: encodePayload('outbound_payment_receipt', {
            ...decodePayload('outbound_payment_receipt', entry.payload),
            amount: '1',
          }),
        }
      : entry,
  );
}

async function replay(file: string): Promise<{ code: ExitCode; stdout: string }> {
  const stdout = new PassThrough();
  let out = '';
  stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
  const args = ['journal', 'replay', file, '--public-key', toHex(signer.publicKey)];
  const code = await runCli([...args, '--approval-key', toHex(approvalKey)], {
    stdout,
    stderr: new PassThrough(),
  });
  return { code, stdout: out };
}

describe('payments of a real paid journal', () => {
  it('lists the charge paid, its transaction and its receipt verified', async () => {
    const loaded = await loadVerifiedExport(
      await signedExport(entries),
      [signer.publicKey],
      approvalKey,
    );
    const audit = auditExportPayments(loaded);
    expect(audit.ok).toBe(true);
    const text = formatPayments(audit, 'conversation c');
    const [header, row, verdict] = text.trimEnd().split('\n');
    expect(header).toMatch(/^WHEN +TOOL CALL +PROTOCOL +AMOUNT .* RECEIPT VERIFIED$/);
    const { fixture } = paid;
    expect(row).toMatch(
      new RegExp(
        `^\\d{4}-\\d\\d-\\d\\dT[\\d:.]+Z +toolu_buy +x402 +1000000 ${fixture.token.address.toLowerCase()} +eip155:\\d+ +${fixture.payee.toLowerCase()} +${paid.paidUrl} +paid +0x[0-9a-f]{64} +yes$`,
      ),
    );
    expect(verdict).toBe('conversation c: OK: 1 charges, 0 problems');
    expect((await replay(await signedExport(entries))).code).toBe(ExitCode.Ok);
  });

  it('fails a receipt rewritten under a re-signed journal: listed unverified, replay exits 1', async () => {
    const file = await signedExport(lowered());
    const audit = auditExportPayments(
      await loadVerifiedExport(file, [signer.publicKey], approvalKey),
    );
    expect(audit.payments.map((p) => [p.state, p.receiptVerified])).toEqual([['paid', false]]);
    const text = formatPayments(audit, 'conversation c');
    expect(text).toMatch(/ paid +0x[0-9a-f]{64} +NO\n/);
    const position = entries.find((e) => e.kind === 'outbound_payment_receipt')?.position;
    const key = audit.payments[0]?.idempotencyKey ?? '';
    expect(text).toContain(
      `payment problem at ${String(position)} (charge ${key}): the receipt differs from its charge`,
    );
    expect(text).toContain('conversation c: PROBLEMS FOUND: 1 charges, 1 problems');
    const run = await replay(file);
    expect(run.code).toBe(ExitCode.VerifyFailed);
    expect(run.stdout).toContain(`payment problem at ${String(position)} (charge ${key})`);
    expect(run.stdout).toMatch(/DIVERGED: .*1 payments audited, 1 problems/);
  });
});
