/*
 * The admin's forensic commands end to end over the real turn coordinator and the real
 * LevelDB store (test/support/api-fixtures.ts): the CLI's `conversation
 * verify|replay|repair` against the public API, and the attacks on the actor rule.
 */
import { generateKeyPairSync } from 'node:crypto';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { afterEach, describe, expect, it } from '@jest/globals';
import { EventKind } from '../../common/event-kinds';
import { journalKeyId } from '../../common/journal-keys';
import type { NewJournalEvent } from '../../common/state-journal';
import { StoreJournal } from '../../test/support/store-journal';
import { runCli } from '../../cli/run-cli';
import { echoResponder, MessagesApiServer } from '../../test/support/messages-api-server';
import {
  ADMIN,
  ALICE,
  call,
  errorOf,
  pollUntil,
  startApi,
  TOKENS,
  type TestApi,
} from '../../test/support/api-fixtures';
import {
  calculatorReply,
  textReply,
  transferReply,
  unknownFirstTransfer,
} from '../../test/support/real-turns';
import { checkSchema, responseSchema } from '../../test/support/openapi-check';
import { ConversationForensics, type ForensicJournal } from './conversation-forensics';

let api: TestApi | undefined;
afterEach(async () => {
  await api?.close();
  api = undefined;
});

function sink(): { stream: Writable; text: () => string } {
  const chunks: string[] = [];
  return {
    stream: new Writable({
      write(chunk: Buffer, _encoding, done) {
        chunks.push(chunk.toString('utf8'));
        done();
      },
    }),
    text: () => chunks.join(''),
  };
}

async function cli(
  a: Pick<TestApi, 'base'>,
  token: string,
  args: readonly string[],
  env?: Record<string, string>,
): Promise<{ code: number; stdout: string; stderr: string }> {
  const out = sink();
  const err = sink();
  const code = await runCli(
    [...args, '--api', a.base, '--token', token],
    { stdout: out.stream, stderr: err.stream },
    env,
  );
  return { code, stdout: out.text(), stderr: err.text() };
}

/** Waits until the Conversation's status.journal has caught up with the journal. */
async function statusCaughtUp(a: TestApi, id: string): Promise<void> {
  await pollUntil(
    'status.journal at the head',
    () =>
      a.turns.conversations.byUid(id)?.status?.journal?.head === a.head(id) ? true : undefined,
    10_000,
  );
}

/**
 * Waits until the Conversation's status records the journal keys (the first status write
 * after the first batch): without them, and without --public-key, replay is refused.
 */
async function keysRecorded(a: TestApi, id: string): Promise<void> {
  await pollUntil(
    'status.journal.publicKeys',
    () =>
      (a.turns.conversations.byUid(id)?.status?.journal?.publicKeys?.length ?? 0) > 0
        ? true
        : undefined,
    10_000,
  );
}

async function post(
  a: TestApi,
  id: string,
  text: string,
): Promise<{ status: number; json: unknown }> {
  return call(a, 'POST', `/v1/conversations/${id}/messages`, {
    token: TOKENS.alice,
    body: { text },
  });
}

