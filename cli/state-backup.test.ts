import { execFile } from 'node:child_process';
import { readdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';

import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';

import { ensureHarnessCa, ensureHarnessCertificate } from '../hack/lib/harness-pki';
import type { CertFiles } from '../hack/lib/pki';
import { RecordsClient } from '../common/records-client';
import { BACKUP_MAGIC } from '../common/state-backup-format';
import { StateClient } from '../common/state-client';
import type { JournalStore } from '../state/store/journal-store';
import {
  clientTls,
  makeTestPki,
  startTestStateServer,
  tempDir,
  turn,
  type TestPki,
  type TestStateServer,
} from '../state/server/testdata/fixtures';
import { ROOT } from '../test/support/state-process';
import { restoreCommand } from '../state/backup/restore-command';
import { ExitCode } from './cli-support';
import { runCaptured } from './testdata/captured-run';

const cli = (args: readonly string[]) => runCaptured(args, {});

/*
 * `polychrome state backup` against the real state server (mutual TLS, the real Backup
 * RPC over the real journal store and records database) while appends go on, and
 * the state plane's restore command into empty directories that a second real state server then
 * opens: every partition verifies there (`state verify --all`), the records come back, and
 * a damaged, foreign or cut-short file, a non-empty directory and every certificate
 * without the backup role are refused with nothing written.
 */

/**
 * The state plane's `main.js restore ARGS` in process (state/backup/restore-command.ts),
 * with STATE_DATA_DIR `dataDir` and, when given, STATE_RECORDS_DIR.
 */
async function restore(
  args: readonly string[],
  dataDir: string,
  recordsDir?: string,
): Promise<{ code: number; output: string }> {
  const lines: string[] = [];
  const env = {
    STATE_DATA_DIR: dataDir,
    ...(recordsDir === undefined ? {} : { STATE_RECORDS_DIR: recordsDir }),
  };
  const code = await restoreCommand(args, env, (line) => lines.push(line));
  return { code, output: lines.join('\n') };
}

const SEED = 9;
let dir: { path: string; remove: () => Promise<void> };
let pki: TestPki;
let state: TestStateServer;
let journal: JournalStore;
let restored: TestStateServer | undefined;
let backupFile: string;
let credentialId: string;
const clients: { close(): void }[] = [];

const as = (identity: CertFiles, address = state.address): string[] => [
  '--address',
  address,
  '--ca',
  pki.ca.certPath,
  '--cert',
  identity.certPath,
  '--key',
  identity.keyPath,
];

async function appendTurns(partition: string, turns: number): Promise<number> {
  let head = journal.head(partition).head;
  for (let i = 0; i < turns; i++) {
    head = (await journal.append(partition, head, turn(`${partition}-${String(i)}`))).head;
  }
  return head;
}

beforeAll(async () => {
  dir = await tempDir('state-backup');
  pki = await makeTestPki(dir.path);
  state = await startTestStateServer(join(dir.path, 'live'), pki, { signerSeed: SEED });
  journal = state.journal;
  const admin = new RecordsClient({
    address: state.address,
    tls: await clientTls(pki.ca, pki.recordsAdmin),
    callTimeoutMs: 5_000,
  });
  clients.push(admin);
  const persona = await admin.createPersona({ displayName: 'Ada', roles: ['member'] });
  const credential = await admin.createCredential({
    personaId: persona.id,
    kind: 'api-key',
    label: 'k',
    secret: 'hunter2-in-the-clear',
  });
  credentialId = credential.id;
  for (const p of ['conv-alpha', 'conv-beta', 'conv-gamma']) await appendTurns(p, 4);
  backupFile = join(dir.path, 'state.pcbackup');
}, 120_000);

afterAll(async () => {
  for (const client of clients) client.close();
  await restored?.close();
  await state?.close();
  await dir?.remove();
});

describe('state backup', () => {
  it('writes one whole file while appends go on, and restore brings back journals that all verify', async () => {
    const quiet = new Map(
      ['conv-alpha', 'conv-beta', 'conv-gamma'].map((p) => [p, journal.head(p).head]),
    );
    const busyBefore = await appendTurns('conv-busy', 2);
    let stop = false;
    const appending = (async (): Promise<number> => {
      let head = busyBefore;
      while (!stop) head = await appendTurns('conv-busy', 1);
      return head;
    })();
    const taken = await cli(['state', 'backup', '-o', backupFile, ...as(pki.backup)]);
    stop = true;
    const busyAfter = await appending;
    // Appends went on while the backup streamed: it is online.
    expect(busyAfter).toBeGreaterThan(busyBefore);
    expect(taken.stderr).toContain(`state backup written to ${backupFile}`);
    expect(taken.code).toBe(ExitCode.Ok);
    expect(await readdir(dir.path)).not.toContainEqual(expect.stringContaining('.partial'));
    const bytes = await readFile(backupFile);
    expect(bytes.subarray(0, BACKUP_MAGIC.length).equals(BACKUP_MAGIC)).toBe(true);
    // Credentials stay sealed with the records key, which the backup does not hold.
    expect(bytes.includes(Buffer.from('hunter2-in-the-clear'))).toBe(false);

    const target = join(dir.path, 'restored');
    const done = await restore([backupFile], join(target, 'journal'), join(target, 'records'));
    expect(done.output).toContain('restored ');
    expect(done.code).toBe(0);

    restored = await startTestStateServer(target, pki, { signerSeed: SEED });
    const verified = await cli(['state', 'verify', '--all', ...as(pki.verifier, restored.address)]);
    expect(verified.stdout).toContain('4 partitions, 0 failed verification');
    expect(verified.code).toBe(ExitCode.Ok);
    for (const [partition, head] of quiet) expect(restored.journal.head(partition).head).toBe(head);
    // The busy partition is a whole batch between the heads before and after the backup.
    const busy = restored.journal.head('conv-busy').head;
    expect(busy).toBeGreaterThanOrEqual(busyBefore);
    expect(busy).toBeLessThanOrEqual(busyAfter);
    // The restored journal takes appends at its head; the records reveal with the same key.
    const writer = new StateClient({
      address: restored.address,
      tls: await clientTls(pki.ca, pki.controlPlane),
      callTimeoutMs: 5_000,
    });
    const admin = new RecordsClient({
      address: restored.address,
      tls: await clientTls(pki.ca, pki.recordsAdmin),
      callTimeoutMs: 5_000,
    });
    clients.push(writer, admin);
    expect((await writer.append('conv-busy', busy, turn('after'))).head).toBe(busy + 4);
    const secret = (await admin.revealCredential(credentialId)).secret;
    expect(Buffer.from(secret).toString()).toBe('hunter2-in-the-clear');
  }, 120_000);

  it('never overwrites a file and needs -o', async () => {
    const again = await cli(['state', 'backup', '-o', backupFile, ...as(pki.backup)]);
    expect(again.code).toBe(ExitCode.Usage);
    expect(again.stderr).toContain('exists; name a new file');
    expect((await cli(['state', 'backup', ...as(pki.backup)])).code).toBe(ExitCode.Usage);
  });
});

describe('state restore refuses', () => {
  const restoreInto = (file: string, name: string, ...more: string[]) =>
    restore([file, ...more], join(dir.path, name, 'journal'));

  it.each([
    ['cut short', (b: Buffer) => b.subarray(0, b.length - 40), 'it ends in the middle of'],
    [
      'a changed byte',
      (b: Buffer) => {
        const c = Buffer.from(b);
        c[200] = (c[200] ?? 0) ^ 0xff;
        return c;
      },
      'changed after it was written',
    ],
    [
      'bytes after the end',
      (b: Buffer) => Buffer.concat([b, Buffer.from('x')]),
      'bytes after its trailer',
    ],
    [
      'a foreign file',
      () => Buffer.from('{"format":"polychrome-journal-export/v1"}\n'),
      'not a Polychrome state backup',
    ],
    [
      'another format version',
      (b: Buffer) => {
        const c = Buffer.from(b);
        c.writeUInt32BE(2, BACKUP_MAGIC.length);
        return c;
      },
      'format version 2',
    ],
  ])('%s, writing nothing', async (name, damage, says) => {
    const file = join(dir.path, `damaged-${name.replaceAll(' ', '-')}`);
    await writeFile(file, damage(await readFile(backupFile)));
    const out = await restoreInto(file, `into-${name.replaceAll(' ', '-')}`);
    expect(out.output).toContain(says);
    expect(out.output).toContain('nothing was restored');
    expect(out.code).toBe(1);
    expect(await readdir(dir.path)).not.toContainEqual(`into-${name.replaceAll(' ', '-')}`);
  });

  it('a directory that holds files, unless --overwrite', async () => {
    const target = join(dir.path, 'restored', 'journal');
    const before = await readdir(target);
    const refused = await restore([backupFile], target);
    expect(refused.output).toContain(`${target} is not empty`);
    expect(refused.output).toContain('--overwrite');
    expect(refused.code).toBe(1);
    expect(await readdir(target)).toEqual(before);
    const fresh = join(dir.path, 'overwritten');
    expect((await restoreInto(backupFile, 'overwritten')).code).toBe(0);
    const replaced = await restore([backupFile, '--overwrite'], join(fresh, 'journal'));
    expect(replaced.code).toBe(0);
  });
});

describe('a backup without the backup role', () => {
  it('is refused for every shipped identity but the backup one, and leaves no file', async () => {
    const refused = [pki.controlPlane, pki.verifier, pki.recordsAdmin, pki.stranger];
    for (const identity of refused) {
      const file = join(dir.path, `attack-${identity.certPath.split('/').at(-1) ?? ''}`);
      const out = await cli(['state', 'backup', '-o', file, ...as(identity)]);
      expect(out.stderr).toContain('may not call Take: it needs role polychrome:backup');
      expect(out.code).toBe(ExitCode.Error);
      expect(await readdir(dir.path)).not.toContainEqual(expect.stringContaining('attack-'));
    }
  });

  it('is refused at the handshake for a harness certificate and a foreign CA', async () => {
    const harnessCa = await ensureHarnessCa(join(dir.path, 'harness'));
    const harness = await ensureHarnessCertificate(harnessCa, 'tenant-a');
    for (const identity of [harness, pki.foreign]) {
      const file = join(dir.path, 'attack-handshake');
      const out = await cli(['state', 'backup', '-o', file, ...as(identity)]);
      expect(out.code).toBe(ExitCode.Error);
      expect(out.stderr).toContain('Take failed: No connection established');
      expect(out.stderr).toContain('signed by the Polychrome CA');
      expect(await readdir(dir.path)).not.toContainEqual(expect.stringContaining('attack-'));
    }
  });
});

describe("the state plane's restore command as its own process (main.js restore FILE)", () => {
  /** state/main.ts as the image runs it, with only the directories in its environment. */
  const imageRestore = (
    args: readonly string[],
    dataDir: string,
  ): Promise<{ code: number; stderr: string }> =>
    new Promise((resolve) => {
      execFile(
        process.execPath,
        ['--import', 'tsx', join(ROOT, 'state', 'main.ts'), 'restore', ...args],
        { cwd: ROOT, env: { PATH: process.env.PATH ?? '', STATE_DATA_DIR: dataDir } },
        (error, _stdout, stderr) => resolve({ code: Number(error?.code ?? 0), stderr }),
      );
    });

  it('restores into STATE_DATA_DIR and its -records sibling, and refuses them once they hold files', async () => {
    const dataDir = join(dir.path, 'image', 'journal');
    const done = await imageRestore([backupFile], dataDir);
    expect(done.stderr).toContain(`records entries into ${dataDir}-records`);
    expect(done.code).toBe(0);
    expect((await readdir(dataDir)).length).toBeGreaterThan(0);
    expect((await readdir(`${dataDir}-records`)).length).toBeGreaterThan(0);
    const again = await imageRestore([backupFile], dataDir);
    expect(again.stderr).toContain(`${dataDir} is not empty`);
    expect(again.code).toBe(1);
    expect((await imageRestore([], dataDir)).code).toBe(2);
  }, 60_000);
});
