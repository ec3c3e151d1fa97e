import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';

import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import pino from 'pino';

import { approvalKeyId } from '../common/approval-bytes';
import { decodePayload, encodePayload } from '../common/event-kinds';
import type { JournalEntry } from '../common/state-journal';
import { toHex } from '../state/journal/hex';
import { reSignedExport } from '../test/support/re-signed-export';
import { createNodeEd25519Signer } from '../state/journal/node-ed25519';
import { echoResponder, MessagesApiServer } from '../test/support/messages-api-server';
import { recordApprovedTurns } from '../test/support/real-turns';
import { ExitCode } from './cli-support';
import { runCli } from './run-cli';

/*
 * `polychrome journal replay FILE` on exports of a journal the real stack wrote (the real
 * coordinator, harness over gRPC, scripted model and journal store). To change a recorded
 * step and still pass verification, the events are appended again, batch by batch, to a
 * real JournalStore signing with a test key: only replay can catch the change.
 */

const signer = createNodeEd25519Signer(new Uint8Array(32).fill(5));
let dir: string;
let entries: JournalEntry[];
let approvalKey = '';

async function cli(
  args: readonly string[],
  env: Record<string, string> = {},
): Promise<{ code: ExitCode; stdout: string; stderr: string }> {
  const stdout = new PassThrough();
  const stderr = new PassThrough();
  let out = '';
  let err = '';
  stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
  stderr.on('data', (chunk: Buffer) => (err += chunk.toString()));
  const code = await runCli(args, { stdout, stderr }, env);
  return { code, stdout: out, stderr: err };
}

