import { cp, mkdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { Role } from '../../common/persona-roles';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { CoreV1Api } from '@kubernetes/client-node';
import { payloadCodecs } from '../../common/event-kinds';
import { partitionOf } from '../../common/partition-name';
import { pollUntil } from '../../hack/lib/processes';
import { echoResponder, MessagesApiServer } from '../support/messages-api-server';
import { polychrome } from './support/polychrome-cli';
import { apiCall, type ApiAnswer } from './support/public-api';
import { startTurnStack, type TurnStack } from './support/turn-stack';

// docs/turns.md, "A rolled-back journal": the attack of the trust issue, for real. A copy of
// the state plane's LevelDB directory is taken, two more turns are taken (one an approved
// tool call), and the copy is put back with the state plane stopped, as a restored volume
// would be. The next message is refused before anything is appended, the Conversation says
// Degraded JournalRolledBack with both heads (and an Event), the checkpoint in its status is
// not overwritten, and `conversation verify` (the real CLI process) fails rolled_back. Only an
// admin's recorded decision lets turns go on. The second case does the same through the
// documented procedure: `polychrome state backup` while the state plane serves, then the
// state plane's own `restore` with it stopped (docs/operations.md, "Backup and restore").

interface JournalStatus {
  head?: number;
  lastSignedRoot?: string;
  rollback?: { checkpointHead: number; journalHead: number; checkpointRoot: string };
}

function statusOf(obj: unknown): {
  journal?: JournalStatus;
  conditions?: { type: string; status: string; reason: string; message: string }[];
} {
  return (obj as { status?: ReturnType<typeof statusOf> }).status ?? {};
}

describe('a rolled-back journal (state volume restored from an older copy)', () => {
  let stack: TurnStack;
  let messages: MessagesApiServer;
  let owner: string;
  let admin: string;
  let uid: string;
  const name = 'rolled';

  const post = (text: string, key: string, token = owner, conv = uid): Promise<ApiAnswer> =>
    apiCall(stack.apiUrl, 'POST', `/v1/conversations/${conv}/messages`, {
      token,
      body: { text, idempotencyKey: key },
    });
  const accept = (body: unknown, token = admin, conv = uid): Promise<ApiAnswer> =>
    apiCall(stack.apiUrl, 'POST', `/v1/conversations/${conv}/accept-rollback`, { token, body });
  /** Waits until the status checkpoint has caught up with the journal. */
  const checkpointed = async (conv = uid, convName = name): Promise<number> => {
    const head = (await stack.journal(conv)).length;
    await stack.waitConversation(convName, (obj) => statusOf(obj).journal?.head === head);
    return head;
  };
  /** Waits for the Conversation's Degraded condition with `reason` and `status`. */
  const degraded = (convName: string, reason: string, status = 'True'): Promise<unknown> =>
    stack.waitConversation(convName, (obj) =>
      (statusOf(obj).conditions ?? []).some(
        (c) => c.type === 'Degraded' && c.status === status && c.reason === reason,
      ),
    );
  /** Stops the state plane, runs `change` on its stopped data, starts it again. */
  const withStatePlaneStopped = async (change: () => Promise<void>): Promise<void> => {
    await stack.state.kill('SIGTERM');
    await change();
    await stack.state.start();
    await stack.controlPlane(0).waitReady();
  };

  beforeAll(async () => {
    messages = await MessagesApiServer.start({ respond: echoResponder });
    stack = await startTurnStack({ namespacePrefix: 'rollback', messages });
    owner = await stack.mintToken('test:rollback-owner');
    admin = await stack.mintToken('test:rollback-admin', [Role.Admin]);
    uid = await stack.createConversation(name, {
      owner: 'test:rollback-owner',
      tools: { builtin: ['calculator'], requireApproval: ['calculator'] },
    });
  }, 180_000);
  afterAll(async () => {
    await stack?.stop();
    await messages?.close();
  });

  it('refuses every write, says so, keeps the checkpoint, and goes on only by an admin decision', async () => {
    await stack.withDiagnostics(async () => {
      expect((await post('before the copy', 'k-1')).body).toMatchObject({ status: 'complete' });
      const copiedHead = await checkpointed();
      const copy = `${stack.state.dataDir}-copy`;
      await withStatePlaneStopped(() => cp(stack.state.dataDir, copy, { recursive: true }));

      // Two more turns, one an approved tool call: the turns the rollback will lose.
      expect((await post('after the copy', 'k-2')).body).toMatchObject({ status: 'complete' });
      const paused = await post('compute [[tool:calculator {"expression":"6*7"}]]', 'k-3');
      expect(paused.body).toMatchObject({ status: 'paused' });
      const requestId = String((paused.body.approval as { requestId: string }).requestId);
      const approved = await apiCall(
        stack.apiUrl,
        'POST',
        `/v1/conversations/${uid}/approvals/${requestId}`,
        { token: admin, body: { decision: 'approve' } },
      );
      expect(approved.body).toMatchObject({
        status: 'complete',
        reply: 'tool calculator said: 42',
      });
      const lostHead = await checkpointed();
      const lostRoot = statusOf(await stack.conversation(name)).journal?.lastSignedRoot;
      expect(lostHead).toBeGreaterThan(copiedHead);

      // The copy goes back, as a volume restored from an older snapshot.
      await withStatePlaneStopped(async () => {
        await rm(stack.state.dataDir, { recursive: true, force: true });
        await cp(copy, stack.state.dataDir, { recursive: true });
      });
      expect(await stack.journal(uid)).toHaveLength(copiedHead);

      // The next message is refused before anything is appended.
      const refused = await post('after the rollback', 'k-4');
      expect(refused.status).toBe(412);
      expect(refused.body.error).toMatchObject({
        code: 'failed_precondition',
        details: {
          reason: 'journal_rolled_back',
          checkpointHead: lostHead,
          journalHead: copiedHead,
        },
      });
      expect(JSON.stringify(refused.body)).toContain(
        `the state plane holds ${String(copiedHead)} entries, but status.journal records ${String(lostHead)}`,
      );
      expect(await stack.journal(uid)).toHaveLength(copiedHead);
      // And again: every claim checks the journal anew.
      expect((await post('after the rollback', 'k-4')).status).toBe(412);

      // Degraded JournalRolledBack with both heads; the checkpoint is kept; an Event fires.
      const status = statusOf(await degraded(name, 'JournalRolledBack'));
      expect(status.journal).toMatchObject({
        head: lostHead,
        lastSignedRoot: lostRoot,
        rollback: { checkpointHead: lostHead, journalHead: copiedHead, checkpointRoot: lostRoot },
      });
      const condition = status.conditions?.find((c) => c.type === 'Degraded');
      expect(condition?.message).toContain(`holds ${String(copiedHead)} entries`);
      expect(condition?.message).toContain(`records ${String(lostHead)}`);
      const core = stack.admin.makeApiClient(CoreV1Api);
      await pollUntil(
        'a JournalRolledBack Event',
        async () => {
          const events = await core.listNamespacedEvent({ namespace: stack.namespace });
          return events.items.some(
            (e) => e.reason === 'JournalRolledBack' && e.involvedObject.name === name,
          )
            ? true
            : undefined;
        },
        { timeoutMs: 30_000, intervalMs: 250 },
      );

      // The real CLI, against the Conversation's checkpoint: rolled_back.
      const actor = ['--actor', 'test:rollback-admin', '--api', stack.apiUrl];
      const verify = await polychrome(['conversation', 'verify', uid, ...actor], admin);
      expect(verify.code).toBe(1);
      expect(verify.stdout + verify.stderr).toContain('rolled_back');

      // Only an admin accepts, at the head the journal holds, with a reason.
      expect(
        (await accept({ actor: 'test:rollback-owner', head: copiedHead, reason: 'x' }, owner))
          .status,
      ).toBe(403);
      const stale = await accept({
        actor: 'test:rollback-admin',
        head: lostHead,
        reason: 'restored',
      });
      expect(stale.status).toBe(409);
      expect((await accept({ actor: 'test:rollback-admin', head: copiedHead })).status).toBe(400);
      expect(await stack.journal(uid)).toHaveLength(copiedHead);

      const cli = await polychrome(
        [
          'conversation',
          'accept-rollback',
          uid,
          ...actor,
          '--head',
          String(copiedHead),
          '--reason',
          'restored from the snapshot after a disk failure',
        ],
        admin,
      );
      expect(cli.stderr).toBe('');
      expect(cli.code).toBe(0);
      expect(cli.stdout).toContain(`rollback from head ${String(lostHead)} accepted`);

      const journal = await stack.journal(uid);
      const decision = journal[copiedHead];
      expect(decision?.kind).toBe('rollback_accepted');
      expect(payloadCodecs.rollback_accepted.decode(decision!.payload)).toMatchObject({
        checkpointHead: lostHead,
        checkpointRoot: Buffer.from(lostRoot ?? '', 'hex'),
        journalHead: copiedHead,
        actor: 'test:rollback-admin',
        caller: 'test:rollback-admin',
        reason: 'restored from the snapshot after a disk failure',
      });
      // Both decisions name the session whose token acted: the admin's here, the owner's on
      // the message that opened the first turn.
      const acceptedBy = payloadCodecs.rollback_accepted.decode(decision!.payload).session;
      const opened = journal.find((e) => e.kind === 'message_received');
      const openedBy = payloadCodecs.message_received.decode(opened!.payload).attribution?.session;
      expect(acceptedBy).toMatch(/^\S+$/u);
      expect(openedBy).toMatch(/^\S+$/u);
      expect(openedBy).not.toBe(acceptedBy);
      expect(journal.at(-1)?.kind).toBe('signed_root');
      // Accepted once: there is nothing left to accept.
      expect(
        (await accept({ actor: 'test:rollback-admin', head: journal.length, reason: 'again' }))
          .status,
      ).toBe(409);

      // The decision is the new checkpoint; Degraded clears and turns go on.
      await stack.waitConversation(name, (obj) => {
        const s = statusOf(obj);
        return (
          s.journal?.head === journal.length &&
          s.journal.rollback === undefined &&
          (s.conditions ?? []).some((c) => c.type === 'Degraded' && c.status === 'False')
        );
      });
      expect((await post('after the decision', 'k-5')).body).toMatchObject({
        status: 'complete',
        reply: 'echo: after the decision',
      });
      expect((await stack.verify(uid)).ok).toBe(true);
      await checkpointed();
      const verified = await polychrome(['conversation', 'verify', uid, ...actor], admin);
      expect(verified.code).toBe(0);
      await rm(copy, { recursive: true, force: true });
    });
  }, 300_000);

  it('a state plane restored from `state backup` is caught the same way, and verifies after the decision', async () => {
    await stack.withDiagnostics(async () => {
      const certs = stack.certs;
      const as = (identity: 'backup' | 'verifier'): string[] => [
        ...['--address', stack.state.address, '--ca', certs.ca.certPath],
        ...['--cert', certs[identity].certPath, '--key', certs[identity].keyPath],
      ];
      const restoredName = 'restored';
      const conv = await stack.createConversation(restoredName, { owner: 'test:rollback-owner' });
      const say = (text: string, key: string): Promise<ApiAnswer> => post(text, key, owner, conv);
      expect((await say('before the backup', 'b-1')).body).toMatchObject({ status: 'complete' });
      const backedHead = await checkpointed(conv, restoredName);

      // Online: the state plane keeps serving while the backup streams.
      const file = join(`${stack.state.dataDir}-backups`, 'state.pcbackup');
      await rm(`${stack.state.dataDir}-backups`, { recursive: true, force: true });
      await mkdir(`${stack.state.dataDir}-backups`);
      const taken = await polychrome(['state', 'backup', '-o', file, ...as('backup')], '');
      expect(taken.stderr).toContain(`state backup written to ${file}`);
      expect(taken.code).toBe(0);
      // The control plane's own certificate may not take one.
      const refused = await polychrome(
        ['state', 'backup', '-o', `${file}-cp`, '--address', stack.state.address]
          .concat(['--ca', certs.ca.certPath, '--cert', certs.controlPlane.certPath])
          .concat(['--key', certs.controlPlane.keyPath]),
        '',
      );
      expect(refused.stderr).toContain('it needs role polychrome:backup');
      expect(refused.code).toBe(3);

      expect((await say('after the backup', 'b-2')).body).toMatchObject({ status: 'complete' });
      const lostHead = await checkpointed(conv, restoredName);
      expect(lostHead).toBeGreaterThan(backedHead);

      await withStatePlaneStopped(async () => {
        const restored = await stack.state.restore(file, ['--overwrite']);
        expect(restored.output).toContain('restored ');
        expect(restored.code).toBe(0);
      });
      expect(await stack.journal(conv)).toHaveLength(backedHead);

      // Refused before anything is appended; Degraded JournalRolledBack with both heads.
      const after = await say('after the restore', 'b-3');
      expect(after.status).toBe(412);
      expect(after.body.error).toMatchObject({
        details: {
          reason: 'journal_rolled_back',
          checkpointHead: lostHead,
          journalHead: backedHead,
        },
      });
      const status = statusOf(await degraded(restoredName, 'JournalRolledBack'));
      expect(status.journal?.rollback).toMatchObject({
        checkpointHead: lostHead,
        journalHead: backedHead,
      });
      expect(await stack.journal(conv)).toHaveLength(backedHead);

      // Only the admin's recorded decision lets it go on.
      const decision = { actor: 'test:rollback-admin', head: backedHead, reason: 'restored' };
      expect((await accept(decision, owner, conv)).status).toBe(403);
      expect((await accept(decision, admin, conv)).status).toBe(200);
      const journal = await stack.journal(conv);
      expect(journal[backedHead]?.kind).toBe('rollback_accepted');
      await stack.waitConversation(restoredName, (obj) =>
        (statusOf(obj).conditions ?? []).some((c) => c.type === 'Degraded' && c.status === 'False'),
      );
      expect((await say('after the decision', 'b-4')).body).toMatchObject({ status: 'complete' });

      // Every partition the restored state plane holds verifies.
      const verified = await polychrome(['state', 'verify', '--all', ...as('verifier')], '');
      expect(verified.stdout).toContain(`${partitionOf(conv)}: OK`);
      expect(verified.stdout).toMatch(/\d+ partitions, 0 failed verification/u);
      expect(verified.code).toBe(0);
      await rm(`${stack.state.dataDir}-backups`, { recursive: true, force: true });
    });
  }, 300_000);
});
