import { generateKeyPairSync } from 'node:crypto';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';

import { afterAll, afterEach, beforeAll, describe, expect, it, jest } from '@jest/globals';

import { EventKind } from '../../common/event-kinds';
import { StateCallError } from '../../common/state-call-errors';
import { StateClient } from '../../common/state-client';
import type { JournalEntry } from '../../common/state-journal';
import { loadSigningKey } from '../store/signing-key';
import { clientTls, makeTestPki, message, tempDir, type TestPki } from './testdata/fixtures';
import {
  runCliProcess,
  startStateProcess,
  type StateProcess,
  killAll,
} from '../../test/support/state-process';

/*
 * docs/state-plane.md, "Signing-key rotation", step by step on the real process
 * (state/main.ts under node, its real listener): a new key with the old one kept as
 * previous (STATE_PREVIOUS_SIGNING_KEY_FILES) hands a partition over in its next append;
 * Head names the key of each partition's last root; an export verifies offline with only
 * the first key pinned; once the old key is dropped, a partition it still holds refuses
 * appends, naming the key, and the handed-over one goes on.
 */

jest.setTimeout(120_000);

let dir: { path: string; remove: () => Promise<void> };
let pki: TestPki;
const running = new Set<StateProcess>();

beforeAll(async () => {
  dir = await tempDir('key-rotation');
  pki = await makeTestPki(dir.path);
}, 60_000);

afterEach(async () => {
  await killAll(running);
});

afterAll(async () => {
  await dir.remove();
});

/** A new ed25519 key as `openssl genpkey -algorithm ed25519` writes it (PKCS#8 PEM). */
async function newKey(name: string): Promise<{ file: string; keyId: string }> {
  const file = join(dir.path, `${name}.pem`);
  const { privateKey } = generateKeyPairSync('ed25519');
  await writeFile(file, privateKey.export({ format: 'pem', type: 'pkcs8' }), { mode: 0o600 });
  return { file, keyId: (await loadSigningKey(file)).keyId };
}

/** The state plane on `data` signing with `key`, `previous` loaded beside it. */
async function start(
  data: string,
  key: string,
  previous: readonly string[] = [],
): Promise<{ p: StateProcess; c: StateClient }> {
  const p = await startStateProcess(pki, data, {
    STATE_SIGNING_KEY_FILE: key,
    ...(previous.length === 0 ? {} : { STATE_PREVIOUS_SIGNING_KEY_FILES: previous.join(',') }),
  });
  running.add(p);
  const c = new StateClient({
    address: p.address,
    tls: await clientTls(pki.ca, pki.controlPlane),
    callTimeoutMs: 10_000,
  });
  return { p, c };
}

async function stop(run: { p: StateProcess; c: StateClient }): Promise<void> {
  run.c.close();
  run.p.child.kill('SIGTERM');
  expect(await run.p.exited).toBe(0);
  running.delete(run.p);
}

async function readAll(c: StateClient, partition: string): Promise<JournalEntry[]> {
  const out: JournalEntry[] = [];
  for await (const event of c.read(partition)) out.push(event);
  return out;
}

const keyOf = async (c: StateClient, partition: string): Promise<string | undefined> =>
  (await c.head(partition)).signedRoot?.keyId;

describe('signing-key rotation, as docs/state-plane.md says', () => {
  it('hands each partition over in its next append, verifies under the first key, and refuses appends to a partition whose key is gone', async () => {
    const data = join(dir.path, 'data');
    const old = await newKey('old');
    const next = await newKey('new');
    const [busy, idle] = ['conv-busy', 'conv-idle'];

    // Before: the old key signs both partitions.
    const before = await start(data, old.file);
    for (const partition of [busy, idle]) {
      await before.c.append(partition, 0, [message(`${partition} first`)]);
      expect(await keyOf(before.c, partition)).toBe(old.keyId);
    }
    await stop(before);

    // Steps 1-2: the new key signs, the old one stays as previous-1; roll.
    const rolled = await start(data, next.file, [old.file]);
    expect(await keyOf(rolled.c, busy)).toBe(old.keyId);
    // Step 3: the next append hands the partition over: key_rotated by the old key, then a
    // root by the new one, in one batch. The idle partition still shows the old key.
    const { head } = await rolled.c.append(busy, 2, [message('after the rotation')]);
    const events = await readAll(rolled.c, busy);
    expect(events.map((e) => e.kind)).toEqual([
      EventKind.MessageReceived,
      EventKind.SignedRoot,
      EventKind.MessageReceived,
      EventKind.KeyRotated,
      EventKind.SignedRoot,
    ]);
    expect(head).toBe(events.length);
    expect(await keyOf(rolled.c, busy)).toBe(next.keyId);
    expect(await keyOf(rolled.c, idle)).toBe(old.keyId);

    // Step 5: an export verifies offline with only the first key pinned; the journal's own
    // key_rotated introduces the new one. Pinned to the new key alone, it does not.
    const file = join(dir.path, 'busy.jsonl');
    expect(
      (await runCliProcess(['state', 'export', busy, '-o', file], pki, rolled.p.address)).code,
    ).toBe(0);
    const pinned = (key: string) =>
      runCliProcess(
        ['journal', 'verify', file, '--public-key', key, '--format', 'json'],
        pki,
        'unused:1',
      );
    const publicKeyOf = async (pem: string): Promise<string> =>
      Buffer.from((await loadSigningKey(pem)).signer.publicKey).toString('hex');
    const underOld = await pinned(await publicKeyOf(old.file));
    expect(underOld.code).toBe(0);
    expect(JSON.parse(underOld.stdout)).toMatchObject({ ok: true, events: events.length });
    const underNew = await pinned(await publicKeyOf(next.file));
    expect(underNew.code).toBe(1);
    expect(underNew.stdout).toContain('wrong_key');
    await stop(rolled);

    // Step 4 done too early: the old key dropped while the idle partition still needs it.
    const dropped = await start(data, next.file);
    const refused = await dropped.c
      .append(idle, 2, [message('too early')])
      .catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(StateCallError);
    expect(refused).toMatchObject({ code: 'failed_precondition' });
    expect(String((refused as Error).message)).toContain(old.keyId);
    expect((await readAll(dropped.c, idle)).length).toBe(2);
    // The handed-over partition goes on under the new key alone.
    await dropped.c.append(busy, head, [message('new key only')]);
    expect(await keyOf(dropped.c, busy)).toBe(next.keyId);
    await stop(dropped);

    // The export's header lists the keys the state plane held when it was written.
    const header = JSON.parse((await readFile(file, 'utf8')).split('\n')[0] ?? '') as {
      publicKeys: { keyId: string }[];
    };
    expect(header.publicKeys.map((k) => k.keyId).sort()).toEqual([old.keyId, next.keyId].sort());
  });
});
