import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';

import {
  ADMIN,
  ALICE,
  TEST_NOW_MS,
  TOKENS,
  type StartApiOptions,
  type TestApi,
} from '../test/support/api-fixtures';
import {
  askReply,
  calculatorReply,
  textReply,
  transferReply,
  unknownFirstTransfer,
} from '../test/support/real-turns';
import {
  committedEvents,
  startApiStack,
  type ApiStack,
  type CommittedEvent,
} from '../test/support/api-stack';
import { readyStatus } from '../test/support/in-memory-conversations';
import { ExitCode } from './cli-support';
import { envOf, expectApiError, served } from './testdata/api-expectations';
import { runCaptured } from './testdata/captured-run';

/*
 * send, approve, answer and transcript: the `polychrome` CLI's own code (runCli, its HTTP
 * client) against the real public API on 127.0.0.1:0, over the real turn coordinator,
 * journal store and in-process harness running the scripted model. What is checked is
 * what a user sees (output, exit code, error messages) and what the journal committed.
 */

let stack: ApiStack | undefined;

afterEach(async () => {
  await stack?.api.close();
  stack = undefined;
});

/** Starts the API with `options` and a conversation of Alice's. */
async function start(
  options: Parameters<typeof startApiStack>[0] = {},
): Promise<ApiStack & { id: string }> {
  stack = await startApiStack(options);
  return { ...stack, id: stack.conversationId };
}

/** The committed events of `kind`. */
async function committed(api: TestApi, id: string, kind: string): Promise<CommittedEvent[]> {
  return (await committedEvents(api, id)).filter((e) => e.kind === kind);
}

/** The payload field `name` of an event, as the journal holds it. */
function field(event: CommittedEvent | undefined, name: string): unknown {
  const payload = event?.payload;
  return typeof payload === 'object' && payload !== null ? Reflect.get(payload, name) : undefined;
}

/** Sends `text` as Alice and returns the settled turn's JSON. */
async function sendJson(s: ApiStack, text: string): Promise<Record<string, unknown>> {
  const run = await runCaptured(['send', s.conversationId, text, '--json'], s.env);
  expect(run.stderr).toBe('');
  return JSON.parse(run.stdout) as Record<string, unknown>;
}

/** The request id of a paused turn's card. */
function cardOf(reply: Record<string, unknown>, card: 'approval' | 'question'): string {
  const value: unknown = reply[card];
  const requestId: unknown =
    typeof value === 'object' && value !== null ? Reflect.get(value, 'requestId') : undefined;
  if (typeof requestId !== 'string') throw new Error(`no ${card} card: ${JSON.stringify(reply)}`);
  return requestId;
}

const calculating: StartApiOptions = {
  replies: [calculatorReply('6 * 7'), textReply('It is 42.')],
};

