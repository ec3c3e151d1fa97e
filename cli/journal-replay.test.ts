import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';

import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import pino from 'pino';

import { decodePayload, encodePayload } from '../common/event-kinds';
import type { JournalEntry } from '../common/state-client';
import type { Caller } from '../operator/turns/turn-service';
import { toHex } from '../state/journal/hex';
import { createNodeEd25519Signer } from '../state/journal/node-ed25519';
import { JournalStore } from '../state/store/journal-store';
import { readyStatus } from '../test/support/in-memory-conversations';
import { calculatorReply, startRealTurns, textReply } from '../test/support/real-turns';
import { ExitCode, runCli } from './run-cli';

/*
 * `polychrome journal replay FILE` on exports of a journal the real stack wrote (the real
 * coordinator, harness over gRPC, scripted model and journal store). To change a recorded
 * step and still pass verification, the events are appended again, batch by batch, to a
 * real JournalStore signing with a test key: only replay can catch the change.
 */

const OWNER: Caller = {
  identity: 'web:owner',
  identities: ['web:owner'],
  personaId: 'p-owner',
  roles: ['member'],
  sessionId: 's',
};
const ADMIN: Caller = {
  ...OWNER,
  identity: 'web:admin',
  identities: ['web:admin'],
  roles: ['admin'],
};

const signer = createNodeEd25519Signer(new Uint8Array(32).fill(5));
let dir: string;
let entries: JournalEntry[];
let approvalKey = '';
let exports = 0;

async function cli(
  args: readonly string[],
): Promise<{ code: ExitCode; stdout: string; stderr: string }> {
  const stdout = new PassThrough();
  const stderr = new PassThrough();
  let out = '';
  let err = '';
  stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
  stderr.on('data', (chunk: Buffer) => (err += chunk.toString()));
  const code = await runCli(args, { stdout, stderr }, {});
  return { code, stdout: out, stderr: err };
}

/** The journal re-appended batch by batch (its signed roots dropped and made again), exported. */
async function signedExport(journal: readonly JournalEntry[]): Promise<string> {
  exports += 1;
  const store = new JournalStore({ location: join(dir, `db-${String(exports)}`), signer });
  await store.open();
  try {
    let head = 0;
    let batch: { kind: string; payload: Uint8Array }[] = [];
    for (const entry of journal) {
      if (entry.kind !== 'signed_root') {
        batch.push({ kind: entry.kind, payload: entry.payload });
        continue;
      }
      head = (await store.append('conv-replay', head, batch)).head;
      batch = [];
    }
    let text = '';
    for await (const chunk of store.export('conv-replay'))
      text += Buffer.from(chunk).toString('utf8');
    const file = join(dir, `export-${String(exports)}.jsonl`);
    await writeFile(file, text);
    return file;
  } finally {
    await store.close();
  }
}

function tamper<K extends 'tool_result' | 'approval_response'>(
  kind: K,
  change: (payload: ReturnType<typeof decodePayload<K>>) => void,
): JournalEntry[] {
  return entries.map((entry) => {
    if (entry.kind !== kind) return entry;
    const payload = decodePayload(kind, entry.payload);
    change(payload);
    return { ...entry, payload: encodePayload(kind, payload) };
  });
}

