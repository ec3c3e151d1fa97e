/*
 * `polychrome conversation erase` end to end over the real turn coordinator and the real
 * LevelDB store (test/support/api-fixtures.ts): the CLI against the public API, the
 * control plane holding the conversation, the state plane's store erasing; then the
 * transcript, the agent's history, the export verified with the pure verifier, and the
 * next turn. And the attacks: a member, the owner, an admin acting as someone else.
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Writable } from 'node:stream';

import { afterEach, describe, expect, it } from '@jest/globals';

import { runCli } from '../../cli/run-cli';
import { EventKind } from '../../common/event-kinds';
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
import { checkSchema, responseSchema } from '../../test/support/openapi-check';
import { textReply } from '../../test/support/real-turns';

let api: TestApi | undefined;
afterEach(async () => {
  await api?.close();
  api = undefined;
});

async function cli(
  a: Pick<TestApi, 'base'>,
  token: string,
  args: readonly string[],
): Promise<{ code: number; stdout: string; stderr: string }> {
  const chunks = { out: [] as string[], err: [] as string[] };
  const sink = (into: string[]): Writable =>
    new Writable({
      write(chunk: Buffer, _encoding, done) {
        into.push(chunk.toString('utf8'));
        done();
      },
    });
  const code = await runCli([...args, '--api', a.base, '--token', token], {
    stdout: sink(chunks.out),
    stderr: sink(chunks.err),
  });
  return { code, stdout: chunks.out.join(''), stderr: chunks.err.join('') };
}

const SECRET = 'my card is 4111 1111 1111 1111';

/** A conversation with two complete turns; returns its id and the first message's position. */
async function twoTurns(a: TestApi): Promise<{ id: string; first: number; answer: number }> {
  const id = a.seed(ALICE.identity);
  for (const text of [SECRET, 'and now?']) {
    const posted = await call(a, 'POST', `/v1/conversations/${id}/messages`, {
      token: TOKENS.alice,
      body: { text },
    });
    expect(posted.status).toBe(200);
  }
  const entries = await a.turns.journal.entries(`conv-${id}`);
  const first = entries.findIndex((e) => e.kind === EventKind.MessageReceived);
  const answer = entries.findIndex((e) => e.kind === EventKind.TurnComplete);
  return { id, first, answer };
}