describe('send', () => {
  it('posts the words as one message with the given key, prints the reply, and the journal has them', async () => {
    const s = await start({ replies: [textReply('Hello to you.')] });
    const run = await runCaptured(['send', s.id, 'hello', 'there', '--key', 'k-1'], s.env);
    expect(run).toEqual({ code: ExitCode.Ok, stdout: 'Hello to you.\n', stderr: '' });
    const [message] = await committed(s.api, s.id, 'message_received');
    expect(message?.payload).toMatchObject({
      text: 'hello there',
      idempotencyKey: 'k-1',
      attribution: { caller: ALICE.identity },
    });
    expect(field((await committed(s.api, s.id, 'turn_complete'))[0], 'text')).toBe('Hello to you.');
  });

  it('gets the same turn back for the same key, and commits nothing new', async () => {
    const s = await start({ replies: [textReply('Once.'), textReply('Twice.')] });
    const first = await runCaptured(['send', s.id, 'hi', '--key', 'k-same'], s.env);
    const head = s.api.head(s.id);
    const again = await runCaptured(['send', s.id, 'hi', '--key', 'k-same'], s.env);
    expect(first).toEqual({ code: ExitCode.Ok, stdout: 'Once.\n', stderr: '' });
    expect(again).toEqual(first);
    expect(s.api.head(s.id)).toBe(head);
    expect(await committed(s.api, s.id, 'message_received')).toHaveLength(1);
  });

  it('makes a random key per run and prints it with --json', async () => {
    const s = await start();
    const first = await runCaptured(['send', s.id, 'hi', '--json'], s.env);
    const second = await runCaptured(['send', s.id, 'hi', '--format', 'json'], s.env);
    expect(first.code).toBe(ExitCode.Ok);
    const one = JSON.parse(first.stdout) as Record<string, unknown>;
    const two = JSON.parse(second.stdout) as Record<string, unknown>;
    expect(one).toMatchObject({
      conversationId: s.id,
      status: 'complete',
      reply: 'reply 1',
      requestedAt: 0,
    });
    // requestedAt is the position of the turn's message: after the first turn's 8 events.
    expect(two).toMatchObject({ reply: 'reply 2', requestedAt: 8 });
    expect(one.idempotencyKey).toMatch(/^cli-[0-9a-f-]{36}$/u);
    expect(one.idempotencyKey).not.toBe(two.idempotencyKey);
    const keys = (await committed(s.api, s.id, 'message_received')).map((e) =>
      field(e, 'idempotencyKey'),
    );
    expect(keys).toEqual([one.idempotencyKey, two.idempotencyKey]);
  });

  it('prints the approval card and the exact commands that answer it', async () => {
    const s = await start(calculating);
    const run = await runCaptured(['send', s.id, 'please', 'calculate'], s.env);
    expect(run.code).toBe(ExitCode.Ok);
    const [request] = await committed(s.api, s.id, 'approval_request');
    const turnId = String(field(request, 'turnId'));
    const requestId = String(field(request, 'requestId'));
    expect(run.stdout).toBe(
      `Turn ${turnId} is waiting for approval.\n` +
        '  tool:      calculator\n' +
        '  args:      {"expression":"6 * 7"}\n' +
        `  reason:    ${String(field(request, 'reason'))}\n` +
        '  approver:  an admin\n' +
        `  request:   ${requestId}\n` +
        `approve:  polychrome approve ${s.id} ${requestId}\n` +
        `deny:     polychrome approve ${s.id} ${requestId} --deny\n`,
    );
    expect(run.stderr).toBe('');
  });

  it('repeats --api in the printed commands when it was given as a flag', async () => {
    const s = await start(calculating);
    const run = await runCaptured(['send', s.id, 'please calculate', '--api', s.api.base], {
      POLYCHROME_TOKEN: TOKENS.alice,
    });
    const requestId = String(
      field((await committed(s.api, s.id, 'approval_request'))[0], 'requestId'),
    );
    expect(run.stdout).toContain(
      `approve:  polychrome approve ${s.id} ${requestId} --api ${s.api.base}\n`,
    );
  });

  it('prints a question with the command that answers it', async () => {
    const s = await start({ replies: [askReply('Which cluster?')] });
    const run = await runCaptured(['send', s.id, 'restart it'], s.env);
    expect(run.code).toBe(ExitCode.Ok);
    const [question] = await committed(s.api, s.id, 'question_request');
    const requestId = String(field(question, 'requestId'));
    expect(run.stdout).toBe(
      `Turn ${String(field(question, 'turnId'))} asks: Which cluster?\n` +
        `  request:   ${requestId}\n` +
        `answer:   polychrome answer ${s.id} ${requestId} <your answer>\n`,
    );
  });

  it('prints the quarantine notice and exits 1 when a tool call broke mid-call', async () => {
    const s = await start({
      replies: [transferReply],
      spec: { tools: { builtin: ['transfer'] } },
      extraTools: unknownFirstTransfer([]).extraTools,
    });
    const run = await runCaptured(['send', s.id, 'pay 42'], s.env);
    expect(run.code).toBe(ExitCode.TurnQuarantined);
    const [ambiguous] = await committed(s.api, s.id, 'turn_ambiguous');
    expect(ambiguous).toBeDefined();
    expect(run.stdout).toBe(
      `Turn ${String(field(ambiguous, 'turnId'))} is QUARANTINED: the outcome of tool call ` +
        `${String(field(ambiguous, 'toolCallId'))} is unknown (${String(field(ambiguous, 'reason'))}).\n` +
        'The tool may or may not have run; it is not run again. An admin must resolve the turn ' +
        'before the conversation goes on.\n',
    );
  });

  it("exits 3 with the API's 503 and the command that retries the same turn, which then works", async () => {
    // The sandbox is not Ready yet: the API answers 503 unavailable.
    const s = await start({ sandboxWaitMs: 200, status: { phase: 'Pending' } });
    const run = await runCaptured(['send', s.id, 'what', 'now', '--key', 'k-9'], s.env);
    const retry = `polychrome send ${s.id} --key k-9 -- what now`;
    await expectApiError(s.api, run, {
      status: 503,
      code: 'unavailable',
      message: `the harness of conversation ${s.id} is not ready after 200 ms; retry with: ${retry}`,
    });

    // The sandbox comes up; the printed command gets the turn, and it is one turn.
    const conversation = s.api.turns.conversations.byUid(s.id);
    if (conversation === undefined) throw new Error('the conversation is gone');
    await s.api.turns.conversations.updateStatus(conversation, () =>
      readyStatus(s.api.turns.harness.endpoint),
    );
    const again = await runCaptured(retry.split(' ').slice(1), s.env);
    expect(again).toEqual({ code: ExitCode.Ok, stdout: 'reply 1\n', stderr: '' });
    const messages = await committed(s.api, s.id, 'message_received');
    expect(messages.map((m) => [field(m, 'text'), field(m, 'idempotencyKey')])).toEqual([
      ['what now', 'k-9'],
    ]);
  });
});

