import { randomBytes, createPrivateKey } from 'node:crypto';
import { readdir, readFile, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';

import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { EventsV1Api } from '@kubernetes/client-node';

import { partitionOf } from '../../common/partition-name';
import { loadStateClientTls } from '../../common/state-channel';
import { StateCallError } from '../../common/state-call-errors';
import { StateClient } from '../../common/state-client';
import { ed25519PublicKeyHex } from '../../hack/lib/harness-config';
import { pollUntil } from '../../hack/lib/processes';
import { conversations, field } from './support/kube';
import { polychrome } from './support/polychrome-cli';
import { apiCall, postMessage } from './support/public-api';
import { startTurnStack, type TurnStack } from './support/turn-stack';

// Issue #27 point 6, journal retention, on the real stack: a real state-plane process
// (LevelDB on its own directory, the state volume), a real control-plane process, a real
// harness and kube-apiserver. Conversations run turns, then are deleted with the API
// server; the control plane's finalizer retires their journal partitions as their
// spec.journalRetention says. The state volume's size is measured on disk before and after.

const TURNS = 8;
/** Random (incompressible: LevelDB compresses blocks) text, 24 KiB a message. */
const text = (): string => randomBytes(18 * 1024).toString('base64');

describe('journal retention when a Conversation is deleted', () => {
  let stack: TurnStack;
  let owner: string;
  let verifier: StateClient;
  let publicKeyHex: string;

  beforeAll(async () => {
    stack = await startTurnStack({ namespacePrefix: 'retention' });
    owner = await stack.mintToken('test:retention-owner');
    verifier = new StateClient({
      address: stack.state.address,
      tls: await loadStateClientTls({
        ca: stack.certs.ca.certPath,
        cert: stack.certs.verifier.certPath,
        key: stack.certs.verifier.keyPath,
      }),
      callTimeoutMs: 10_000,
    });
    publicKeyHex = ed25519PublicKeyHex(createPrivateKey(await readFile(stack.certs.signingKey)));
  }, 180_000);

  afterAll(async () => {
    verifier?.close();
    await stack?.stop();
  });

  /** Bytes of the state plane's journal database on disk (what `du -b` counts). */
  async function journalBytes(): Promise<number> {
    let total = 0;
    for (const name of await readdir(stack.state.dataDir)) {
      total += (await stat(join(stack.state.dataDir, name))).size;
    }
    return total;
  }

  /** A conversation with `TURNS` turns of random text; its uid and journal payload bytes. */
  async function conversationWithTurns(
    name: string,
    spec: Record<string, unknown>,
  ): Promise<{ uid: string; payloadBytes: number; head: number }> {
    const uid = await stack.createConversation(name, { ...spec, owner: 'test:retention-owner' });
    for (let i = 0; i < TURNS; i++) {
      const answer = await postMessage(stack.apiUrl, owner, uid, text(), `${name}-${String(i)}`);
      expect([answer.status, answer.body.status]).toEqual([200, 'complete']);
    }
    const journal = await stack.journal(uid);
    // Nothing more is written for it: the status shows the journal's head.
    await stack.waitConversation(
      name,
      (obj) => field(obj, 'status', 'journal', 'head') === journal.length,
    );
    const payloadBytes = journal.reduce((sum, e) => sum + e.payload.length, 0);
    return { uid, payloadBytes, head: journal.length };
  }

  async function deleteConversation(name: string): Promise<void> {
    const { api, group, version, plural } = conversations(stack.admin);
    await api.deleteNamespacedCustomObject({
      group,
      version,
      plural,
      namespace: stack.namespace,
      name,
    });
    await pollUntil(
      `Conversation ${name} gone (its finalizer removed)`,
      async () => {
        try {
          await stack.conversation(name);
          return undefined;
        } catch {
          return true;
        }
      },
      { timeoutMs: 60_000, intervalMs: 200 },
    );
  }

  const stateFlags = (): string[] => [
    '--address',
    stack.state.address,
    '--ca',
    stack.certs.ca.certPath,
    '--cert',
    stack.certs.verifier.certPath,
    '--key',
    stack.certs.verifier.keyPath,
  ];

  it('delete: the events go, the state volume shrinks by about their size, and the partition answers that it was retired', async () => {
    await stack.withDiagnostics(async () => {
      const { uid, payloadBytes } = await conversationWithTurns('retire-delete', {
        journalRetention: 'delete',
      });
      expect(payloadBytes).toBeGreaterThan(TURNS * 2 * 24 * 1024);
      const before = await journalBytes();
      await deleteConversation('retire-delete');
      const after = await journalBytes();
      // The journal's payloads are random: at least most of their bytes leave the disk.
      expect(before - after).toBeGreaterThan(payloadBytes * 0.6);

      const partition = partitionOf(uid);
      const retirement = await verifier.retirement(partition);
      expect(retirement).toMatchObject({ partition, policy: 'delete' });
      expect(retirement.signed).toBeUndefined();
      expect(retirement.actor).toBe(stack.controlPlanes[0]?.identity);
      expect(retirement.reason).toContain('retire-delete');
      const error = await verifier.head(partition).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(StateCallError);
      expect((error as StateCallError).code).toBe('failed_precondition');
      expect((error as StateCallError).message).toContain(`${partition} was retired at`);
      expect(await verifier.listPartitions()).not.toContain(partition);
      // Nothing of it is reachable through the public API.
      const read = await apiCall(stack.apiUrl, 'GET', `/v1/conversations/${uid}`, {
        token: owner,
      });
      expect(read.status).toBe(404);
    });
  }, 300_000);

  it('checkpoint: the space is reclaimed, and an export taken before verifies against the signed record (a truncated one does not)', async () => {
    await stack.withDiagnostics(async () => {
      const { uid, payloadBytes, head } = await conversationWithTurns('retire-checkpoint', {
        journalRetention: 'checkpoint',
      });
      const partition = partitionOf(uid);
      const exportFile = join(stack.dir, 'before-retirement.ndjson');
      const exported = await polychrome(
        ['state', 'export', partition, '-o', exportFile, ...stateFlags()],
        '',
      );
      expect([exported.code, exported.stderr]).toEqual([0, expect.any(String)]);

      const before = await journalBytes();
      await deleteConversation('retire-checkpoint');
      expect(before - (await journalBytes())).toBeGreaterThan(payloadBytes * 0.6);

      const recordFile = join(stack.dir, 'retirement.json');
      const fetched = await polychrome(
        ['state', 'retirement', partition, '-o', recordFile, ...stateFlags()],
        '',
      );
      expect([fetched.code, fetched.stderr]).toEqual([0, expect.stringContaining(recordFile)]);
      const record = JSON.parse(await readFile(recordFile, 'utf8')) as Record<string, unknown>;
      expect(record).toMatchObject({ partition, policy: 'checkpoint', head });

      const verify = (file: string) =>
        polychrome(
          [
            'journal',
            'verify',
            file,
            '--retirement',
            recordFile,
            '--public-key',
            publicKeyHex,
            '--format',
            'json',
          ],
          '',
        );
      const ok = await verify(exportFile);
      expect([ok.code, ok.stderr]).toEqual([0, '']);
      expect(JSON.parse(ok.stdout)).toMatchObject({ ok: true, events: head, retirement: { head } });

      // The export with its last batch cut off: every root in it verifies, the record does not.
      const lines = (await readFile(exportFile, 'utf8')).trimEnd().split('\n');
      const lastRoot = lines.slice(0, -1).findLastIndex((l) => l.includes('"kind":"signed_root"'));
      const truncated = join(stack.dir, 'truncated.ndjson');
      await writeFile(truncated, `${lines.slice(0, lastRoot + 1).join('\n')}\n`);
      const cut = await verify(truncated);
      expect(cut.code).toBe(1);
      expect(JSON.parse(cut.stdout)).toMatchObject({
        ok: false,
        failure: { reason: 'retirement_mismatch' },
      });
    });
  }, 300_000);

  it('a failing retirement keeps the finalizer, warns with FinalizeFailed, and is retried until the state plane answers', async () => {
    await stack.withDiagnostics(async () => {
      const name = 'retire-retried';
      const uid = await stack.createConversation(name, {
        journalRetention: 'delete',
        owner: 'test:retention-owner',
      });
      const answer = await postMessage(stack.apiUrl, owner, uid, 'hello', `${name}-0`);
      expect(answer.status).toBe(200);
      await stack.state.kill('SIGTERM');
      try {
        const { api, group, version, plural } = conversations(stack.admin);
        await api.deleteNamespacedCustomObject({
          group,
          version,
          plural,
          namespace: stack.namespace,
          name,
        });
        const events = stack.admin.makeApiClient(EventsV1Api);
        const warning = await pollUntil(
          'a FinalizeFailed Warning on the Conversation',
          async () =>
            (await events.listNamespacedEvent({ namespace: stack.namespace })).items.find(
              (e) => e.regarding?.name === name && e.reason === 'FinalizeFailed',
            ),
          { timeoutMs: 60_000, intervalMs: 300 },
        );
        expect(warning.type).toBe('Warning');
        expect(warning.note).toContain('journal retention (spec.journalRetention delete)');
        expect(warning.note).toContain('polychrome:retire');
        // Still there, finalizer and all.
        expect(field(await stack.conversation(name), 'metadata', 'finalizers')).toEqual([
          'polychrome.dev/cleanup',
        ]);
      } finally {
        await stack.state.start();
      }
      await pollUntil(
        `Conversation ${name} gone once the state plane is back`,
        async () => {
          try {
            await stack.conversation(name);
            return undefined;
          } catch {
            return true;
          }
        },
        { timeoutMs: 120_000, intervalMs: 300 },
      );
      expect(await verifier.retirement(partitionOf(uid))).toMatchObject({ policy: 'delete' });
    });
  }, 300_000);

  it('keep (the deployment default): the journal stays whole and readable', async () => {
    await stack.withDiagnostics(async () => {
      const { uid, head } = await conversationWithTurns('retire-keep', {});
      const before = await journalBytes();
      await deleteConversation('retire-keep');
      expect(await journalBytes()).toBeGreaterThan(before * 0.9);
      const partition = partitionOf(uid);
      expect(await stack.journal(uid)).toHaveLength(head);
      expect((await stack.verify(uid)).ok).toBe(true);
      expect(await verifier.listPartitions()).toContain(partition);
      expect(await verifier.retirement(partition).catch((e: unknown) => e)).toMatchObject({
        code: 'not_found',
      });
    });
  }, 300_000);
});
