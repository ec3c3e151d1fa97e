import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';

import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';

import { EventKind } from '../common/event-kinds';
import { toHex } from '../state/journal/hex';
import { createNodeEd25519Signer } from '../state/journal/node-ed25519';
import { EXPORT_FORMAT as STORE_EXPORT_FORMAT } from '../state/store/journal-export';
import { JournalStore } from '../state/store/journal-store';
import { EXPORT_FORMAT } from '../common/journal-export-format';
import { decodeBase64, parseExportEvent, parseExportHeader } from '../common/journal-export-parse';
import { ExitCode } from './cli-support';
import { runCli, USAGE } from './run-cli';

/*
 * The CLI in process: usage errors exit 2 with a message and the usage, failures to run
 * exit 3, offline verification of an export 0 or 1. The server-backed commands run
 * against the real state plane process in state/server/state-process.test.ts.
 */

interface Captured {
  readonly code: ExitCode;
  readonly stdout: string;
  readonly stderr: string;
}

async function cli(args: readonly string[], env: Record<string, string> = {}): Promise<Captured> {
  const stdout = new PassThrough();
  const stderr = new PassThrough();
  let out = '';
  let err = '';
  stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
  stderr.on('data', (chunk: Buffer) => (err += chunk.toString()));
  const code = await runCli(args, { stdout, stderr }, env);
  return { code, stdout: out, stderr: err };
}

let dir: string;
const signer = createNodeEd25519Signer(new Uint8Array(32).fill(5));
const other = createNodeEd25519Signer(new Uint8Array(32).fill(6));
let storeExport: string;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'polychrome-cli-'));
  const store = new JournalStore({ location: join(dir, 'db'), signer });
  await store.open();
  let head = 0;
  for (let b = 0; b < 3; b++) {
    head = (
      await store.append('conv-cli', head, [
        { kind: EventKind.ToolCall, payload: new Uint8Array([b, 1, 2]) },
        { kind: EventKind.ToolResult, payload: new Uint8Array(0) },
      ])
    ).head;
  }
  let text = '';
  for await (const chunk of store.export('conv-cli')) text += Buffer.from(chunk).toString('utf8');
  await store.close();
  storeExport = join(dir, 'store-export.jsonl');
  await writeFile(storeExport, text);
});

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('usage errors exit 2', () => {
  it.each([
    [[], 'polychrome: no command given'],
    [['frobnicate'], 'unknown command "frobnicate"'],
    [['state', 'verify'], 'state verify needs a partition: conv-<id>'],
    [['state', 'verify', 'Conv_1'], '"Conv_1" is not a partition name'],
    [['state', 'verify', 'conv-a', 'conv-b'], 'takes one partition, got extra conv-b'],
    [
      ['state', 'verify', 'conv-a', '--format', 'yaml'],
      '--format must be json or text, got "yaml"',
    ],
    [['state', 'verify', 'conv-a', '--colour'], "Unknown option '--colour'"],
    [['state', 'verify', 'conv-a'], 'no ca file: pass --ca FILE or set POLYCHROME_STATE_CA'],
    [
      ['state', 'export', 'conv-a', '--ca', 'x'],
      'no cert file: pass --cert FILE or set POLYCHROME_STATE_CERT',
    ],
    [['journal', 'verify'], 'journal verify needs an export FILE'],
    [
      ['journal', 'verify', 'f', '--public-key', 'abc'],
      '--public-key "abc" is not a raw ed25519 public key',
    ],
  ])('%p', async (args, message) => {
    const run = await cli(args);
    expect(run.code).toBe(ExitCode.Usage);
    expect(run.stdout).toBe('');
    expect(run.stderr).toContain(message);
    expect(run.stderr).toContain(USAGE);
  });

  it('prints the usage on help and exits 0', async () => {
    expect(await cli(['help'])).toEqual({ code: ExitCode.Ok, stdout: USAGE, stderr: '' });
  });
});

describe('failures to run exit 3', () => {
  it('names an unreadable certificate file', async () => {
    const run = await cli(['state', 'verify', 'conv-a'], {
      POLYCHROME_STATE_CA: join(dir, 'missing-ca.crt'),
      POLYCHROME_STATE_CERT: join(dir, 'missing.crt'),
      POLYCHROME_STATE_KEY: join(dir, 'missing.key'),
    });
    expect(run.code).toBe(ExitCode.Error);
    expect(run.stderr).toContain(
      `cannot read the CA certificate file ${join(dir, 'missing-ca.crt')}`,
    );
  });

  it('names a bad environment variable', async () => {
    const run = await cli(['state', 'verify', 'conv-a'], { POLYCHROME_STATE_TIMEOUT_MS: 'soon' });
    expect(run.code).toBe(ExitCode.Error);
    expect(run.stderr).toContain('POLYCHROME_STATE_TIMEOUT_MS: must be a whole number');
  });

  it('names a missing export file', async () => {
    const run = await cli(['journal', 'verify', join(dir, 'nope.jsonl')]);
    expect(run).toMatchObject({ code: ExitCode.Error, stdout: '' });
    expect(run.stderr).toContain(`cannot read the export file ${join(dir, 'nope.jsonl')}`);
  });

  it('refuses a file that is not an export', async () => {
    const file = join(dir, 'not-export.jsonl');
    await writeFile(file, '{"hello":"world"}\n');
    const run = await cli(['journal', 'verify', file]);
    expect(run.code).toBe(ExitCode.Error);
    expect(run.stderr).toContain(
      `is not a journal export: the first line is not a ${EXPORT_FORMAT} header`,
    );
  });

  it('asks for a key when the export names none', async () => {
    const run = await cli(['journal', 'verify', storeExport]);
    expect(run.code).toBe(ExitCode.Error);
    expect(run.stderr).toContain('names no public key and none was given; pass the state plane');
  });
});