describe('conversation verify and replay through the control plane', () => {
  it('verify and replay pass for an admin acting as themself and change nothing; a journal shorter than the status checkpoint fails rolled_back', async () => {
    const a = (api = await startApi({ replies: [textReply('first'), textReply('second')] }));
    const id = a.seed(ALICE.identity);
    expect((await post(a, id, 'one')).status).toBe(200);
    expect((await post(a, id, 'two')).status).toBe(200);
    await statusCaughtUp(a, id);
    const head = a.head(id);

    const verified = await cli(a, TOKENS.admin, [
      'conversation',
      'verify',
      id,
      '--actor',
      ADMIN.identity,
      '--json',
    ]);
    expect(verified.stderr).toBe('');
    expect(verified.code).toBe(0);
    expect(JSON.parse(verified.stdout)).toMatchObject({
      ok: true,
      events: head,
      checkpoint: { head },
      statusCheckpoint: expect.stringMatching(new RegExp(`^${String(head)}:[0-9a-f]{64}`)),
    });
    const replayed = await cli(a, TOKENS.admin, [
      'conversation',
      'replay',
      id,
      '--actor',
      ADMIN.identity,
      '--json',
    ]);
    expect(replayed.code).toBe(0);
    const report = JSON.parse(replayed.stdout) as { ok: boolean; turns: { ok: boolean }[] };
    expect(report.ok).toBe(true);
    expect(report.turns).toHaveLength(2);
    const text = await cli(a, TOKENS.admin, [
      'conversation',
      'replay',
      id,
      '--actor',
      ADMIN.identity,
    ]);
    expect(text.stdout).toContain('user: two');
    expect(text.stdout).toContain('assistant: second');
    expect(a.head(id)).toBe(head);

    // As if the journal lost its last entries: the status, kept outside it, saw 3 more.
    const conversation = a.turns.conversations.byUid(id)!;
    await a.turns.conversations.updateStatus(conversation, (current) => ({
      ...current.status,
      journal: { ...current.status!.journal!, head: head + 3 },
    }));
    const cut = await cli(a, TOKENS.admin, [
      'conversation',
      'verify',
      id,
      '--actor',
      ADMIN.identity,
      '--json',
    ]);
    expect(cut.code).toBe(1);
    expect(JSON.parse(cut.stdout)).toMatchObject({
      ok: false,
      failure: { position: head, reason: 'rolled_back' },
    });
    expect(a.head(id)).toBe(head);
  });

  it('refuses a member acting as themself, an admin acting as someone else, and a malformed actor; nothing is committed', async () => {
    const a = (api = await startApi({ replies: [textReply('first')] }));
    const id = a.seed(ALICE.identity);
    expect((await post(a, id, 'one')).status).toBe(200);
    const head = a.head(id);
    const exportAs = (token: string, actor: string): ReturnType<typeof call> =>
      call(a, 'GET', `/v1/conversations/${id}/export?actor=${encodeURIComponent(actor)}`, {
        token,
      });

    const owner = await exportAs(TOKENS.alice, ALICE.identity);
    expect(owner.status).toBe(403);
    expect(String(errorOf(owner).message)).toContain('only an admin');
    const impostor = await exportAs(TOKENS.admin, ALICE.identity);
    expect(impostor.status).toBe(403);
    expect(String(errorOf(impostor).message)).toContain('not one of your identities');
    expect((await exportAs(TOKENS.admin, 'not an identity')).status).toBe(400);
    expect(
      (await call(a, 'GET', `/v1/conversations/${id}/export`, { token: TOKENS.admin })).status,
    ).toBe(400);
    const repair = await call(a, 'POST', `/v1/conversations/${id}/repair`, {
      token: TOKENS.admin,
      body: { actor: ALICE.identity },
    });
    expect(repair.status).toBe(403);

    const member = await cli(a, TOKENS.alice, [
      'conversation',
      'replay',
      id,
      '--actor',
      ALICE.identity,
    ]);
    expect(member.code).toBe(3);
    expect(member.stderr).toContain('only an admin');
    expect(member.stderr).toContain('HTTP 403');
    const other = await cli(a, TOKENS.admin, [
      'conversation',
      'repair',
      id,
      '--actor',
      ALICE.identity,
    ]);
    expect(other.code).toBe(3);
    expect(other.stderr).toContain('not one of your identities');
    const usage = await cli(a, TOKENS.admin, ['conversation', 'verify', id, '--actor', 'root']);
    expect(usage.code).toBe(2);
    expect(usage.stderr).toContain('provider:scope:external_id or provider:external_id');
    const missing = await cli(a, TOKENS.admin, ['conversation', 'verify', id]);
    expect(missing.code).toBe(2);
    expect(a.head(id)).toBe(head);
  });
});

