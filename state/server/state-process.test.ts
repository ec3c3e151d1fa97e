import { cp, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';

import { afterAll, afterEach, beforeAll, describe, expect, it, jest } from '@jest/globals';
import { credentials, Metadata, status } from '@grpc/grpc-js';
import { ClassicLevel } from 'classic-level';

import { decodePayload, encodePayload, EventKind } from '../../common/event-kinds';
import { RecordsClient } from '../../common/records-client';
import { StateCallError } from '../../common/state-call-errors';
import { StateClient } from '../../common/state-client';
import type { AppendOutcome, JournalEntry, NewJournalEvent } from '../../common/state-journal';
import { JournalClient } from '../../proto/gen/polychrome/state/v1/state';
import { toHex } from '../journal/hex';
import { createNodeEd25519Signer } from '../journal/node-ed25519';
import { nodeSha256 } from '../journal/node-sha256';
import { signedRootPayload, signRoot } from '../journal/signed-root';
import { loadSigningKey } from '../store/signing-key';
import { decodeEventValue, encodeEventValue, eventKey } from '../store/store-keys';
import {
  clientTls,
  eventually,
  makeTestPki,
  message,
  tempDir,
  turn,
  type TestPki,
} from './testdata/fixtures';
import {
  runCliProcess,
  startStateProcess,
  type StateProcess,
} from '../../test/support/state-process';

/** The identity recorded as minter or role setter in these tests. */
const MINTER = 'test:minter';

/*
 * Faults on the real process (state/main.ts under node, no Kubernetes): SIGKILL under
 * load from several clients, graceful SIGTERM, tampering with the LevelDB files while it
 * is stopped (found by the real CLI, at the right position), the security of the real
 * listener, and export / offline verify through the CLI.
 */

jest.setTimeout(180_000);

let dir: { path: string; remove: () => Promise<void> };
let pki: TestPki;
const running = new Set<StateProcess>();
/** Processes a whole describe block shares; stopped by its afterAll. */
const shared = new Set<StateProcess>();

beforeAll(async () => {
  dir = await tempDir('state-process');
  pki = await makeTestPki(dir.path);
}, 60_000);

afterEach(async () => {
  // A test that fails half-way must not leave a process holding the database lock.
  for (const p of running) {
    if (shared.has(p)) continue;
    p.child.kill('SIGKILL');
    await p.exited;
    running.delete(p);
  }
});

afterAll(async () => {
  await dir.remove();
});

async function start(dataDir: string): Promise<StateProcess> {
  const p = await startStateProcess(pki, dataDir);
  running.add(p);
  return p;
}

async function stop(
  p: StateProcess,
  signal: NodeJS.Signals,
): Promise<number | NodeJS.Signals | null> {
  p.child.kill(signal);
  const how = await p.exited;
  running.delete(p);
  return how;
}

async function client(
  p: StateProcess,
  identity: 'controlPlane' | 'verifier' | 'selfSigned' | 'foreign',
): Promise<StateClient> {
  return new StateClient({
    address: p.address,
    tls: await clientTls(pki.ca, pki[identity]),
    callTimeoutMs: 10_000,
  });
}

async function readAll(c: StateClient, partition: string): Promise<JournalEntry[]> {
  const out: JournalEntry[] = [];
  for await (const event of c.read(partition)) out.push(event);
  return out;
}

/**
 * A fresh store at `dataDir` holding 60 batches of 2 entries in `partition` (roots at 2, 5,
 * ..., 179; head 180), each a message unless `entryAt` gives another for its position; the
 * process is stopped and the entries returned. A check that replays all of them is long
 * enough for a kill to land before, during or after its one write.
 */
async function seedSixtyBatches(
  dataDir: string,
  partition: string,
  entryAt: (position: number) => NewJournalEvent | undefined = () => undefined,
): Promise<JournalEntry[]> {
  const p = await start(dataDir);
  const w = await client(p, 'controlPlane');
  let head = 0;
  for (let b = 0; b < 60; b++) {
    const first = entryAt(head) ?? message(`m${String(b)}`);
    const second = entryAt(head + 1) ?? message(`n${String(b)}`);
    head = (await w.append(partition, head, [first, second])).head;
  }
  const events = await readAll(w, partition);
  w.close();
  expect(head).toBe(180);
  expect(await stop(p, 'SIGTERM')).toBe(0);
  return events;
}

/**
 * Starts a copy of the store at `pristine` (at `copy`), sends `act` with the control plane's
 * client, SIGKILLs the process `delayMs` later and starts the copy again. `done` stops it
 * and removes the copy.
 */
async function killDuring(
  pristine: string,
  copy: string,
  delayMs: number,
  act: (c: StateClient) => Promise<unknown>,
): Promise<{ restarted: StateProcess; done: () => Promise<void> }> {
  await rm(copy, { recursive: true, force: true });
  await cp(pristine, copy, { recursive: true });
  const first = await start(copy);
  const c = await client(first, 'controlPlane');
  const call = act(c).catch((error: unknown) => error);
  await new Promise((resolve) => setTimeout(resolve, delayMs));
  expect(await stop(first, 'SIGKILL')).toBe('SIGKILL');
  await call;
  c.close();
  const restarted = await start(copy);
  return {
    restarted,
    done: async () => {
      expect(await stop(restarted, 'SIGTERM')).toBe(0);
      await rm(copy, { recursive: true, force: true });
    },
  };
}

function textOf(event: JournalEntry | undefined): string | undefined {
  if (event?.kind !== EventKind.MessageReceived) return undefined;
  return decodePayload(EventKind.MessageReceived, event.payload).text;
}

interface Ack {
  readonly partition: string;
  readonly label: string;
  readonly outcome: AppendOutcome;
}

/**
 * Four writers, each appending turns round-robin to its own three partitions until the
 * process goes away; returns every acknowledged append.
 */
async function appendUntilGone(
  p: StateProcess,
  round: number,
  acks: Ack[],
  heads: Map<string, number>,
): Promise<void> {
  const writers = await Promise.all([0, 1, 2, 3].map(() => client(p, 'controlPlane')));
  await Promise.all(
    writers.map(async (w, wi) => {
      for (let i = 0; ; i++) {
        const partition = `conv-w${String(wi)}-p${String(i % 3)}`;
        const label = `${partition} r${String(round)} #${String(i)}`;
        try {
          const outcome = await w.append(
            partition,
            heads.get(partition) ?? 0,
            turn(label, 200 + i),
          );
          heads.set(partition, outcome.head);
          acks.push({ partition, label, outcome });
        } catch (error) {
          if (error instanceof StateCallError && !error.fromServer) return;
          throw error;
        }
      }
    }),
  );
  for (const w of writers) w.close();
}

describe('SIGKILL under load', () => {
  it('keeps every acknowledged append, shows no partial batch, and verifies, across two kills', async () => {
    const data = join(dir.path, 'crash-db');
    const acks: Ack[] = [];
    const heads = new Map<string, number>();
    for (let round = 0; round < 2; round++) {
      const p = await start(data);
      const load = appendUntilGone(p, round, acks, heads);
      const before = acks.length;
      await eventually('appends to be acknowledged', () =>
        acks.length >= before + 120 ? true : undefined,
      );
      expect(await stop(p, 'SIGKILL')).toBe('SIGKILL');
      await load;
      // The process may have made an append durable whose answer never left it: the head
      // can be ahead of the last ack, never behind. Resume from the real heads.
      const after = await start(data);
      const reader = await client(after, 'verifier');
      for (const partition of heads.keys())
        heads.set(partition, (await reader.head(partition)).head);
      reader.close();
      await stop(after, 'SIGTERM');
    }
    const p = await start(data);
    const reader = await client(p, 'verifier');
    try {
      const partitions = [...new Set(acks.map((a) => a.partition))].sort();
      expect(partitions).toHaveLength(12);
      expect(await reader.listPartitions()).toEqual(partitions);
      for (const partition of partitions) {
        const events = await readAll(reader, partition);
        const mine = acks.filter((a) => a.partition === partition);
        for (const ack of mine) {
          const { firstPosition, head, signedRoot } = ack.outcome;
          expect(textOf(events[firstPosition])).toBe(ack.label);
          expect(events[head - 1]?.kind).toBe(EventKind.SignedRoot);
          expect(signedRoot.position).toBe(head - 1);
        }
        // No partial batch: the journal ends with a signed_root and verify sees nothing unsealed.
        expect(events.at(-1)?.kind).toBe(EventKind.SignedRoot);
        const verification = await reader.verify(partition);
        expect(verification).toMatchObject({ ok: true, unsealed: 0, events: events.length });
      }
    } finally {
      reader.close();
    }
  });
});

describe('records across a SIGKILL', () => {
  it('finds a persona created before the kill after the restart, and its session still works', async () => {
    const data = join(dir.path, 'records-db');
    const p = await start(data);
    const before = new RecordsClient({
      address: p.address,
      tls: await clientTls(pki.ca, pki.controlPlane),
      callTimeoutMs: 10_000,
    });
    const ada = await before.createPersona({
      displayName: 'Ada',
      identities: ['email:ada@example.com'],
    });
    const { token } = await before.createSession(ada.id, { mintedBy: MINTER });
    before.close();
    expect(await stop(p, 'SIGKILL')).toBe('SIGKILL');
    const again = await start(data);
    const after = new RecordsClient({
      address: again.address,
      tls: await clientTls(pki.ca, pki.controlPlane),
      callTimeoutMs: 10_000,
    });
    try {
      expect(await after.findPersonaByIdentity('email:ada@example.com')).toEqual(ada);
      expect((await after.authenticate(token)).persona.id).toBe(ada.id);
    } finally {
      after.close();
    }
    // The records live beside the journal, in their own database.
    expect(again.logs.join('\n')).toContain(`${data}-records`);
  });
});

describe('SIGTERM', () => {
  it('finishes appends in flight, closes the store and exits 0; /readyz and /metrics answer while up', async () => {
    const data = join(dir.path, 'term-db');
    const p = await start(data);
    const ready = await fetch(`http://127.0.0.1:${String(p.healthPort)}/readyz`);
    expect(ready.status).toBe(200);
    const w = await client(p, 'controlPlane');
    const first = await w.append('conv-term', 0, turn('first'));
    const metrics = await (await fetch(`http://127.0.0.1:${String(p.healthPort)}/metrics`)).text();
    expect(metrics).toMatch(/polychrome_state_appends_total 1/);
    expect(metrics).toMatch(/polychrome_state_calls_total\{method="Append",status="OK"\} 1/);
    const inFlight = ['a', 'b', 'c', 'd'].map((x, i) =>
      w.append(`conv-term-${x}`, 0, turn(`in flight ${String(i)}`)),
    );
    p.child.kill('SIGTERM');
    const settled = await Promise.allSettled(inFlight);
    expect(await p.exited).toBe(0);
    running.delete(p);
    w.close();
    const again = await start(data);
    const reader = await client(again, 'verifier');
    try {
      expect((await reader.head('conv-term')).head).toBe(first.head);
      for (const [i, outcome] of settled.entries()) {
        const partition = `conv-term-${['a', 'b', 'c', 'd'][i] ?? ''}`;
        // Acknowledged means durable; refused means not written at all.
        expect((await reader.head(partition)).head).toBe(outcome.status === 'fulfilled' ? 4 : 0);
      }
    } finally {
      reader.close();
    }
  });
});

describe('the real listener', () => {
  let p: StateProcess;
  beforeAll(async () => {
    p = await start(join(dir.path, 'security-db'));
    shared.add(p);
  });
  afterAll(async () => {
    shared.delete(p);
    if (running.has(p)) await stop(p, 'SIGTERM');
  });

  it('refuses a client without a certificate at the handshake', async () => {
    const raw = new JournalClient(
      p.address,
      credentials.createSsl(await readFile(pki.ca.certPath)),
    );
    try {
      const code = await new Promise<number | undefined>((resolve) => {
        raw.head({ partition: 'conv-x' }, new Metadata(), { deadline: Date.now() + 5_000 }, (e) =>
          resolve(e?.code),
        );
      });
      expect(code).toBe(status.UNAVAILABLE);
    } finally {
      raw.close();
    }
  });

  it.each(['selfSigned', 'foreign'] as const)(
    'refuses a %s client certificate at the handshake',
    async (identity) => {
      const c = await client(p, identity);
      try {
        await expect(c.head('conv-x')).rejects.toMatchObject({
          code: 'unavailable',
          fromServer: false,
        });
      } finally {
        c.close();
      }
    },
  );

  it('refuses Append from a verifier with PERMISSION_DENIED and writes nothing', async () => {
    const w = await client(p, 'controlPlane');
    const v = await client(p, 'verifier');
    try {
      const { head } = await w.append('conv-sec', 0, turn('a'));
      await expect(v.append('conv-sec', head, turn('b'))).rejects.toMatchObject({
        code: 'permission_denied',
        grpcStatus: 7,
      });
      expect((await v.head('conv-sec')).head).toBe(head);
    } finally {
      w.close();
      v.close();
    }
  });

  it.each([
    ['a bad partition name', 'invalid_argument', 'conv-', 0],
    ['an empty batch', 'invalid_argument', 'conv-sec', 4],
    ['a head from the future', 'failed_precondition', 'conv-sec', 40],
  ] as const)(
    'answers %s with %s and leaves the head alone',
    async (_label, code, partition, expectedHead) => {
      const w = await client(p, 'controlPlane');
      try {
        const events = code === 'invalid_argument' && partition === 'conv-sec' ? [] : turn('z');
        await expect(w.append(partition, expectedHead, events)).rejects.toMatchObject({
          code,
          fromServer: true,
        });
        expect((await w.head('conv-sec')).head).toBe(4);
      } finally {
        w.close();
      }
    },
  );
});

describe('tampering on disk, found by `polychrome state verify`', () => {
  const P = 'conv-tamper';
  let pristine: string;
  const stranger = createNodeEd25519Signer(new Uint8Array(32).fill(9));
  const utf8 = new TextEncoder();

  // 6 batches of 3 events: roots at 3, 7, 11, 15, 19, 23; head 24.
  beforeAll(async () => {
    pristine = join(dir.path, 'tamper-pristine');
    const p = await start(pristine);
    const w = await client(p, 'controlPlane');
    let head = 0;
    for (let b = 0; b < 6; b++)
      head = (await w.append(P, head, turn(`batch ${String(b)}`, 300))).head;
    w.close();
    expect(head).toBe(24);
    expect(await stop(p, 'SIGTERM')).toBe(0);
  });

  type Db = ClassicLevel<Uint8Array, Uint8Array>;
  async function tamper(edit: (db: Db) => Promise<void>): Promise<string> {
    const copy = join(dir.path, `tamper-${String(Date.now())}`);
    await rm(copy, { recursive: true, force: true });
    await cp(pristine, copy, { recursive: true });
    const db: Db = new ClassicLevel(copy, { keyEncoding: 'view', valueEncoding: 'view' });
    await db.open();
    try {
      await edit(db);
    } finally {
      await db.close();
    }
    return copy;
  }

  async function stored(db: Db, position: number): Promise<Uint8Array> {
    const value = await db.get(eventKey(P, position));
    if (value === undefined) throw new Error(`no event ${String(position)}`);
    return value;
  }

  async function resign(
    db: Db,
    position: number,
    signer = stranger,
    flipRoot = false,
  ): Promise<void> {
    const { payload } = decodeEventValue(await stored(db, position), P, position);
    const fields = decodePayload(EventKind.SignedRoot, payload);
    const root = Buffer.from(fields.root);
    if (flipRoot) root[0] = (root[0] ?? 0) ^ 0xff;
    const signed = signRoot(nodeSha256, signer, fields.leafCount, root, P);
    await db.put(
      eventKey(P, position),
      encodeEventValue(
        utf8.encode(EventKind.SignedRoot),
        encodePayload(EventKind.SignedRoot, signedRootPayload(signed)),
      ),
    );
  }

  it.each<[string, number, string, (db: Db) => Promise<void>]>([
    [
      'one payload byte flipped',
      11,
      'event_changed',
      async (db) => {
        const value = (await stored(db, 9)).slice();
        value[value.length - 1] = (value[value.length - 1] ?? 0) ^ 0x01;
        await db.put(eventKey(P, 9), value);
      },
    ],
    ['an event deleted', 5, 'gap', (db) => db.del(eventKey(P, 5))],
    [
      'two events swapped',
      7,
      'event_changed',
      async (db) => {
        const [a, b] = [await stored(db, 4), await stored(db, 13)];
        await db.batch([
          { type: 'put', key: eventKey(P, 4), value: b },
          { type: 'put', key: eventKey(P, 13), value: a },
        ]);
      },
    ],
    [
      'a root replaced (its bytes changed, signature kept)',
      11,
      'bad_signature',
      async (db) => {
        const { payload } = decodeEventValue(await stored(db, 11), P, 11);
        const fields = decodePayload(EventKind.SignedRoot, payload);
        const root = Buffer.from(fields.root);
        root[0] = (root[0] ?? 0) ^ 0xff;
        await db.put(
          eventKey(P, 11),
          encodeEventValue(
            utf8.encode(EventKind.SignedRoot),
            encodePayload(EventKind.SignedRoot, { ...fields, root }),
          ),
        );
      },
    ],
    ['a root re-signed with another key', 15, 'wrong_key', (db) => resign(db, 15, stranger, true)],
  ])('%s: exits 1 and names position %d (%s)', async (_label, position, reason, edit) => {
    const data = await tamper(edit);
    const p = await start(data);
    const json = await runCliProcess(['state', 'verify', P, '--format', 'json'], pki, p.address);
    expect(json.stderr).toBe('');
    expect(json.code).toBe(1);
    const parsed: unknown = JSON.parse(json.stdout);
    expect(parsed).toMatchObject({ partition: P, ok: false, failure: { position, reason } });
    const text = await runCliProcess(['state', 'verify', P], pki, p.address);
    expect(text.code).toBe(1);
    expect(text.stdout).toContain(`${P}: FAILED at position ${String(position)} (${reason})`);
    await stop(p, 'SIGTERM');
  });

  it('exits 0 on the untouched journal', async () => {
    const p = await start(await tamper(() => Promise.resolve()));
    const run = await runCliProcess(['state', 'verify', P, '--format', 'json'], pki, p.address);
    expect(run.code).toBe(0);
    expect(JSON.parse(run.stdout)).toEqual({
      partition: P,
      ok: true,
      events: 24,
      signedRoots: 6,
      unsealed: 0,
      failure: null,
      excised: [],
      erased: [],
      checkpointChecked: false,
    });
    await stop(p, 'SIGTERM');
  });

  it('checks --checkpoint through the state plane: a journal shorter than it fails rolled_back', async () => {
    const p = await start(await tamper(() => Promise.resolve()));
    const file = join(dir.path, 'conv-checkpoint.jsonl');
    expect((await runCliProcess(['state', 'export', P, '-o', file], pki, p.address)).code).toBe(0);
    const header = JSON.parse((await readFile(file, 'utf8')).split('\n')[0] ?? '') as {
      checkpoint: { head: number; rootHex: string };
    };
    const { head, rootHex } = header.checkpoint;
    const ok = await runCliProcess(
      ['state', 'verify', P, '--checkpoint', `${String(head)}:${rootHex}`],
      pki,
      p.address,
    );
    expect(ok.code).toBe(0);
    expect(ok.stdout).toContain('checkpoint: checked');
    // As if the Conversation's status had seen 3 more entries than the store now holds.
    const ahead = await runCliProcess(
      ['state', 'verify', P, '--checkpoint', `${String(head + 3)}:${rootHex}`, '--json'],
      pki,
      p.address,
    );
    expect(ahead.code).toBe(1);
    expect(JSON.parse(ahead.stdout)).toMatchObject({
      ok: false,
      checkpointChecked: true,
      failure: { position: head, reason: 'rolled_back' },
    });
    const bad = await runCliProcess(['state', 'verify', P, '--checkpoint', 'nope'], pki, p.address);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('N:ROOTHEX');
    await stop(p, 'SIGTERM');
  });

  it('exports, verifies offline, and names the position after one byte of the export changes', async () => {
    const p = await start(await tamper(() => Promise.resolve()));
    const file = join(dir.path, 'conv-tamper.jsonl');
    const exported = await runCliProcess(['state', 'export', P, '-o', file], pki, p.address);
    expect(exported).toMatchObject({ code: 0, stdout: '' });
    expect(exported.stderr).toContain(`${P}: exported 24 events to ${file}`);
    await stop(p, 'SIGTERM');

    const lines = (await readFile(file, 'utf8')).trimEnd().split('\n');
    expect(lines).toHaveLength(25);
    const key = await loadSigningKey(pki.signingKey);
    expect(JSON.parse(lines[0] ?? '')).toEqual({
      format: 'polychrome-journal-export/v1',
      partition: P,
      publicKeys: [
        { keyId: key.keyId, publicKey: Buffer.from(key.signer.publicKey).toString('base64') },
      ],
      checkpoint: { head: 24, rootHex: expect.stringMatching(/^[0-9a-f]{64}$/u), keyId: key.keyId },
    });

    const offline = await runCliProcess(
      ['journal', 'verify', file, '--format', 'json'],
      pki,
      'unused:1',
    );
    expect(offline.code).toBe(0);
    expect(JSON.parse(offline.stdout)).toMatchObject({
      ok: true,
      events: 24,
      signedRoots: 6,
      trust: 'export-header',
    });

    const pinned = await runCliProcess(
      ['journal', 'verify', file, '--public-key', toHex(key.signer.publicKey)],
      pki,
      'unused:1',
    );
    expect(pinned.code).toBe(0);
    expect(pinned.stdout).toContain(
      'OK: 24 events, 6 signed roots verified against the pinned key(s)',
    );

    const wrongKey = await runCliProcess(
      ['journal', 'verify', file, '--format', 'json', '--public-key', toHex(stranger.publicKey)],
      pki,
      'unused:1',
    );
    expect(wrongKey.code).toBe(1);
    expect(JSON.parse(wrongKey.stdout)).toMatchObject({
      failure: { position: 3, reason: 'wrong_key' },
    });

    // One byte of event 9's payload (base64, mid-string) changed: the root at 11 no longer matches.
    const line = lines[10] ?? '';
    const at = line.indexOf('"payload":"') + '"payload":"'.length + 8;
    const changed = line.slice(0, at) + (line[at] === 'A' ? 'B' : 'A') + line.slice(at + 1);
    const bad = join(dir.path, 'conv-tamper-changed.jsonl');
    await writeFile(bad, [...lines.slice(0, 10), changed, ...lines.slice(11)].join('\n') + '\n');
    const failed = await runCliProcess(
      ['journal', 'verify', bad, '--format', 'json'],
      pki,
      'unused:1',
    );
    expect(failed.code).toBe(1);
    expect(JSON.parse(failed.stdout)).toMatchObject({
      ok: false,
      failure: { position: 11, reason: 'event_changed' },
    });
    const text = await runCliProcess(['journal', 'verify', bad], pki, 'unused:1');
    expect(text.code).toBe(1);
    expect(text.stdout).toContain('FAILED at position 11 (event_changed)');
  });
});

describe('repair across a SIGKILL', () => {
  const P = 'conv-repair-kill';
  const CORRUPT = 4;
  /** When the kill comes after the Repair call is sent. */
  const DELAYS_MS = [0, 5, 20, 80, 320];
  let corrupted: string;
  let pristineEvents: JournalEntry[];

  // 60 batches of 2 messages: roots at 2, 5, ..., 179; head 180. The repair scan reads all
  // of them, so a kill lands before, during or after its one write.
  beforeAll(async () => {
    corrupted = join(dir.path, 'repair-kill');
    pristineEvents = await seedSixtyBatches(corrupted, P);
    const db = new ClassicLevel<Uint8Array, Uint8Array>(corrupted, {
      keyEncoding: 'view',
      valueEncoding: 'view',
    });
    await db.open();
    try {
      const value = await db.get(eventKey(P, CORRUPT));
      if (value === undefined) throw new Error('no event to corrupt');
      // The payload is cut short: it no longer decodes (a bad disk, a careless hand).
      await db.put(eventKey(P, CORRUPT), value.slice(0, value.length - 3));
    } finally {
      await db.close();
    }
  });

  it('leaves the journal either untouched or wholly repaired, at every kill point, and a repair after it finishes the job', async () => {
    // Where verify finds the damage before any repair: the signed root over the entry.
    const probe = join(dir.path, 'repair-kill-probe');
    await cp(corrupted, probe, { recursive: true });
    const before = await start(probe);
    const reader = await client(before, 'verifier');
    const damaged = await reader.verify(P);
    reader.close();
    expect(await stop(before, 'SIGTERM')).toBe(0);
    await rm(probe, { recursive: true, force: true });
    expect(damaged.ok).toBe(false);
    expect(damaged.failure?.position).toBeGreaterThanOrEqual(CORRUPT);
    const seen = { repaired: 0, untouched: 0 };
    for (const delayMs of DELAYS_MS) {
      const copy = join(dir.path, `repair-kill-${String(delayMs)}`);
      const { restarted: second, done: finished } = await killDuring(
        corrupted,
        copy,
        delayMs,
        (admin) => admin.repair(P, { actor: 'web:admin', reason: 'disk corruption, ticket 7' }),
      );
      // Verify needs the verifier role, Repair the repair role (the control plane's).
      const c = await client(second, 'verifier');
      const repairer = await client(second, 'controlPlane');
      const verdict = await c.verify(P);
      if (verdict.ok) {
        // The excision and its signed event landed together.
        seen.repaired += 1;
        expect(verdict).toMatchObject({ excised: [CORRUPT], events: 182, unsealed: 0 });
        const excision = (await readAll(c, P)).find((e) => e.kind === EventKind.Excision);
        expect(excision?.position).toBe(180);
      } else {
        // Nothing was written: the same failure as before the repair, at the same place.
        seen.untouched += 1;
        expect(verdict).toMatchObject({ excised: [], events: 180 });
        expect(verdict.failure).toEqual(damaged.failure);
        const done = await repairer.repair(P, { actor: 'web:admin', reason: 'second try' });
        expect(done.excised.map((e) => e.position)).toEqual([CORRUPT]);
        expect(await c.verify(P)).toMatchObject({ ok: true, excised: [CORRUPT] });
      }
      // Every entry but the excised one reads back byte for byte as written.
      const after = await readAll(c, P);
      for (const event of pristineEvents) {
        if (event.position === CORRUPT) continue;
        expect(after[event.position]?.payload).toEqual(event.payload);
      }
      c.close();
      repairer.close();
      await finished();
    }
    expect(seen.repaired + seen.untouched).toBe(DELAYS_MS.length);
  }, 400_000);
});

describe('erasure across a SIGKILL', () => {
  const P = 'conv-erase-kill';
  const ERASED = [4, 7];
  /** When the kill comes after the Erase call is sent. */
  const DELAYS_MS = [0, 5, 20, 80, 320];
  let pristine: string;
  let pristineEvents: JournalEntry[];

  // 60 batches of 2 messages: roots at 2, 5, ..., 179; head 180. The erasure's check
  // replays all of them, so a kill lands before, during or after its one write.
  beforeAll(async () => {
    pristine = join(dir.path, 'erase-kill');
    pristineEvents = await seedSixtyBatches(pristine, P);
  });

  it('leaves the journal either untouched or wholly erased, at every kill point', async () => {
    const seen = { erased: 0, untouched: 0 };
    for (const delayMs of DELAYS_MS) {
      const copy = join(dir.path, `erase-kill-${String(delayMs)}`);
      const request = { positions: ERASED, actor: 'web:admin', reason: 'erasure request 9' };
      const { restarted: second, done: finished } = await killDuring(
        pristine,
        copy,
        delayMs,
        (admin) => admin.erase(P, request),
      );
      const c = await client(second, 'verifier');
      const verdict = await c.verify(P);
      expect(verdict.ok).toBe(true);
      const after = await readAll(c, P);
      if (verdict.events === 183) {
        // Both markers, both records and the root landed together.
        seen.erased += 1;
        expect(verdict).toMatchObject({ excised: ERASED, erased: ERASED, unsealed: 0 });
        expect(after.slice(180, 182).map((e) => e.kind)).toEqual([
          EventKind.Excision,
          EventKind.Excision,
        ]);
      } else {
        // Nothing was written.
        seen.untouched += 1;
        expect(verdict).toMatchObject({ excised: [], erased: [], events: 180 });
      }
      // Every entry but the erased ones reads back byte for byte as written; the erased
      // ones are either all there or all excised.
      const excisedNow = after.filter((e) => e.excised === true).map((e) => e.position);
      expect(excisedNow).toEqual(verdict.events === 183 ? ERASED : []);
      for (const event of pristineEvents) {
        if (excisedNow.includes(event.position)) continue;
        expect(after[event.position]?.payload).toEqual(event.payload);
      }
      c.close();
      await finished();
    }
    expect(seen.erased + seen.untouched).toBe(DELAYS_MS.length);
  }, 400_000);
});

describe('memory clear across a SIGKILL', () => {
  const P = 'conv-clear-kill';
  /** The memory_set positions: batch 2's first entry and batch 40's second. */
  const SETS = [6, 121];
  const DELAYS_MS = [0, 5, 20, 80, 320];
  let pristine: string;
  let pristineEvents: JournalEntry[];

  const memorySet = (value: string) => ({
    kind: EventKind.MemorySet,
    payload: encodePayload(EventKind.MemorySet, {
      key: 'city',
      value,
      attribution: undefined,
      turnId: 't',
      toolCallId: `call-${value}`,
      setAtMs: 1,
    }),
  });
  const cleared = {
    kind: EventKind.MemoryCleared,
    payload: encodePayload(EventKind.MemoryCleared, {
      key: 'city',
      attribution: { caller: 'web:owner', participants: [], persona: '', session: '' },
      clearedAtMs: 2,
      setPositions: SETS,
      turnId: '',
      toolCallId: '',
    }),
  };

  // 60 batches of 2 entries (two of them memory_sets of "city"): head 180. The clear's check
  // replays all of them, so a kill lands before, during or after its one write.
  beforeAll(async () => {
    pristine = join(dir.path, 'clear-kill');
    pristineEvents = await seedSixtyBatches(pristine, P, (position) =>
      position === SETS[0]
        ? memorySet('Lisbon')
        : position === SETS[1]
          ? memorySet('Porto')
          : undefined,
    );
    expect(
      pristineEvents.filter((e) => e.kind === EventKind.MemorySet).map((e) => e.position),
    ).toEqual(SETS);
  });

  it('leaves either no clear, or the clear with its memory_sets erased, at every kill point', async () => {
    const seen = { cleared: 0, untouched: 0 };
    for (const delayMs of DELAYS_MS) {
      const copy = join(dir.path, `clear-kill-${String(delayMs)}`);
      const { restarted: second, done: finished } = await killDuring(
        pristine,
        copy,
        delayMs,
        (writer) => writer.clearMemory(P, 180, cleared, { fencingToken: 0 }),
      );
      const c = await client(second, 'verifier');
      const verdict = await c.verify(P);
      expect(verdict.ok).toBe(true);
      const after = await readAll(c, P);
      const clearAt = after.findIndex((e) => e.kind === EventKind.MemoryCleared);
      if (verdict.events === 184) {
        // The clear, both records and the root landed with the markers: never a clear alone.
        seen.cleared += 1;
        expect(clearAt).toBe(180);
        expect(verdict).toMatchObject({ excised: SETS, erased: SETS, unsealed: 0 });
        expect(after.slice(181, 183).map((e) => e.kind)).toEqual([
          EventKind.Excision,
          EventKind.Excision,
        ]);
      } else {
        seen.untouched += 1;
        expect(clearAt).toBe(-1);
        expect(verdict).toMatchObject({ excised: [], erased: [], events: 180 });
      }
      const excisedNow = after.filter((e) => e.excised === true).map((e) => e.position);
      expect(excisedNow).toEqual(clearAt === -1 ? [] : SETS);
      for (const event of pristineEvents) {
        if (excisedNow.includes(event.position)) continue;
        expect(after[event.position]?.payload).toEqual(event.payload);
      }
      c.close();
      await finished();
    }
    expect(seen.cleared + seen.untouched).toBe(DELAYS_MS.length);
  }, 400_000);
});