describe('approve and answer', () => {
  it('approves with a comment (an admin) and prints the next state of the turn', async () => {
    const s = await start(calculating);
    const requestId = cardOf(await sendJson(s, 'what is 6 * 7?'), 'approval');
    const run = await runCaptured(
      ['approve', s.id, requestId, '--comment', 'fine'],
      envOf(s.api, TOKENS.admin),
    );
    expect(run).toEqual({
      code: ExitCode.Ok,
      stdout: `Approved request ${requestId}.\nIt is 42.\n`,
      stderr: '',
    });
    const [response] = await committed(s.api, s.id, 'approval_response');
    expect(response?.payload).toMatchObject({
      requestId,
      decision: 'APPROVAL_DECISION_APPROVED',
      comment: 'fine',
      answeredBy: ADMIN.identity,
    });
    expect(field((await committed(s.api, s.id, 'tool_result'))[0], 'content')).toBe('42');
  });

  it('denies with --deny: the calculator does not run', async () => {
    const s = await start({
      replies: [calculatorReply('6 * 7'), textReply('I did not run the calculator.')],
    });
    const requestId = cardOf(await sendJson(s, 'what is 6 * 7?'), 'approval');
    const run = await runCaptured(
      ['approve', s.id, requestId, '--deny'],
      envOf(s.api, TOKENS.admin),
    );
    expect(run.stdout).toBe(`Denied request ${requestId}.\nI did not run the calculator.\n`);
    const [response] = await committed(s.api, s.id, 'approval_response');
    expect(field(response, 'decision')).toBe('APPROVAL_DECISION_DENIED');
    expect(field(response, 'comment')).toBeUndefined();
    expect((await committed(s.api, s.id, 'tool_result'))[0]?.payload).toMatchObject({
      denied: true,
    });
  });

  it('cancels with --cancel and a comment', async () => {
    const s = await start(calculating);
    const requestId = cardOf(await sendJson(s, 'what is 6 * 7?'), 'approval');
    const run = await runCaptured(
      ['approve', s.id, requestId, '--cancel', '--comment', 'stale'],
      envOf(s.api, TOKENS.admin),
    );
    expect(run).toEqual({
      code: ExitCode.Ok,
      stdout:
        `Cancelled request ${requestId}.\n` +
        `The approval ${requestId} for calculator was cancelled by ${ADMIN.identity}; the call did not run. Comment: stale\n`,
      stderr: '',
    });
    expect((await committed(s.api, s.id, 'request_cancelled'))[0]?.payload).toMatchObject({
      requestId,
      cancelledBy: ADMIN.identity,
      comment: 'stale',
    });
  });

  it("refuses the approval of the conversation's owner, who is no admin, and commits nothing", async () => {
    const s = await start(calculating);
    const requestId = cardOf(await sendJson(s, 'what is 6 * 7?'), 'approval');
    const head = s.api.head(s.id);
    const run = await runCaptured(['approve', s.id, requestId], s.env);
    await expectApiError(s.api, run, {
      status: 403,
      code: 'permission_denied',
      message: `approval ${requestId} must be answered by an admin; ${ALICE.identity} does not have the admin role`,
    });
    expect(s.api.head(s.id)).toBe(head);
  });

  it('refuses --deny with --cancel before any request', async () => {
    const s = await start();
    const run = await runCaptured(['approve', s.id, 'r-approve-1', '--deny', '--cancel'], s.env);
    expect(run.code).toBe(ExitCode.Usage);
    expect(run.stderr).toContain('approve takes --deny or --cancel, not both');
    expect(served(s.api)).toHaveLength(0);
  });

  it('exits 3 naming an unknown request', async () => {
    const s = await start();
    const run = await runCaptured(['approve', s.id, 'r-nope'], envOf(s.api, TOKENS.admin));
    await expectApiError(s.api, run, {
      status: 404,
      code: 'not_found',
      message: 'no approval r-nope in this conversation',
    });
  });

  it('answers a question with the words as one answer', async () => {
    const s = await start({ replies: [askReply('Which cluster?'), textReply('Restarting prod.')] });
    const requestId = cardOf(await sendJson(s, 'restart it'), 'question');
    const run = await runCaptured(['answer', s.id, requestId, 'the', 'prod', 'cluster'], s.env);
    expect(run).toEqual({ code: ExitCode.Ok, stdout: 'Restarting prod.\n', stderr: '' });
    expect((await committed(s.api, s.id, 'question_response'))[0]?.payload).toMatchObject({
      requestId,
      answer: 'the prod cluster',
      answeredBy: ALICE.identity,
    });
  });

  it('cancels a question with answer --cancel, and refuses text with it', async () => {
    const s = await start({ replies: [askReply('Which cluster?')] });
    const requestId = cardOf(await sendJson(s, 'restart it'), 'question');
    const admin = envOf(s.api, TOKENS.admin);
    const run = await runCaptured(
      ['answer', s.id, requestId, '--cancel', '--comment', 'wrong question'],
      admin,
    );
    expect(run).toEqual({
      code: ExitCode.Ok,
      stdout: `The question ${requestId} was cancelled by ${ADMIN.identity}. Comment: wrong question\n`,
      stderr: '',
    });
    expect((await committed(s.api, s.id, 'request_cancelled'))[0]?.payload).toMatchObject({
      requestId,
      comment: 'wrong question',
    });
    const before = served(s.api).length;
    const both = await runCaptured(['answer', s.id, requestId, 'prod', '--cancel'], admin);
    expect(both.code).toBe(ExitCode.Usage);
    expect(both.stderr).toContain('answer --cancel takes no answer text');
    expect(served(s.api)).toHaveLength(before);
  });
});