/** The journal re-signed under the test key and exported (test/support/re-signed-export.ts). */
function signedExport(journal: readonly JournalEntry[]): Promise<string> {
  return reSignedExport(journal, { dir, signer, partition: 'conv-replay' });
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
/** `journal replay FILE` with the state plane's key and the approval key pinned. */
const replayPinnedWith = (env: Record<string, string>, file: string, ...more: string[]) =>
  cli(['journal', 'replay', file, ...pinned(), '--approval-key', approvalKey, ...more], env);
const replayPinned = (file: string, ...more: string[]) => replayPinnedWith({}, file, ...more);

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'polychrome-replay-'));
  const recorded = await recordApprovedTurns(pino({ level: 'silent' }));
  entries = recorded.entries;
  approvalKey = toHex(recorded.turns.approvals.publicKey);
  await recorded.turns.close();
}, 60_000);

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('polychrome journal replay FILE (offline)', () => {
  it('replays an honest export: every turn ok, the transcript printed, the file unchanged', async () => {
    const file = await signedExport(entries);
    const before = await readFile(file, 'utf8');
    const text = await replayPinned(file);
    expect(text.stderr).toBe('');
    expect(text.code).toBe(ExitCode.Ok);
    expect(text.stdout).toContain('user: what is 6 * 7?');
    expect(text.stdout).toContain('approval: calculator approved');
    expect(text.stdout).toContain('assistant: It is 42.');
    expect(text.stdout).toContain('complete, 2 attempt(s), ok (full)');
    expect(text.stdout).toContain('OK: 2 turns replayed');
    const json = await replayPinned(file, '--json');
    expect(JSON.parse(json.stdout)).toMatchObject({ ok: true, divergence: null });
    expect(await readFile(file, 'utf8')).toBe(before);
  });

  it('finds a changed tool result in a re-signed export that verifies', async () => {
    const file = await signedExport(tamper('tool_result', (p) => (p.content = '41')));
    expect((await cli(['journal', 'verify', file, ...pinned()])).code).toBe(ExitCode.Ok);
    const run = await replayPinned(file, '--json');
    expect(run.code).toBe(ExitCode.VerifyFailed);
    const out = JSON.parse(run.stdout) as {
      ok: boolean;
      divergence: { step: number; found: string };
    };
    expect(out.ok).toBe(false);
    expect(out.divergence.step).toBe(2);
    expect(out.divergence.found).toContain('model_call');
    const text = await replayPinned(file);
    expect(text.stdout).toContain('DIVERGED');
    expect(text.stdout).toContain('first divergence at step 2');
  });

  it('finds a forged approval in a re-signed export that verifies', async () => {
    const file = await signedExport(
      tamper('approval_response', (p) => (p.signature = Buffer.alloc(64, 1))),
    );
    expect((await cli(['journal', 'verify', file, ...pinned()])).code).toBe(ExitCode.Ok);
    const run = await replayPinned(file);
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
    const run = await replayPinned(file);
    expect(run.code).toBe(ExitCode.Error);
    expect(run.stderr).toContain('replay is refused');
    expect(run.stdout).toBe('');
  });

  it('asks for the approval key when the journal holds approval answers', async () => {
    const run = await cli(['journal', 'replay', await signedExport(entries), ...pinned()]);
    expect(run.code).toBe(ExitCode.Error);
    expect(run.stderr).toContain('--approval-key');
  });

  /** The export with `fields` added to its header line (which no signature covers). */
  async function withHeader(fields: Record<string, unknown>): Promise<string> {
    const file = await signedExport(entries);
    const [header = '', ...rest] = (await readFile(file, 'utf8')).split('\n');
    await writeFile(
      file,
      [JSON.stringify({ ...JSON.parse(header), ...fields }), ...rest].join('\n'),
    );
    return file;
  }
  const keyBase64 = (): string => Buffer.from(approvalKey, 'hex').toString('base64');
  const keyId = (): string => approvalKeyId(Buffer.from(approvalKey, 'hex'));

  it("uses the header's approval key when none is pinned, and says the header is trusted", async () => {
    const file = await withHeader({ approvalKeyId: keyId(), approvalPublicKey: keyBase64() });
    const run = await cli(['journal', 'replay', file, ...pinned()]);
    expect(run.stderr).toBe('');
    expect(run.code).toBe(ExitCode.Ok);
    expect(run.stdout).toContain(
      `approval key: ${keyId()}, from the export header (trusted because no --approval-key was pinned; the header is not signed`,
    );
    // The header's key alone, as exports written before key ids were added have it.
    const bare = await withHeader({ approvalPublicKey: keyBase64() });
    expect((await cli(['journal', 'replay', bare, ...pinned()])).code).toBe(ExitCode.Ok);
  });

  it('lets a pinned key win over a header naming another, reporting the mismatch', async () => {
    const other = Buffer.alloc(32, 9);
    const file = await withHeader({
      approvalKeyId: approvalKeyId(other),
      approvalPublicKey: other.toString('base64'),
    });
    // The header's own key does not verify the recorded answer: replay diverges under it.
    expect((await cli(['journal', 'replay', file, ...pinned()])).code).toBe(ExitCode.VerifyFailed);
    const run = await replayPinned(file);
    expect(run.code).toBe(ExitCode.Ok);
    expect(run.stdout).toContain(
      `approval key: ${keyId()}, pinned with --approval-key, used; MISMATCH: the export header names another key, ${approvalKeyId(other)}`,
    );
    const json = await replayPinned(file, '--json');
    expect(JSON.parse(json.stdout)).toMatchObject({
      ok: true,
      approvalKey: {
        source: 'pinned',
        keyId: keyId(),
        headerKeyId: approvalKeyId(other),
        mismatch: true,
      },
    });
  });

  it('refuses a header whose approval key id does not name its key, or whose key is not 32 bytes', async () => {
    const wrongId = await withHeader({
      approvalKeyId: 'ab'.repeat(16),
      approvalPublicKey: keyBase64(),
    });
    const run = await cli([
      'journal',
      'replay',
      wrongId,
      ...pinned(),
      '--approval-key',
      approvalKey,
    ]);
    expect(run.code).toBe(ExitCode.Error);
    expect(run.stderr).toContain(
      `approvalKeyId "${'ab'.repeat(16)}" does not name approvalPublicKey, whose key id is ${keyId()}`,
    );
    const short = await withHeader({ approvalPublicKey: Buffer.alloc(16).toString('base64') });
    const shortRun = await cli(['journal', 'replay', short, ...pinned()]);
    expect(shortRun.code).toBe(ExitCode.Error);
    expect(shortRun.stderr).toContain(
      'approvalPublicKey must be the base64 of a 32-byte ed25519 public key',
    );
  });

  it('is a usage error without a FILE or with a malformed key', async () => {
    expect((await cli(['journal', 'replay'])).code).toBe(ExitCode.Usage);
    const bad = await cli(['journal', 'replay', 'x.jsonl', '--approval-key', 'nope']);
    expect(bad.code).toBe(ExitCode.Usage);
    expect(bad.stderr).toContain('--approval-key "nope" is not a raw ed25519 public key');
  });
});