describe('journal verify (offline)', () => {
  it("accepts the store's own export with a pinned key", async () => {
    const run = await cli([
      'journal',
      'verify',
      storeExport,
      '--public-key',
      toHex(signer.publicKey),
      '--format',
      'json',
    ]);
    expect(run.code).toBe(ExitCode.Ok);
    expect(JSON.parse(run.stdout)).toMatchObject({
      partition: 'conv-cli',
      ok: true,
      events: 9,
      signedRoots: 3,
      trust: 'pinned',
      failure: null,
    });
  });

  it('takes --json as short for --format json', async () => {
    const args = ['journal', 'verify', storeExport, '--public-key', toHex(signer.publicKey)];
    const short = await cli([...args, '--json']);
    expect(short.code).toBe(ExitCode.Ok);
    expect(short.stdout).toBe((await cli([...args, '--format', 'json'])).stdout);
    expect(JSON.parse(short.stdout)).toMatchObject({ ok: true, events: 9 });
  });

  it('takes the key as base64 too, and fails under the wrong key at the first root', async () => {
    const ok = await cli([
      'journal',
      'verify',
      storeExport,
      '--public-key',
      Buffer.from(signer.publicKey).toString('base64'),
    ]);
    expect(ok.code).toBe(ExitCode.Ok);
    const wrong = await cli([
      'journal',
      'verify',
      storeExport,
      '--public-key',
      toHex(other.publicKey),
    ]);
    expect(wrong.code).toBe(ExitCode.VerifyFailed);
    expect(wrong.stdout).toContain('FAILED at position 2 (wrong_key)');
  });

  it('names the line and position of an unreadable event line', async () => {
    const lines = (await import('node:fs/promises')).readFile(storeExport, 'utf8');
    const all = (await lines).trimEnd().split('\n');
    all[4] = '{"position":3,"kind":"tool_call","payloadHex":"zz"}';
    const file = join(dir, 'broken.jsonl');
    await writeFile(file, all.join('\n') + '\n');
    const run = await cli([
      'journal',
      'verify',
      file,
      '--public-key',
      toHex(signer.publicKey),
      '--format',
      'json',
    ]);
    expect(run.code).toBe(ExitCode.VerifyFailed);
    expect(JSON.parse(run.stdout)).toMatchObject({
      ok: false,
      failure: { position: 3, reason: 'malformed' },
    });
  });
});

describe('export file format', () => {
  it("shares the store's format tag", () => {
    expect(EXPORT_FORMAT).toBe(STORE_EXPORT_FORMAT);
  });

  it.each([
    ['', new Uint8Array()],
    ['AQID', new Uint8Array([1, 2, 3])],
    ['AQI=', new Uint8Array([1, 2])],
  ])('decodes strict base64 %p', (text, bytes) => {
    expect(decodeBase64(text)).toEqual(bytes);
  });

  it.each(['AQI', 'AQJ=', 'A QI=', 'AQ==='])('refuses non-canonical base64 %p', (text) => {
    expect(decodeBase64(text)).toBeUndefined();
  });

  it.each([
    ['not json', 'not JSON'],
    ['[1]', 'not a JSON object'],
    ['{"position":-1,"kind":"x","payload":""}', 'no valid position'],
    ['{"position":0,"payload":""}', 'no kind'],
    ['{"position":0,"kind":"x"}', 'no valid payload'],
    ['{"position":0,"kind":"x","payloadHex":"ABC"}', 'no valid payload'],
  ])('says what is wrong with %p', (line, problem) => {
    expect(parseExportEvent(line)).toEqual(expect.stringContaining(problem));
  });

  it('reads a header with keys and refuses a key that is not base64', () => {
    const key = Buffer.from(signer.publicKey).toString('base64');
    expect(
      parseExportHeader(
        JSON.stringify({
          format: EXPORT_FORMAT,
          partition: 'conv-a',
          publicKeys: [{ keyId: 'k', publicKey: key }],
        }),
      ),
    ).toEqual({
      format: EXPORT_FORMAT,
      partition: 'conv-a',
      publicKeys: [{ keyId: 'k', publicKey: signer.publicKey }],
    });
    expect(
      parseExportHeader(
        JSON.stringify({
          format: EXPORT_FORMAT,
          partition: 'conv-a',
          publicKeys: [{ keyId: 'k', publicKey: '!' }],
        }),
      ),
    ).toBe('header publicKeys[0] needs a keyId and a base64 publicKey');
  });
});