describe('transcript', () => {
  it('prints the turns, a paused one with its approve command', async () => {
    const s = await start({ replies: [textReply('It is 42.'), calculatorReply('7 * 8')] });
    await runCaptured(['send', s.id, 'what is 6 * 7?'], s.env);
    const requestId = cardOf(await sendJson(s, 'and 7 * 8?'), 'approval');
    const second = (await committed(s.api, s.id, 'message_received'))[1]?.position;
    const run = await runCaptured(['transcript', s.id], s.env);
    const when = new Date(TEST_NOW_MS).toISOString();
    expect(run).toEqual({
      code: ExitCode.Ok,
      stdout:
        `conversation ${s.id}: 2 turns (journal head ${String(s.api.head(s.id))})\n` +
        `[0] ${ALICE.identity} (${when}): what is 6 * 7?\n` +
        '  agent: It is 42.\n' +
        `[${String(second)}] ${ALICE.identity} (${when}): and 7 * 8?\n` +
        `  waiting for approval: calculator {"expression":"7 * 8"} (request ${requestId}): ` +
        `polychrome approve ${s.id} ${requestId}\n`,
      stderr: '',
    });
  });

  it('prints the API body with --json', async () => {
    const s = await start();
    await runCaptured(['send', s.id, 'hi'], s.env);
    const run = await runCaptured(['transcript', s.id, '--json'], s.env);
    const body = JSON.parse(run.stdout) as { head: number; turns: { reply?: string }[] };
    expect(body.head).toBe(s.api.head(s.id));
    expect(body.turns.map((t) => t.reply)).toEqual(['reply 1']);
  });
});

describe('usage errors', () => {
  let shared: ApiStack;
  beforeAll(async () => {
    shared = await startApiStack();
  });
  afterAll(async () => {
    await shared.api.close();
  });

  it.each([
    [['send', '$ID'], 'send needs the message text after the conversation id'],
    [['send', 'hello', 'hi'], '"hello" is not a conversation id'],
    [['send', '$ID', 'hi', '--key', 'has space'], '--key must be 1 to 128 of'],
    [['stream', '$ID', '--since', '1', '--last-event-id', '2'], 'not both'],
    [['stream', '$ID', '--since=-1'], '--since must be a journal position'],
    [['approve', '$ID'], 'approve needs the request id'],
    [
      ['approve', '$ID', 'r-1', 'extra'],
      'approve takes a conversation id and a request id, got extra extra',
    ],
    [['answer', '$ID', 'q-1'], 'answer needs the answer text'],
    [['transcript', '$ID', '--format', 'yaml'], '--format must be json or text, got "yaml"'],
    [['transcript', '$ID', '--json', '--format', 'text'], '--json means --format json'],
    [['transcript', '$ID', '--api', 'localhost:8080'], '--api must be an http or https URL'],
  ])('%p is a usage error and sends nothing', async (args, message) => {
    const run = await runCaptured(
      args.map((a) => (a === '$ID' ? shared.conversationId : a)),
      shared.env,
    );
    expect(run.code).toBe(ExitCode.Usage);
    expect(run.stderr).toContain(message);
    expect(served(shared.api)).toHaveLength(0);
  });
});