describe('conversation erase', () => {
  it('erases a message and its answer: the transcript shows them erased, the export verifies, the conversation goes on', async () => {
    const a = (api = await startApi({
      replies: [textReply('noted your card'), textReply('second'), textReply('third')],
    }));
    const { id, first, answer } = await twoTurns(a);
    // The status checkpoint and keys the verify below pins, recorded before the erasure.
    await pollUntil(
      'status.journal at the head',
      () =>
        a.turns.conversations.byUid(id)?.status?.journal?.head === a.head(id) ? true : undefined,
      10_000,
    );
    const args = ['conversation', 'erase', id, String(first), String(answer)];
    const asAdmin = ['--actor', ADMIN.identity, '--reason', 'erasure request 17'];

    const dry = await cli(a, TOKENS.admin, [...args, ...asAdmin, '--dry-run', '--json']);
    expect(dry.stderr).toBe('');
    expect(JSON.parse(dry.stdout)).toMatchObject({ dryRun: true });
    expect((await a.turns.journal.entries(`conv-${id}`))[first]?.excised).toBeUndefined();

    const done = await cli(a, TOKENS.admin, [...args, ...asAdmin, '--json']);
    expect(done.stderr).toBe('');
    expect(done.code).toBe(0);
    const result: unknown = JSON.parse(done.stdout);
    const document: unknown = JSON.parse(
      await readFile(join(__dirname, '..', '..', 'docs', 'api', 'openapi.json'), 'utf8'),
    );
    const template = '/v1/conversations/{conversationId}/erase';
    const schema = responseSchema(document, 'POST', template, 200);
    expect(checkSchema(document, schema, result)).toEqual([]);
    expect(result).toMatchObject({
      actor: ADMIN.identity,
      dryRun: false,
      erased: [
        { position: first, kind: 'message_received' },
        { position: answer, kind: 'turn_complete' },
      ],
    });

    const transcript = await call(a, 'GET', `/v1/conversations/${id}/transcript`, {
      token: TOKENS.alice,
    });
    const turns = (transcript.json as { turns: { user: { text: string }; reply?: string }[] })
      .turns;
    expect(turns.map((t) => [t.user.text, t.reply])).toEqual([
      ['[erased]', '[erased]'],
      ['and now?', 'second'],
    ]);
    expect(transcript.text).not.toContain('4111');

    // The export holds no trace of the content, and verifies with the pure verifier.
    const verified = await cli(a, TOKENS.admin, [
      'conversation',
      'verify',
      id,
      '--actor',
      ADMIN.identity,
      '--json',
    ]);
    expect(verified.stderr).toBe('');
    expect(JSON.parse(verified.stdout)).toMatchObject({
      ok: true,
      excised: [first, answer],
      erased: [first, answer],
    });
    const exported = await call(
      a,
      'GET',
      `/v1/conversations/${id}/export?actor=${encodeURIComponent(ADMIN.identity)}`,
      { token: TOKENS.admin },
    );
    expect(exported.status).toBe(200);
    const payloads = exported.text
      .trimEnd()
      .split('\n')
      .slice(1)
      .map((line) => JSON.parse(line) as { payload?: string; excised?: boolean });
    expect(payloads.filter((l) => l.excised === true)).toHaveLength(2);
    const bytes = payloads.map((l) => Buffer.from(l.payload ?? '', 'base64').toString('latin1'));
    expect(bytes.join('')).not.toContain('4111');

    // The conversation takes turns; the erased turn is not in the agent's history.
    const next = await call(a, 'POST', `/v1/conversations/${id}/messages`, {
      token: TOKENS.alice,
      body: { text: 'third?' },
    });
    expect(next.status).toBe(200);
    expect(next.json).toMatchObject({ reply: 'third' });
  }, 30_000);

  it.each([
    ['a member who owns the conversation', () => TOKENS.alice, () => ALICE.identity],
    ['another member', () => TOKENS.bob, () => 'email:bob@example.com'],
    ['an admin acting as someone else', () => TOKENS.admin, () => ALICE.identity],
  ])('refuses %s and erases nothing', async (_name, token, actor) => {
    const a = (api = await startApi({ replies: [textReply('one'), textReply('two')] }));
    const { id, first } = await twoTurns(a);
    const head = a.head(id);
    const answer = await call(a, 'POST', `/v1/conversations/${id}/erase`, {
      token: token(),
      body: { actor: actor(), positions: [first], reason: 'cover tracks' },
    });
    expect(answer.status).toBe(403);
    expect(errorOf(answer)).toMatchObject({ code: 'permission_denied' });
    expect(a.head(id)).toBe(head);
    expect((await a.turns.journal.entries(`conv-${id}`))[first]?.kind).toBe('message_received');
  });

  it('refuses a structural entry and bad bodies, naming what is wrong', async () => {
    const a = (api = await startApi({ replies: [textReply('one'), textReply('two')] }));
    const { id } = await twoTurns(a);
    const head = a.head(id);
    const entries = await a.turns.journal.entries(`conv-${id}`);
    const root = entries.findIndex((e) => e.kind === EventKind.SignedRoot);
    const path = `/v1/conversations/${id}/erase`;
    const body = { actor: ADMIN.identity, reason: 'r' };
    const refused = await call(a, 'POST', path, {
      token: TOKENS.admin,
      body: { ...body, positions: [root] },
    });
    expect(errorOf(refused)).toMatchObject({ code: 'failed_precondition' });
    expect(String(errorOf(refused).message)).toContain(
      `position ${String(root)} cannot be erased: it is a "signed_root" entry`,
    );
    for (const [bad, field] of [
      [{ ...body, positions: [] }, 'positions'],
      [{ ...body, positions: [1.5] }, 'positions'],
      [{ actor: ADMIN.identity, positions: [0] }, 'reason'],
      [{ ...body, positions: [0], extra: 1 }, 'extra'],
    ] as const) {
      const answer = await call(a, 'POST', path, { token: TOKENS.admin, body: bad });
      expect([field, answer.status]).toEqual([field, 400]);
      expect(errorOf(answer)).toMatchObject({ details: { field } });
    }
    expect(a.head(id)).toBe(head);
  });
});