const pinned = (): string[] => ['--public-key', toHex(signer.publicKey)];

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'polychrome-replay-'));
  const turns = await startRealTurns({
    replies: [calculatorReply('6 * 7'), textReply('It is 42.'), textReply('You are welcome.')],
    logger: pino({ level: 'silent' }),
    admins: [ADMIN.identity],
  });
  try {
    const conversation = turns.conversations.add(
      { owner: OWNER.identity },
      { status: readyStatus(turns.harness.endpoint) },
    );
    const uid = conversation.metadata.uid ?? '';
    const signal = AbortSignal.timeout(20_000);
    const paused = await turns.coordinator.postMessage(
      OWNER,
      { conversationId: uid, text: 'what is 6 * 7?', idempotencyKey: 'k1' },
      signal,
    );
    await turns.coordinator.answerApproval(
      ADMIN,
      { conversationId: uid, requestId: paused.approval?.requestId ?? '', decision: 'approve' },
      signal,
    );
    await turns.coordinator.postMessage(
      OWNER,
      { conversationId: uid, text: 'thanks', idempotencyKey: 'k2' },
      signal,
    );
    entries = await turns.journal.entries(`conv-${uid}`);
    approvalKey = toHex(turns.approvals.publicKey);
  } finally {
    await turns.close();
  }
}, 60_000);

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('polychrome journal replay FILE (offline)', () => {
  it('replays an honest export: every turn ok, the transcript printed, the file unchanged', async () => {
    const file = await signedExport(entries);
    const before = await readFile(file, 'utf8');
    const text = await cli(['journal', 'replay', file, ...pinned(), '--approval-key', approvalKey]);
    expect(text.stderr).toBe('');
    expect(text.code).toBe(ExitCode.Ok);
    expect(text.stdout).toContain('user: what is 6 * 7?');
    expect(text.stdout).toContain('approval: calculator approved');
    expect(text.stdout).toContain('assistant: It is 42.');
    expect(text.stdout).toContain('complete, 2 attempt(s), ok (full)');
    expect(text.stdout).toContain('OK: 2 turns replayed');
    const json = await cli([
      'journal',
      'replay',
      file,
      ...pinned(),
      '--approval-key',
      approvalKey,
      '--json',
    ]);
    expect(JSON.parse(json.stdout)).toMatchObject({ ok: true, divergence: null });
    expect(await readFile(file, 'utf8')).toBe(before);
  });

  it('finds a changed tool result in a re-signed export that verifies', async () => {
    const file = await signedExport(tamper('tool_result', (p) => (p.content = '41')));
    expect((await cli(['journal', 'verify', file, ...pinned()])).code).toBe(ExitCode.Ok);
    const run = await cli([
      'journal',
      'replay',
      file,
      ...pinned(),
      '--approval-key',
      approvalKey,
      '--json',
    ]);
    expect(run.code).toBe(ExitCode.VerifyFailed);
    const out = JSON.parse(run.stdout) as {
      ok: boolean;
      divergence: { step: number; found: string };
    };
    expect(out.ok).toBe(false);
    expect(out.divergence.step).toBe(2);
    expect(out.divergence.found).toContain('model_call');
    const text = await cli(['journal', 'replay', file, ...pinned(), '--approval-key', approvalKey]);
    expect(text.stdout).toContain('DIVERGED');
    expect(text.stdout).toContain('first divergence at step 2');
  });

  it('finds a forged approval in a re-signed export that verifies', async () => {
    const file = await signedExport(
      tamper('approval_response', (p) => (p.signature = Buffer.alloc(64, 1))),
    );
    expect((await cli(['journal', 'verify', file, ...pinned()])).code).toBe(ExitCode.Ok);
    const run = await cli(['journal', 'replay', file, ...pinned(), '--approval-key', approvalKey]);
    expect(run.code).toBe(ExitCode.VerifyFailed);
    expect(run.stdout).toContain('expected: approval_request');
  });

  it('refuses to replay an export that fails verification', async () => {
    const file = await signedExport(entries);
    const lines = (await readFile(file, 'utf8')).trimEnd().split('\n');
    const changed = JSON.parse(lines[2] ?? '{}') as { payload: string };
    changed.payload = Buffer.from('forged').toString('base64');
    lines[2] = JSON.stringify(changed);
    await writeFile(file, `${lines.join('\n')}\n`);
    const run = await cli(['journal', 'replay', file, ...pinned(), '--approval-key', approvalKey]);
    expect(run.code).toBe(ExitCode.Error);
    expect(run.stderr).toContain('replay is refused');
    expect(run.stdout).toBe('');
  });

  it('asks for the approval key when the journal holds approval answers', async () => {
    const run = await cli(['journal', 'replay', await signedExport(entries), ...pinned()]);
    expect(run.code).toBe(ExitCode.Error);
    expect(run.stderr).toContain('--approval-key');
  });

  it('is a usage error without a FILE or with a malformed key', async () => {
    expect((await cli(['journal', 'replay'])).code).toBe(ExitCode.Usage);
    const bad = await cli(['journal', 'replay', 'x.jsonl', '--approval-key', 'nope']);
    expect(bad.code).toBe(ExitCode.Usage);
    expect(bad.stderr).toContain('--approval-key "nope" is not a raw ed25519 public key');
  });
});