describe('journal verify: truncation, transplant and excision', () => {
  /** The store export as lines, with its header's checkpoint (head 9, root at 8). */
  async function exportLines(): Promise<string[]> {
    return (await readFile(storeExport, 'utf8')).trimEnd().split('\n');
  }
  async function checkpointArg(): Promise<string> {
    const header = JSON.parse((await exportLines())[0]!) as {
      checkpoint: { head: number; rootHex: string };
    };
    return `${String(header.checkpoint.head)}:${header.checkpoint.rootHex}`;
  }
  const pinned = (): string[] => ['--public-key', toHex(signer.publicKey)];

  it('passes a journal cut after a batch without a checkpoint, saying none was checked, and fails it with one', async () => {
    const all = await exportLines();
    const file = join(dir, 'cut.jsonl');
    // Keep the header and the first two batches (positions 0..5): every root still verifies.
    await writeFile(file, all.slice(0, 7).join('\n') + '\n');
    const without = await cli(['journal', 'verify', file, ...pinned()]);
    expect(without.code).toBe(ExitCode.Ok);
    expect(without.stdout).toContain('no checkpoint was checked');

    const checkpoint = await checkpointArg();
    const withCheckpoint = await cli([
      'journal',
      'verify',
      file,
      ...pinned(),
      '--checkpoint',
      checkpoint,
      '--json',
    ]);
    expect(withCheckpoint.code).toBe(ExitCode.VerifyFailed);
    const result = JSON.parse(withCheckpoint.stdout) as {
      failure: { position: number; reason: string; message: string };
    };
    expect(result.failure).toMatchObject({ position: 6, reason: 'rolled_back' });
    expect(result.failure.message).toMatch(/truncated or rolled back.*had 9 entries.*it has 6/su);

    const whole = await cli([
      'journal',
      'verify',
      storeExport,
      ...pinned(),
      '--checkpoint',
      checkpoint,
    ]);
    expect(whole.code).toBe(ExitCode.Ok);
    expect(whole.stdout).toContain('checkpoint: checked');
  });

  it('fails an export of one partition verified as another, naming both', async () => {
    const all = await exportLines();
    const header = JSON.parse(all[0]!) as Record<string, unknown>;
    all[0] = JSON.stringify({ ...header, partition: 'conv-other' });
    const file = join(dir, 'transplant.jsonl');
    await writeFile(file, all.join('\n') + '\n');
    const run = await cli(['journal', 'verify', file, ...pinned()]);
    expect(run.code).toBe(ExitCode.VerifyFailed);
    expect(run.stdout).toContain('FAILED at position 2 (wrong_partition)');
    expect(run.stdout).toContain('"conv-cli"');
    expect(run.stdout).toContain('"conv-other"');
  });

  it.each([['9'], ['9:abc'], ['x:' + '0'.repeat(64)], ['0:' + '0'.repeat(64)]])(
    'refuses --checkpoint %s with the format (exit 2)',
    async (text) => {
      const run = await cli(['journal', 'verify', storeExport, '--checkpoint', text]);
      expect(run.code).toBe(ExitCode.Usage);
      expect(run.stderr).toContain('--checkpoint');
      expect(run.stderr).toMatch(/N:ROOTHEX|N, the head/u);
    },
  );

  it('verifies an export with an excised entry and lists it', async () => {
    const store = new JournalStore({ location: join(dir, 'db-excised'), signer });
    await store.open();
    await store.append('conv-x', 0, [
      { kind: EventKind.MessageReceived, payload: new Uint8Array(0) },
      { kind: EventKind.ToolResult, payload: Uint8Array.of(0xff) },
    ]);
    // Entry 1 (0xff is no ToolResult) is unreadable; repair excises it.
    const repaired = await store.repair('conv-x', { actor: 'admin', reason: 'test' });
    expect(repaired.excised.map((e) => e.position)).toEqual([1]);
    let text = '';
    for await (const chunk of store.export('conv-x')) text += Buffer.from(chunk).toString('utf8');
    await store.close();
    const file = join(dir, 'excised.jsonl');
    await writeFile(file, text);
    const run = await cli(['journal', 'verify', file, ...pinned(), '--json']);
    expect(run.code).toBe(ExitCode.Ok);
    expect(JSON.parse(run.stdout)).toMatchObject({ ok: true, excised: [1], checkpoint: null });
    const textRun = await cli(['journal', 'verify', file, ...pinned()]);
    expect(textRun.stdout).toContain('excised by repair (checked by their kept leaf digests): 1');
  });
});