describe('polychrome journal replay FILE --what-if CHANGE (offline)', () => {
  const requestId = (): string =>
    decodePayload(
      'approval_request',
      entries.find((e) => e.kind === 'approval_request')?.payload ?? new Uint8Array(),
    ).requestId;
  const whatIf = (file: string, change: string, ...more: string[]) =>
    replayPinned(file, '--what-if', change, ...more);

  it('a denial instead of the approval: where the run departs, and what it did after', async () => {
    const file = await signedExport(entries);
    const before = await readFile(file, 'utf8');
    const run = await whatIf(file, `approval@${requestId()}=deny`);
    expect(run.stderr).toBe('');
    expect(run.code).toBe(ExitCode.VerifyFailed);
    expect(run.stdout).toContain('recorded run: OK, 2 turns replayed');
    expect(run.stdout).toMatch(/no longer follows at turn \S+, step 1, position \d+/);
    expect(run.stdout).toMatch(/ {2}what-if: {2}tool_result .*denied/i);
    expect(run.stdout).toContain('the what-if line is what the turn machine itself would do next');
    expect(run.stdout).toContain('tool calculator {"expression":"6 * 7"}');
    expect(run.stdout).toContain('answer: It is 42.');
    expect(await readFile(file, 'utf8')).toBe(before);
  });

  it('a system prompt from a file: the first call departs and needs a live model; --json says so', async () => {
    const file = await signedExport(entries);
    const prompt = join(dir, 'prompt.txt');
    await writeFile(prompt, 'Answer in French.');
    const run = await whatIf(file, `system-prompt=@${prompt}`, '--json');
    expect(run.code).toBe(ExitCode.VerifyFailed);
    const out = JSON.parse(run.stdout) as {
      follows: boolean;
      needsModel: boolean;
      divergence: { step: number };
      change: unknown;
    };
    expect(out).toMatchObject({ follows: false, needsModel: true, divergence: { step: 1 } });
    expect(out.change).toEqual({ kind: 'system_prompt', value: 'Answer in French.' });
  });

  it('a change that alters nothing recorded exits 0', async () => {
    const run = await whatIf(await signedExport(entries), `approval@${requestId()}=approve`);
    expect(run.code).toBe(ExitCode.Ok);
    expect(run.stdout).toContain('still follows under the change');
  });

  it('refuses a recorded run that does not replay (exit 3)', async () => {
    const file = await signedExport(tamper('tool_result', (p) => (p.content = '41')));
    const run = await whatIf(file, 'model=other');
    expect(run.code).toBe(ExitCode.Error);
    expect(run.stderr).toContain('the recorded run does not replay');
  });

  it.each([
    ['bogus', 'expected NAME=VALUE'],
    ['frobnicate=1', 'unknown change "frobnicate"'],
    ['tool-result=41', 'tool-result needs @TARGET'],
    ['tool-result@x=41', 'x is not a journal position'],
    ['approval@r=maybe', 'approval takes approve or deny'],
    ['max-steps=0', 'max-steps takes a whole number'],
    ['model-blocks@3=[{"type":"image"}]', 'block 0 is neither'],
  ])('--what-if %s is a usage error that shows the forms', async (change, why) => {
    const run = await whatIf('unused.jsonl', change);
    expect(run.code).toBe(ExitCode.Usage);
    expect(run.stderr).toContain(why);
    expect(run.stderr).toContain('tool-result@POS=TEXT');
  });
});

describe('polychrome journal replay FILE --what-if CHANGE --live', () => {
  let messages: MessagesApiServer;
  beforeAll(async () => {
    messages = await MessagesApiServer.start({ respond: echoResponder });
  });
  afterAll(async () => {
    await messages.close();
  });
  const model = (): Record<string, string> => ({
    ANTHROPIC_API_KEY: messages.apiKey,
    ANTHROPIC_BASE_URL: messages.url,
  });
  const terse = (file: string, ...more: string[]) =>
    replayPinnedWith(model(), file, '--what-if', 'system-prompt=Be terse.', '--live', ...more);

  it('goes on from the departure with the configured model and prints the scratch run', async () => {
    const file = await signedExport(entries);
    const before = await readFile(file, 'utf8');
    const calls = messages.requests.length;
    const text = await terse(file);
    expect(text.stderr).toBe('');
    expect(text.code).toBe(ExitCode.VerifyFailed);
    expect(text.stdout).toContain('live: a scratch run of turn');
    expect(text.stdout).toContain('1 live model call(s); completed in 1 steps');
    expect(text.stdout).toContain('answer: echo: what is 6 * 7?');
    expect(messages.requests.length - calls).toBe(1);
    const json = await terse(file, '--json');
    expect(JSON.parse(json.stdout)).toMatchObject({
      follows: false,
      live: { outcome: 'completed', modelCalls: 1, text: 'echo: what is 6 * 7?' },
    });
    expect(await readFile(file, 'utf8')).toBe(before);
  });

  it('is a usage error without --what-if, before anything is read', async () => {
    const run = await cli(['journal', 'replay', 'unused.jsonl', '--live'], model());
    expect(run.code).toBe(ExitCode.Usage);
    expect(run.stderr).toContain('--live goes with --what-if CHANGE');
  });
});