describe('conversation repair through the control plane', () => {
  it('excises an unreadable entry recorded with the actor; the next message works first time; verify ok, replay ok apart from the excised event', async () => {
    const a = (api = await startApi({ replies: [textReply('first'), textReply('second')] }));
    const id = a.seed(ALICE.identity);
    expect((await post(a, id, 'one')).status).toBe(200);
    const partition = `conv-${id}`;
    const store = a.turns.journal.store;
    const broken = store.head(partition).head;
    // 0xff is no TurnComplete: no reader can decode the entry (a broken writer, a bad disk).
    await store.append(
      partition,
      broken,
      [{ kind: EventKind.TurnComplete, payload: Uint8Array.of(0xff) }],
      {
        fencingToken: 1,
      },
    );
    const damaged = a.head(id);
    expect(
      (await call(a, 'GET', `/v1/conversations/${id}/transcript`, { token: TOKENS.alice })).status,
    ).toBe(500);

    const dry = await cli(a, TOKENS.admin, [
      'conversation',
      'repair',
      id,
      '--actor',
      ADMIN.identity,
      '--dry-run',
      '--json',
    ]);
    expect(dry.code).toBe(0);
    expect(JSON.parse(dry.stdout)).toMatchObject({
      dryRun: true,
      head: damaged,
      excised: [{ position: broken }],
    });
    expect(a.head(id)).toBe(damaged);

    const repaired = await cli(a, TOKENS.admin, [
      'conversation',
      'repair',
      id,
      '--actor',
      ADMIN.identity,
    ]);
    expect(repaired.code).toBe(0);
    expect(repaired.stdout).toContain(`position ${String(broken)}`);
    const excision = (await a.turns.journal.entries(partition)).find(
      (e) => e.kind === EventKind.Excision,
    );
    expect(Buffer.from(excision!.payload).toString('utf8')).toContain(ADMIN.identity);

    // The cached view predates the repair; the coordinator dropped it, so no retry is needed.
    const next = await post(a, id, 'two');
    expect(next.status).toBe(200);
    expect(next.json).toMatchObject({ status: 'complete', reply: 'second' });

    await statusCaughtUp(a, id);
    const verified = await cli(a, TOKENS.admin, [
      'conversation',
      'verify',
      id,
      '--actor',
      ADMIN.identity,
      '--json',
    ]);
    expect(verified.code).toBe(0);
    expect(JSON.parse(verified.stdout)).toMatchObject({ ok: true, excised: [broken] });
    const replayed = await cli(a, TOKENS.admin, [
      'conversation',
      'replay',
      id,
      '--actor',
      ADMIN.identity,
      '--json',
    ]);
    expect(replayed.code).toBe(0);
    expect(JSON.parse(replayed.stdout)).toMatchObject({
      ok: true,
      skipped: [{ position: broken }],
    });
  });
});

describe('conversation replay with approvals, through the control plane', () => {
  /** A conversation whose first turn ran the calculator after an admin approved it. */
  async function approvedTurn(a: TestApi): Promise<{ id: string; requestId: string }> {
    const id = a.seed(ALICE.identity);
    const paused = await post(a, id, 'what is 6 * 7?');
    const requestId = (paused.json as { approval: { requestId: string } }).approval.requestId;
    const approved = await call(a, 'POST', `/v1/conversations/${id}/approvals/${requestId}`, {
      token: TOKENS.admin,
      body: { decision: 'approve' },
    });
    expect(approved.status).toBe(200);
    expect(approved.json).toMatchObject({ status: 'complete', reply: 'It is 42.' });
    await keysRecorded(a, id);
    return { id, requestId };
  }
  const replay = (
    a: Pick<TestApi, 'base'>,
    id: string,
    ...flags: string[]
  ): ReturnType<typeof cli> =>
    cli(a, TOKENS.admin, ['conversation', 'replay', id, '--actor', ADMIN.identity, ...flags]);

  it('puts the approval key in the export header and replays with it, no --approval-key needed', async () => {
    const a = (api = await startApi({
      replies: [calculatorReply('6 * 7'), textReply('It is 42.')],
    }));
    const { id } = await approvedTurn(a);
    const head = a.head(id);
    const exported = await call(
      a,
      'GET',
      `/v1/conversations/${id}/export?actor=${encodeURIComponent(ADMIN.identity)}`,
      { token: TOKENS.admin },
    );
    expect(exported.status).toBe(200);
    const header = JSON.parse(exported.text.split('\n')[0]!) as Record<string, unknown>;
    expect(header).toMatchObject({
      approvalKeyId: a.turns.approvals.keyId,
      approvalPublicKey: Buffer.from(a.turns.approvals.publicKey).toString('base64'),
    });

    const text = await replay(a, id);
    expect(text.stderr).toBe('');
    expect(text.code).toBe(0);
    expect(text.stdout).toContain('approval: calculator approved');
    expect(text.stdout).toContain('assistant: It is 42.');
    expect(text.stdout).toContain(
      `approval key: ${a.turns.approvals.keyId}, from the export header (trusted because no --approval-key was pinned`,
    );
    const json = await replay(a, id, '--json');
    expect(JSON.parse(json.stdout)).toMatchObject({
      ok: true,
      approvalKey: { source: 'export-header', keyId: a.turns.approvals.keyId, mismatch: false },
    });
    // The same key pinned: used, and said to match.
    const hex = Buffer.from(a.turns.approvals.publicKey).toString('hex');
    const pinned = await replay(a, id, '--approval-key', hex);
    expect(pinned.code).toBe(0);
    expect(pinned.stdout).toContain(
      'pinned with --approval-key (the export header names the same key)',
    );
    expect(a.head(id)).toBe(head);
  });

  it('uses a pinned key that differs from the header, says so, and the approval no longer verifies (exit 1)', async () => {
    const a = (api = await startApi({
      replies: [calculatorReply('6 * 7'), textReply('It is 42.')],
    }));
    const { id } = await approvedTurn(a);
    const head = a.head(id);
    const other = generateKeyPairSync('ed25519').publicKey.export({ format: 'jwk' }).x!;
    const otherHex = Buffer.from(other, 'base64url').toString('hex');
    const run = await replay(a, id, '--approval-key', otherHex, '--json');
    expect(run.code).toBe(1);
    const report = JSON.parse(run.stdout) as {
      ok: boolean;
      approvalKey: { source: string; keyId: string; headerKeyId: string; mismatch: boolean };
    };
    expect(report.ok).toBe(false);
    expect(report.approvalKey).toMatchObject({
      source: 'pinned',
      headerKeyId: a.turns.approvals.keyId,
      mismatch: true,
    });
    expect(report.approvalKey.keyId).not.toBe(a.turns.approvals.keyId);
    const text = await replay(a, id, '--approval-key', otherHex);
    expect(text.stdout).toContain(
      `MISMATCH: the export header names another key, ${a.turns.approvals.keyId}`,
    );
    expect(text.stdout).toContain('DIVERGED');
    expect(a.head(id)).toBe(head);
  });

  it('runs --what-if over the fetched export as journal replay FILE --what-if does; a bad CHANGE is a usage error before any fetch', async () => {
    const a = (api = await startApi({
      replies: [calculatorReply('6 * 7'), textReply('It is 42.'), textReply('You are welcome.')],
    }));
    const { id, requestId } = await approvedTurn(a);
    expect((await post(a, id, 'thanks')).status).toBe(200);
    const head = a.head(id);
    const denied = await replay(a, id, '--what-if', `approval@${requestId}=deny`);
    expect(denied.stderr).toBe('');
    expect(denied.code).toBe(1);
    expect(denied.stdout).toContain(`what-if approval@${requestId}=deny on conversation ${id}`);
    expect(denied.stdout).toContain('the recorded run no longer follows at turn');
    expect(denied.stdout).toContain('tool calculator');
    const same = await replay(a, id, '--what-if', 'max-steps=8', '--json');
    expect(same.code).toBe(0);
    expect(JSON.parse(same.stdout)).toMatchObject({
      source: `conversation ${id}`,
      follows: true,
      approvalKey: { source: 'export-header' },
    });
    // --live goes on from the departure with the model the environment names.
    const messages = await MessagesApiServer.start({ respond: echoResponder });
    try {
      const live = await cli(
        a,
        TOKENS.admin,
        [
          'conversation',
          'replay',
          id,
          '--actor',
          ADMIN.identity,
          '--what-if',
          `approval@${requestId}=deny`,
          '--live',
          '--json',
        ],
        { ANTHROPIC_API_KEY: messages.apiKey, ANTHROPIC_BASE_URL: messages.url },
      );
      expect(live.stderr).toBe('');
      expect(live.code).toBe(1);
      expect(JSON.parse(live.stdout)).toMatchObject({
        follows: false,
        live: { outcome: 'completed', modelCalls: 1, toolCalls: [] },
      });
      expect(messages.requests).toHaveLength(1);
    } finally {
      await messages.close();
    }
    // Pointed at nothing: a fetch would fail with exit 3, so exit 2 shows none was tried.
    const bad = await replay({ ...a, base: 'http://127.0.0.1:9' }, id, '--what-if', 'nonsense=1');
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('--what-if nonsense=1: unknown change "nonsense"');
    const alone = await replay({ ...a, base: 'http://127.0.0.1:9' }, id, '--live');
    expect(alone.code).toBe(2);
    expect(alone.stderr).toContain('--live goes with --what-if CHANGE');
    expect(a.head(id)).toBe(head);
  });
});
describe('conversation resolve through the control plane', () => {
  /** An API whose conversation holds a quarantined turn (its side-effecting call broke mid-call). */
  async function quarantinedApi(): Promise<{ a: TestApi; id: string; turnId: string }> {
    const a = (api = await startApi({
      replies: [transferReply, textReply('refund done'), textReply('next one')],
      spec: { tools: { builtin: ['transfer'] } },
      extraTools: unknownFirstTransfer([]).extraTools,
    }));
    const id = a.seed(ALICE.identity);
    const answer = await post(a, id, 'refund 42');
    const { status, turnId } = answer.json as { status: string; turnId: string };
    expect(status).toBe('ambiguous');
    return { a, id, turnId };
  }

  it('refuses a wrong command line (exit 2), a member and an admin acting as someone else (exit 3), and bad bodies (400); nothing is committed', async () => {
    const { a, id, turnId } = await quarantinedApi();
    const head = a.head(id);
    const as = ['--actor', ADMIN.identity];
    for (const [args, says] of [
      [[turnId, ...as], 'exactly one of --ran'],
      [[turnId, '--ran', '--did-not-run', ...as], 'not both'],
      [[turnId, '--did-not-run', '--result', 'result.txt', ...as], '--result goes with --ran only'],
      [[turnId, '--did-not-run', '--transaction', '0x1', ...as], '--transaction goes with --ran'],
      [
        [turnId, '--ran', '--transaction', '0x1', '--result', 'r.txt', ...as],
        '--transaction and --result do not go together',
      ],
      [['--did-not-run', ...as], 'takes a conversation id and a turn id'],
      [[turnId, 'extra', '--did-not-run', ...as], 'got extra extra'],
      [[turnId, '--did-not-run'], '--actor is required'],
    ] as const) {
      const run = await cli(a, TOKENS.admin, ['conversation', 'resolve', id, ...args]);
      expect({ args, code: run.code, says: run.stderr.includes(says) }).toEqual({
        args,
        code: 2,
        says: true,
      });
    }
    const resolveAs = (token: string): ReturnType<typeof cli> =>
      cli(a, token, [
        'conversation',
        'resolve',
        id,
        turnId,
        '--did-not-run',
        '--actor',
        ALICE.identity,
      ]);
    const member = await resolveAs(TOKENS.alice);
    expect(member.code).toBe(3);
    expect(member.stderr).toContain('only an admin');
    expect(member.stderr).toContain('HTTP 403');
    const impostor = await resolveAs(TOKENS.admin);
    expect(impostor.code).toBe(3);
    expect(impostor.stderr).toContain('not one of your identities');
    const path = `/v1/conversations/${id}/turns/${turnId}/resolve`;
    for (const [body, field] of [
      [{ actor: ADMIN.identity, decision: 'maybe' }, 'decision'],
      [{ actor: ADMIN.identity, decision: 'ran', result: 'x', resultUnknown: true }, 'result'],
      [{ actor: ADMIN.identity, decision: 'ran' }, 'result'],
      [{ actor: ADMIN.identity, decision: 'did_not_run', resultUnknown: true }, 'resultUnknown'],
      [{ actor: ADMIN.identity, decision: 'did_not_run', transaction: '0x1' }, 'transaction'],
      [{ actor: ADMIN.identity, decision: 'ran', result: 'x', transaction: '0x1' }, 'transaction'],
      [{ actor: ADMIN.identity, decision: 'ran', transaction: '' }, 'transaction'],
      [{ actor: ADMIN.identity, decision: 'ran', transaction: 7 }, 'transaction'],
      [{ actor: ADMIN.identity, decision: 'did_not_run', turnId: 'turn_other' }, 'turnId'],
      [{ actor: ADMIN.identity, decision: 'did_not_run', force: true }, 'force'],
      [{ decision: 'did_not_run' }, 'actor'],
    ] as const) {
      const answer = await call(a, 'POST', path, { token: TOKENS.admin, body });
      const details = errorOf(answer).details as { field?: string } | undefined;
      expect({ body, status: answer.status, field: details?.field }).toEqual({
        body,
        status: 400,
        field,
      });
    }
    expect(a.head(id)).toBe(head);
  });

  it('resolves as ran with the result of a file (exit 0, a ResolveResult), refuses a second resolve (409), and the next message finishes the turn with it', async () => {
    const { a, id, turnId } = await quarantinedApi();
    const dir = await mkdtemp(join(tmpdir(), 'resolve-test-'));
    try {
      const file = join(dir, 'result.txt');
      await writeFile(file, 'refund R-42 sent');
      const run = await cli(a, TOKENS.admin, [
        'conversation',
        'resolve',
        id,
        turnId,
        '--ran',
        '--result',
        file,
        '--actor',
        ADMIN.identity,
        '--format',
        'json',
      ]);
      expect({ code: run.code, stderr: run.stderr }).toEqual({ code: 0, stderr: '' });
      const answer: unknown = JSON.parse(run.stdout);
      const document: unknown = JSON.parse(
        await readFile(join(__dirname, '..', '..', 'docs', 'api', 'openapi.json'), 'utf8'),
      );
      const template = '/v1/conversations/{conversationId}/turns/{turnId}/resolve';
      const schema = responseSchema(document, 'POST', template, 200);
      expect(checkSchema(document, schema, answer)).toEqual([]);
      expect(answer).toMatchObject({ turnId, decision: 'ran', resultUnknown: false });
      const head = a.head(id);
      const again = await cli(a, TOKENS.admin, [
        'conversation',
        'resolve',
        id,
        turnId,
        '--did-not-run',
        '--actor',
        ADMIN.identity,
      ]);
      expect(again.code).toBe(3);
      expect(again.stderr).toContain(`already resolved (ran, by ${ADMIN.identity})`);
      expect(again.stderr).toContain('HTTP 409');
      expect(a.head(id)).toBe(head);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
    const next = await post(a, id, 'and now?');
    expect(next.json).toMatchObject({ status: 'complete', reply: 'next one' });
    const transcript = await call(a, 'GET', `/v1/conversations/${id}/transcript`, {
      token: TOKENS.alice,
    });
    const turns = (transcript.json as { turns: { turnId: string; reply?: string }[] }).turns;
    expect(turns.find((t) => t.turnId === turnId)?.reply).toBe('refund done');
    const kinds = (await a.entries(id)).map((e) => e.kind);
    expect(kinds.filter((k) => k === 'turn_resolved')).toHaveLength(1);
    // Replay reports the turn complete, resolved by the admin, and checks both attempts.
    const report = await replayOf(a, id);
    expect(report.ok).toBe(true);
    expect(report.turns.find((t) => t.turnId === turnId)).toMatchObject({
      status: 'complete',
      attempts: 2,
      ok: true,
      resolutions: [{ decision: 'ran', actor: ADMIN.identity, resultUnknown: false }],
    });
    expect(report.turns.find((t) => t.turnId === turnId)?.note).toBeUndefined();
  });

  it('replay reports a did_not_run turn as resolved, not quarantined, and its retry as a normal turn', async () => {
    const a = (api = await startApi({
      replies: [transferReply, textReply('sent')],
      spec: { tools: { builtin: ['transfer'] } },
      extraTools: unknownFirstTransfer([{ content: 'ok', isError: false }]).extraTools,
    }));
    const id = a.seed(ALICE.identity);
    const first = await call(a, 'POST', `/v1/conversations/${id}/messages`, {
      token: TOKENS.alice,
      body: { text: 'refund 42', idempotencyKey: 'k-refund' },
    });
    const { turnId } = first.json as { turnId: string };
    const quarantined = await replayOf(a, id);
    expect(quarantined.turns[0]).toMatchObject({ turnId, status: 'quarantined', ok: true });
    const resolved = await call(a, 'POST', `/v1/conversations/${id}/turns/${turnId}/resolve`, {
      token: TOKENS.admin,
      body: { actor: ADMIN.identity, decision: 'did_not_run' },
    });
    expect(resolved.status).toBe(200);
    const waiting = await replayOf(a, id);
    expect(waiting.turns[0]).toMatchObject({
      turnId,
      status: 'resolved',
      ok: true,
      resolutions: [{ decision: 'did_not_run', actor: ADMIN.identity, caller: ADMIN.identity }],
    });
    expect(waiting.turns[0]?.note).toBeUndefined();
    const retried = await call(a, 'POST', `/v1/conversations/${id}/messages`, {
      token: TOKENS.alice,
      body: { text: 'refund 42', idempotencyKey: 'k-refund' },
    });
    expect(retried.json).toMatchObject({ turnId, status: 'complete', reply: 'sent' });
    const done = await replayOf(a, id);
    expect(done.ok).toBe(true);
    expect(done.turns[0]).toMatchObject({ turnId, status: 'complete', attempts: 2, ok: true });
    const text = await cli(a, TOKENS.admin, [
      'conversation',
      'replay',
      id,
      '--actor',
      ADMIN.identity,
    ]);
    expect(text.stdout).toContain(
      `resolved at ${String((resolved.json as { position: number }).position)} by ${ADMIN.identity}`,
    );
    expect(text.stdout).not.toContain('quarantined:');
  });
});

describe('conversation verify and replay pin the journal key the Conversation status recorded', () => {
  /**
   * An API whose export the test can take from a second state plane: the real store of
   * the turns, or a rogue one (another real store, its own key) holding a re-signed copy.
   */
  async function startWithRogue(): Promise<{
    a: TestApi;
    rogue: StoreJournal;
    serveRogue: (on: boolean) => void;
  }> {
    const rogue = await StoreJournal.open('polychrome/test-only/attacker-key');
    let useRogue = false;
    const box: { started?: TestApi } = {};
    const honest = (): TestApi => {
      if (box.started === undefined) throw new Error('the API has not started');
      return box.started;
    };
    const served = (): ForensicJournal => (useRogue ? rogue : honest().turns.journal);
    const started =
      (box.started =
      api =
        await startApi({
          replies: [textReply('first'), textReply('second')],
          forensics: new ConversationForensics({
            journal: {
              head: (partition, options) => served().head(partition, options),
              export: (partition, options) => served().export(partition, options),
              repair: (partition, request, options) => served().repair(partition, request, options),
              read: (partition, from, limit, options) =>
                served().read(partition, from, limit, options),
              erase: (partition, request, options) => served().erase(partition, request, options),
            },
            conversations: { byUid: (uid) => honest().turns.conversations.byUid(uid) },
            holder: {
              exclusive: (conversation, signal, work) =>
                honest().turns.coordinator.exclusive(conversation, signal, work),
            },
          }),
        }));
    rogues.push(rogue);
    return { a: started, rogue, serveRogue: (on) => (useRogue = on) };
  }
  const rogues: StoreJournal[] = [];
  afterEach(async () => {
    await Promise.all(rogues.splice(0).map((r) => r.close()));
  });

  /** Copies the journal into `to` batch by batch: the same events, sealed by `to`'s key. */
  async function resign(from: StoreJournal, to: StoreJournal, partition: string): Promise<void> {
    let events: NewJournalEvent[] = [];
    for (const entry of await from.entries(partition)) {
      if (entry.kind !== EventKind.SignedRoot) {
        events.push({ kind: entry.kind, payload: entry.payload });
        continue;
      }
      await to.append(partition, to.store.head(partition).head, events);
      events = [];
    }
  }

  const verify = (a: TestApi, id: string, ...flags: string[]): ReturnType<typeof cli> =>
    cli(a, TOKENS.admin, ['conversation', 'verify', id, '--actor', ADMIN.identity, ...flags]);
  const replay = (a: TestApi, id: string, ...flags: string[]): ReturnType<typeof cli> =>
    cli(a, TOKENS.admin, ['conversation', 'replay', id, '--actor', ADMIN.identity, ...flags]);

  it("records the state plane's key in the status, pins it without a flag, and refuses a journal re-signed with another key, naming both key ids", async () => {
    const { a, rogue, serveRogue } = await startWithRogue();
    const id = a.seed(ALICE.identity);
    expect((await post(a, id, 'one')).status).toBe(200);
    expect((await post(a, id, 'two')).status).toBe(200);
    await statusCaughtUp(a, id);
    const honestKey = a.turns.journal.publicKey;
    const honestId = journalKeyId(honestKey);
    const rogueId = journalKeyId(rogue.publicKey);
    expect(a.turns.conversations.byUid(id)?.status?.journal?.publicKeys).toEqual([
      { keyId: honestId, publicKey: Buffer.from(honestKey).toString('base64') },
    ]);

    const ok = await verify(a, id, '--json');
    expect(ok.code).toBe(0);
    expect(JSON.parse(ok.stdout)).toMatchObject({
      ok: true,
      trust: 'pinned',
      trustedKeyIds: [honestId],
      journalKey: {
        source: 'status',
        statusFrom: 'export-answer',
        keyIds: [honestId],
        statusKeyIds: [honestId],
      },
    });
    expect((await verify(a, id)).stdout).toContain(
      `journal key(s): ${honestId}, pinned from the Conversation status`,
    );
    const replayed = await replay(a, id, '--json');
    expect(replayed.code).toBe(0);
    expect(JSON.parse(replayed.stdout)).toMatchObject({
      ok: true,
      journalKey: { source: 'status', keyIds: [honestId] },
    });

    // The attack: the state plane serves the same events re-signed with a key of its own,
    // and its export header names that key.
    await resign(a.turns.journal, rogue, `conv-${id}`);
    serveRogue(true);
    const exported = await call(
      a,
      'GET',
      `/v1/conversations/${id}/export?actor=${encodeURIComponent(ADMIN.identity)}`,
      { token: TOKENS.admin },
    );
    expect(JSON.parse(exported.text.split('\n')[0]!)).toMatchObject({
      publicKeys: [{ keyId: rogueId }],
    });
    for (const flags of [[], ['--public-key', Buffer.from(honestKey).toString('hex')]]) {
      const failed = await verify(a, id, ...flags, '--json');
      expect(failed.code).toBe(1);
      const result = JSON.parse(failed.stdout) as {
        ok: boolean;
        failure: {
          position: number;
          reason: string;
          expected: string;
          found: string;
          message: string;
        };
      };
      expect(result.ok).toBe(false);
      // The first root (the end of the first batch) already fails.
      expect(result.failure).toMatchObject({
        reason: 'wrong_key',
        expected: honestId,
        found: rogueId,
      });
      expect(result.failure.message).toContain(honestId);
      expect(result.failure.message).toContain(rogueId);
      const refused = await replay(a, id, ...flags);
      expect(refused.code).toBe(3);
      expect(refused.stderr).toContain('(wrong_key)');
      expect(refused.stderr).toContain(honestId);
      expect(refused.stderr).toContain(rogueId);
    }
    const text = await verify(a, id);
    expect(text.stdout).toContain('(wrong_key)');
    expect(text.stdout).toContain(
      `journal key(s): ${honestId}, pinned from the Conversation status`,
    );

    // The right key passes the real journal when given with the flag.
    serveRogue(false);
    const flagged = await verify(
      a,
      id,
      '--public-key',
      Buffer.from(honestKey).toString('base64'),
      '--json',
    );
    expect(flagged.code).toBe(0);
    expect(JSON.parse(flagged.stdout)).toMatchObject({
      ok: true,
      journalKey: { source: 'flag', keyIds: [honestId], statusKeyIds: [honestId] },
    });
  });

  it('fails verify (no_pinned_key) and refuses replay when the status records no key and none is given; --public-key then works', async () => {
    const a = (api = await startApi({ replies: [textReply('first')] }));
    const id = a.seed(ALICE.identity);
    expect((await post(a, id, 'one')).status).toBe(200);
    await statusCaughtUp(a, id);
    await keysRecorded(a, id);
    // As a conversation from before keys were recorded.
    const conversation = a.turns.conversations.byUid(id)!;
    await a.turns.conversations.updateStatus(conversation, (current) => {
      const { publicKeys: _, ...journal } = current.status!.journal!;
      return { ...current.status, journal };
    });
    const failed = await verify(a, id, '--json');
    expect(failed.code).toBe(1);
    expect(JSON.parse(failed.stdout)).toMatchObject({
      ok: false,
      journalKey: null,
      failure: { reason: 'no_pinned_key' },
    });
    const refused = await replay(a, id);
    expect(refused.code).toBe(3);
    expect(refused.stderr).toContain('replay is refused');
    expect(refused.stderr).toContain('--public-key');
    const key = Buffer.from(a.turns.journal.publicKey).toString('hex');
    expect((await verify(a, id, '--public-key', key)).code).toBe(0);
    expect((await replay(a, id, '--public-key', key)).code).toBe(0);
    const bad = await verify(a, id, '--public-key', 'nope');
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('--public-key "nope" is not a raw ed25519 public key');
  });
});

/** `conversation replay --json` as the admin. */
async function replayOf(
  a: TestApi,
  id: string,
): Promise<{
  ok: boolean;
  events: number;
  turns: { turnId: string; status: string; note?: string; ok: boolean }[];
}> {
  await keysRecorded(a, id);
  const run = await cli(a, TOKENS.admin, [
    'conversation',
    'replay',
    id,
    '--actor',
    ADMIN.identity,
    '--json',
  ]);
  expect(run.stderr).toBe('');
  return JSON.parse(run.stdout) as Awaited<ReturnType<typeof replayOf>>;
}
