import { once } from 'node:events';
import {
  createServer,
  type IncomingHttpHeaders,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from 'node:http';
import type { AddressInfo } from 'node:net';
import { PassThrough } from 'node:stream';

import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';

import { ExitCode, runCli, USAGE } from './run-cli';

/*
 * The conversation commands against a real HTTP server on loopback that speaks the public
 * API as docs/api.md documents it: bearer tokens, {error: {code, message}} bodies,
 * Idempotency-Key, and an SSE stream whose ids are journal positions and that starts
 * after Last-Event-ID. The stream's connections follow a script (drop, shutdown, error)
 * to prove the reconnects.
 */

const TOKEN = `pcs_${'a'.repeat(43)}`;
const CONV = '0b5c3a9e-4f0d-4d0a-9a52-6f1e2b7c8d90';
const UNKNOWN_CONV = '11111111-2222-4333-8444-555555555555';

interface Seen {
  readonly method: string;
  readonly path: string;
  readonly query: URLSearchParams;
  readonly headers: IncomingHttpHeaders;
  readonly body: unknown;
}

/** What one stream connection does after sending events up to (not including) `until`. */
type StreamStep =
  | { readonly until: number; readonly then: 'drop'; readonly delta?: string }
  | { readonly until: number; readonly then: 'shutdown' }
  | { readonly until: number; readonly then: 'error'; readonly code: string }
  | { readonly until: number; readonly then: 'hold' };

const JOURNAL: readonly { kind: string; payload: unknown }[] = [
  {
    kind: 'message_received',
    payload: {
      turnId: 't1',
      idempotencyKey: 'k1',
      text: 'what is\n6 * 7?',
      attribution: { caller: 'dev:you' },
    },
  },
  { kind: 'turn_dispatched', payload: { turnId: 't1', attempt: 1, leaseHolder: 'cp-0' } },
  {
    kind: 'model_call',
    payload: {
      turnId: 't1',
      step: 1,
      model: 'scripted-demo',
      content: [
        { text: 'Let me work that out.' },
        { toolUse: { toolCallId: 'c1', name: 'calculator', argsJson: '{"expression":"6 * 7"}' } },
      ],
      stopReason: 'tool_use',
    },
  },
  {
    kind: 'tool_call',
    payload: {
      turnId: 't1',
      step: 1,
      toolCallId: 'c1',
      toolName: 'calculator',
      argsJson: '{"expression":"6 * 7"}',
    },
  },
  { kind: 'tool_result', payload: { turnId: 't1', toolCallId: 'c1', content: '42' } },
  { kind: 'turn_complete', payload: { turnId: 't1', text: 'The answer is 42.', steps: 2 } },
  { kind: 'signed_root', payload: { leafCount: '6', keyId: 'abcd1234' } },
];

const APPROVAL_CARD = {
  requestId: 'r-approve-1',
  toolCallId: 'c1',
  toolName: 'calculator',
  args: { expression: '6 * 7' },
  argsSha256: 'a'.repeat(64),
  reason: 'calculator requires approval',
  requiredApprover: '',
};

class FakeApi {
  readonly requests: Seen[] = [];
  /** One step per stream connection, in order; the last one repeats. */
  streamPlan: StreamStep[] = [{ until: JOURNAL.length, then: 'hold' }];
  private readonly server: Server;
  private readonly open = new Set<ServerResponse>();
  private streams = 0;
  private nextRequestId = 1;

  constructor() {
    this.server = createServer((request, response) => {
      void this.handle(request, response);
    });
  }

  get url(): string {
    return `http://127.0.0.1:${String((this.server.address() as AddressInfo).port)}`;
  }

  get streamRequests(): Seen[] {
    return this.requests.filter((r) => r.path.endsWith('/stream'));
  }

  async start(): Promise<void> {
    this.server.listen(0, '127.0.0.1');
    await once(this.server, 'listening');
  }

  reset(): void {
    this.requests.length = 0;
    this.streams = 0;
    this.nextRequestId = 1;
    this.streamPlan = [{ until: JOURNAL.length, then: 'hold' }];
    for (const response of this.open) response.destroy();
    this.open.clear();
  }

  async close(): Promise<void> {
    for (const response of this.open) response.destroy();
    this.server.closeAllConnections();
    this.server.close();
    await once(this.server, 'close');
  }

  private async handle(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const url = new URL(request.url ?? '/', 'http://x');
    let text = '';
    for await (const chunk of request) text += String(chunk);
    const seen: Seen = {
      method: request.method ?? '',
      path: url.pathname,
      query: url.searchParams,
      headers: request.headers,
      body: text === '' ? undefined : JSON.parse(text),
    };
    this.requests.push(seen);
    response.setHeader('x-request-id', `req-${String(this.nextRequestId++)}`);
    if (request.headers.authorization !== `Bearer ${TOKEN}`) {
      return this.error(
        response,
        401,
        'unauthenticated',
        'the session token is unknown, expired or revoked; sign in again',
      );
    }
    const match =
      /^\/v1\/conversations\/([^/]+)\/(messages|transcript|stream|approvals|questions)(?:\/([^/]+))?$/u.exec(
        url.pathname,
      );
    if (match === null) return this.error(response, 404, 'not_found', `no route ${url.pathname}`);
    const [, id, route, requestId] = match;
    if (id !== CONV)
      return this.error(response, 404, 'not_found', `conversation ${String(id)} does not exist`);
    const body = (seen.body ?? {}) as Record<string, unknown>;
    switch (route) {
      case 'messages':
        return this.message(response, body);
      case 'approvals':
        if (requestId !== APPROVAL_CARD.requestId) {
          return this.error(
            response,
            404,
            'not_found',
            `no approval request ${String(requestId)} in this conversation`,
          );
        }
        return this.json(
          response,
          200,
          this.reply(
            't1',
            body.decision === 'deny'
              ? { reply: 'I did not run the calculator.' }
              : body.decision === 'cancel'
                ? { reply: 'The approval r-approve-1 for calculator was cancelled by dev:admin.' }
                : { reply: 'The answer is 42.' },
          ),
        );
      case 'questions':
        return this.json(
          response,
          200,
          this.reply('t2', {
            reply:
              body.cancel === true
                ? 'The question q-1 was cancelled by dev:admin.'
                : `Thanks, noted: ${String(body.answer)}`,
          }),
        );
      case 'transcript':
        return this.json(response, 200, {
          conversationId: CONV,
          head: 14,
          turns: [
            {
              turnId: 't1',
              position: 0,
              user: {
                text: 'what is 6 * 7?',
                caller: 'dev:you',
                receivedAtMs: Date.UTC(2026, 0, 2, 3, 4, 5),
              },
              status: 'complete',
              reply: 'The answer is 42.',
            },
            {
              turnId: 't2',
              position: 8,
              user: {
                text: 'and 7 * 8?',
                caller: 'dev:you',
                receivedAtMs: Date.UTC(2026, 0, 2, 3, 5, 0),
              },
              status: 'paused',
              approval: { ...APPROVAL_CARD, requestId: 'r-2', args: { expression: '7 * 8' } },
            },
          ],
        });
      default:
        return this.stream(request, response, seen);
    }
  }

  private reply(turnId: string, fields: Record<string, unknown>): Record<string, unknown> {
    return { conversationId: CONV, turnId, status: 'complete', requestedAt: 0, ...fields };
  }

  private message(response: ServerResponse, body: Record<string, unknown>): void {
    const key = String(body.idempotencyKey);
    response.setHeader('idempotency-key', key);
    switch (body.text) {
      case 'please calculate':
        return this.json(
          response,
          200,
          this.reply('t1', { status: 'paused', approval: APPROVAL_CARD }),
        );
      case 'ask me':
        return this.json(
          response,
          200,
          this.reply('t2', {
            status: 'paused',
            question: { requestId: 'q-1', question: 'Which cluster?' },
          }),
        );
      case 'risky':
        return this.json(
          response,
          200,
          this.reply('t3', {
            status: 'ambiguous',
            ambiguous: { toolCallId: 'c9', reason: 'the harness died during the call' },
          }),
        );
      case 'fail':
        return this.error(
          response,
          503,
          'unavailable',
          'the harness of this conversation cannot be reached; retry with the same idempotency key',
        );
      default:
        return this.json(
          response,
          200,
          this.reply('t4', { reply: `You said: ${String(body.text)}` }),
        );
    }
  }

  private stream(request: IncomingMessage, response: ServerResponse, seen: Seen): void {
    const header = request.headers['last-event-id'];
    const since = seen.query.get('since');
    const from =
      typeof header === 'string' && header !== ''
        ? Number(header) + 1
        : since === null
          ? 0
          : Number(since);
    const step = this.streamPlan[Math.min(this.streams, this.streamPlan.length - 1)];
    this.streams += 1;
    if (step === undefined) throw new Error('no stream plan');
    response.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8' });
    response.write('retry: 10\n\n');
    for (let position = from; position < Math.min(step.until, JOURNAL.length); position++) {
      const event = JOURNAL[position]!;
      response.write(
        `id: ${String(position)}\nevent: ${event.kind}\ndata: ${JSON.stringify({ position, ...event })}\n\n`,
      );
    }
    switch (step.then) {
      case 'drop':
        if (step.delta !== undefined) {
          response.write(
            `event: delta\ndata: ${JSON.stringify({ turnId: 't1', step: 2, text: step.delta })}\n\n`,
          );
        }
        // A half-written event too: the client must not keep it for the next connection.
        response.write('id: 99\nevent: tool_call\ndata: {"posi');
        setTimeout(() => response.socket?.destroy(), 20);
        return;
      case 'shutdown':
        response.end(
          `event: shutdown\ndata: ${JSON.stringify({ conversationId: CONV, reason: 'replica stopping' })}\n\n`,
        );
        return;
      case 'error':
        response.end(
          `event: error\ndata: ${JSON.stringify({ error: { code: step.code, message: `stream failed: ${step.code}` } })}\n\n`,
        );
        return;
      case 'hold':
        response.write(': keep-alive\n\n');
        this.open.add(response);
        response.once('close', () => this.open.delete(response));
        return;
    }
  }

  private json(response: ServerResponse, status: number, body: unknown): void {
    response.writeHead(status, { 'content-type': 'application/json' });
    response.end(JSON.stringify(body));
  }

  private error(response: ServerResponse, status: number, code: string, message: string): void {
    if (status === 401) response.setHeader('www-authenticate', 'Bearer realm="polychrome"');
    this.json(response, status, { error: { code, message } });
  }
}

interface Captured {
  readonly code: ExitCode;
  readonly stdout: string;
  readonly stderr: string;
}

/** A command run whose output can be watched while it runs. */
interface Running {
  readonly done: Promise<Captured>;
  stdout(): string;
  stderr(): string;
  stop(): void;
}

function start(args: readonly string[], env: Record<string, string>): Running {
  const stdout = new PassThrough();
  const stderr = new PassThrough();
  const controller = new AbortController();
  let out = '';
  let err = '';
  stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
  stderr.on('data', (chunk: Buffer) => (err += chunk.toString()));
  const done = runCli(args, { stdout, stderr, signal: controller.signal }, env).then((code) => ({
    code,
    stdout: out,
    stderr: err,
  }));
  return { done, stdout: () => out, stderr: () => err, stop: () => controller.abort() };
}

let api: FakeApi;
let env: Record<string, string>;
let closedPortUrl: string;

beforeAll(async () => {
  api = new FakeApi();
  await api.start();
  env = { POLYCHROME_API_URL: api.url, POLYCHROME_TOKEN: TOKEN };
  const probe = createServer();
  probe.listen(0, '127.0.0.1');
  await once(probe, 'listening');
  closedPortUrl = `http://127.0.0.1:${String((probe.address() as AddressInfo).port)}`;
  probe.close();
  await once(probe, 'close');
});

afterEach(() => api.reset());

afterAll(async () => {
  await api.close();
});

function cli(args: readonly string[], withEnv: Record<string, string> = env): Promise<Captured> {
  return start(args, withEnv).done;
}

describe('send', () => {
  it('posts the words as one message with the given key and prints the reply', async () => {
    const run = await cli(['send', CONV, 'hello', 'there', '--key', 'k-1']);
    expect(run).toEqual({ code: ExitCode.Ok, stdout: 'You said: hello there\n', stderr: '' });
    expect(api.requests).toHaveLength(1);
    const [request] = api.requests;
    expect(request?.method).toBe('POST');
    expect(request?.path).toBe(`/v1/conversations/${CONV}/messages`);
    expect(request?.headers.authorization).toBe(`Bearer ${TOKEN}`);
    expect(request?.headers['content-type']).toBe('application/json');
    expect(request?.body).toEqual({ text: 'hello there', idempotencyKey: 'k-1' });
  });

  it('makes a random key per run and prints it with --json', async () => {
    const first = await cli(['send', CONV, 'hi', '--json']);
    const second = await cli(['send', CONV, 'hi', '--format', 'json']);
    expect(first.code).toBe(ExitCode.Ok);
    const one = JSON.parse(first.stdout) as Record<string, unknown>;
    const two = JSON.parse(second.stdout) as Record<string, unknown>;
    expect(one).toMatchObject({
      conversationId: CONV,
      status: 'complete',
      reply: 'You said: hi',
      requestedAt: 0,
    });
    expect(one.idempotencyKey).toMatch(/^cli-[0-9a-f-]{36}$/u);
    const sent = api.requests.map((r) => (r.body as Record<string, unknown>).idempotencyKey);
    expect(sent).toEqual([one.idempotencyKey, two.idempotencyKey]);
    expect(one.idempotencyKey).not.toBe(two.idempotencyKey);
  });

  it('prints the approval card and the exact commands that answer it', async () => {
    const run = await cli(['send', CONV, 'please', 'calculate']);
    expect(run.code).toBe(ExitCode.Ok);
    expect(run.stdout).toBe(
      'Turn t1 is waiting for approval.\n' +
        '  tool:      calculator\n' +
        '  args:      {"expression":"6 * 7"}\n' +
        '  reason:    calculator requires approval\n' +
        '  approver:  an admin\n' +
        '  request:   r-approve-1\n' +
        `approve:  polychrome approve ${CONV} r-approve-1\n` +
        `deny:     polychrome approve ${CONV} r-approve-1 --deny\n`,
    );
  });

  it('repeats --api in the printed commands when it was given as a flag', async () => {
    const run = await cli(['send', CONV, 'please calculate', '--api', api.url], {
      POLYCHROME_TOKEN: TOKEN,
    });
    expect(run.stdout).toContain(
      `approve:  polychrome approve ${CONV} r-approve-1 --api ${api.url}\n`,
    );
  });

  it('prints a question with the command that answers it', async () => {
    const run = await cli(['send', CONV, 'ask me']);
    expect(run.code).toBe(ExitCode.Ok);
    expect(run.stdout).toBe(
      'Turn t2 asks: Which cluster?\n' +
        '  request:   q-1\n' +
        `answer:   polychrome answer ${CONV} q-1 <your answer>\n`,
    );
  });

  it('prints the quarantine notice and exits 1', async () => {
    const run = await cli(['send', CONV, 'risky']);
    expect(run.code).toBe(ExitCode.TurnQuarantined);
    expect(run.stdout).toContain(
      'Turn t3 is QUARANTINED: the outcome of tool call c9 is unknown (the harness died during the call).',
    );
    expect(run.stdout).toContain('An admin must resolve the turn');
  });

  it("exits 3 with the API's message and the command that retries the same turn", async () => {
    const run = await cli(['send', CONV, 'fail', '--key', 'k-9']);
    expect(run.code).toBe(ExitCode.Error);
    expect(run.stdout).toBe('');
    expect(run.stderr).toBe(
      'polychrome: the harness of this conversation cannot be reached; retry with the same ' +
        `idempotency key; retry with: polychrome send ${CONV} --key k-9 -- fail ` +
        '(unavailable, HTTP 503, request id req-1)\n',
    );
  });
});

describe('approve and answer', () => {
  it('approves with a comment and prints the next state of the turn', async () => {
    const run = await cli(['approve', CONV, 'r-approve-1', '--comment', 'fine']);
    expect(run).toEqual({
      code: ExitCode.Ok,
      stdout: 'Approved request r-approve-1.\nThe answer is 42.\n',
      stderr: '',
    });
    expect(api.requests[0]?.path).toBe(`/v1/conversations/${CONV}/approvals/r-approve-1`);
    expect(api.requests[0]?.body).toEqual({ decision: 'approve', comment: 'fine' });
  });

  it('denies with --deny', async () => {
    const run = await cli(['approve', CONV, 'r-approve-1', '--deny']);
    expect(run.stdout).toBe('Denied request r-approve-1.\nI did not run the calculator.\n');
    expect(api.requests[0]?.body).toEqual({ decision: 'deny' });
  });

  it('cancels with --cancel and a comment', async () => {
    const run = await cli(['approve', CONV, 'r-approve-1', '--cancel', '--comment', 'stale']);
    expect(run.stdout).toBe(
      'Cancelled request r-approve-1.\nThe approval r-approve-1 for calculator was cancelled by dev:admin.\n',
    );
    expect(api.requests[0]?.body).toEqual({ decision: 'cancel', comment: 'stale' });
  });

  it('refuses --deny with --cancel before any request', async () => {
    const run = await cli(['approve', CONV, 'r-approve-1', '--deny', '--cancel']);
    expect(run.code).toBe(ExitCode.Usage);
    expect(run.stderr).toContain('approve takes --deny or --cancel, not both');
    expect(api.requests).toHaveLength(0);
  });

  it('cancels a question with answer --cancel, and refuses text with it', async () => {
    const run = await cli(['answer', CONV, 'q-1', '--cancel', '--comment', 'wrong question']);
    expect(run.stdout).toBe('The question q-1 was cancelled by dev:admin.\n');
    expect(api.requests[0]?.body).toEqual({ cancel: true, comment: 'wrong question' });
    const both = await cli(['answer', CONV, 'q-1', 'prod', '--cancel']);
    expect(both.code).toBe(ExitCode.Usage);
    expect(both.stderr).toContain('answer --cancel takes no answer text');
    expect(api.requests).toHaveLength(1);
  });

  it('exits 3 naming an unknown request', async () => {
    const run = await cli(['approve', CONV, 'r-nope']);
    expect(run.code).toBe(ExitCode.Error);
    expect(run.stderr).toBe(
      'polychrome: no approval request r-nope in this conversation (not_found, HTTP 404, request id req-1)\n',
    );
  });

  it('answers a question with the words as one answer', async () => {
    const run = await cli(['answer', CONV, 'q-1', 'the', 'prod', 'cluster']);
    expect(run).toEqual({
      code: ExitCode.Ok,
      stdout: 'Thanks, noted: the prod cluster\n',
      stderr: '',
    });
    expect(api.requests[0]?.path).toBe(`/v1/conversations/${CONV}/questions/q-1`);
    expect(api.requests[0]?.body).toEqual({ answer: 'the prod cluster' });
  });
});

describe('transcript', () => {
  it('prints the turns, a paused one with its approve command', async () => {
    const run = await cli(['transcript', CONV]);
    expect(run.code).toBe(ExitCode.Ok);
    expect(run.stdout).toBe(
      `conversation ${CONV}: 2 turns (journal head 14)\n` +
        '[0] dev:you (2026-01-02T03:04:05.000Z): what is 6 * 7?\n' +
        '  agent: The answer is 42.\n' +
        '[8] dev:you (2026-01-02T03:05:00.000Z): and 7 * 8?\n' +
        `  waiting for approval: calculator {"expression":"7 * 8"} (request r-2): polychrome approve ${CONV} r-2\n`,
    );
    expect(api.requests[0]?.method).toBe('GET');
  });

  it('prints the API body with --json', async () => {
    const run = await cli(['transcript', CONV, '--json']);
    const body = JSON.parse(run.stdout) as { head: number; turns: unknown[] };
    expect(body.head).toBe(14);
    expect(body.turns).toHaveLength(2);
  });
});

describe('connection settings and errors', () => {
  it('names --token and POLYCHROME_TOKEN when there is no token, and sends nothing', async () => {
    const run = await cli(['send', CONV, 'hi'], { POLYCHROME_API_URL: api.url });
    expect(run.code).toBe(ExitCode.Usage);
    expect(run.stdout).toBe('');
    expect(run.stderr).toContain(
      'polychrome: no API token: pass --token T or set POLYCHROME_TOKEN',
    );
    expect(run.stderr).toContain(USAGE);
    expect(api.requests).toHaveLength(0);
  });

  it('takes the token from --token', async () => {
    const run = await cli(['transcript', CONV, '--token', TOKEN], { POLYCHROME_API_URL: api.url });
    expect(run.code).toBe(ExitCode.Ok);
    expect(api.requests[0]?.headers.authorization).toBe(`Bearer ${TOKEN}`);
  });

  it("exits 3 with the API's message on 401", async () => {
    const run = await cli(['send', CONV, 'hi'], { ...env, POLYCHROME_TOKEN: 'pcs_revoked' });
    expect(run.code).toBe(ExitCode.Error);
    expect(run.stderr).toBe(
      'polychrome: the session token is unknown, expired or revoked; sign in again (unauthenticated, HTTP 401, request id req-1)\n',
    );
  });

  it('exits 3 naming an unknown conversation (404)', async () => {
    const run = await cli(['transcript', UNKNOWN_CONV]);
    expect(run.code).toBe(ExitCode.Error);
    expect(run.stderr).toBe(
      `polychrome: conversation ${UNKNOWN_CONV} does not exist (not_found, HTTP 404, request id req-1)\n`,
    );
  });

  it('exits 3 naming the URL when the API cannot be reached, with the command to retry', async () => {
    const run = await cli(['send', CONV, 'hi', '--key', 'k-2'], {
      POLYCHROME_API_URL: closedPortUrl,
      POLYCHROME_TOKEN: TOKEN,
    });
    expect(run.code).toBe(ExitCode.Error);
    expect(run.stderr).toContain(
      `polychrome: cannot reach the Polychrome API at ${closedPortUrl}: ECONNREFUSED`,
    );
    expect(run.stderr).toContain(`then retry with: polychrome send ${CONV} --key k-2 -- hi`);
  });

  it('prefers --api over POLYCHROME_API_URL', async () => {
    const run = await cli(['transcript', CONV, '--api', api.url], {
      POLYCHROME_API_URL: closedPortUrl,
      POLYCHROME_TOKEN: TOKEN,
    });
    expect(run.code).toBe(ExitCode.Ok);
    expect(api.requests).toHaveLength(1);
  });

  it.each([
    [['send', CONV], 'send needs the message text after the conversation id'],
    [['send', 'hello', 'hi'], '"hello" is not a conversation id'],
    [['send', CONV, 'hi', '--key', 'has space'], '--key must be 1 to 128 of'],
    [['stream', CONV, '--since', '1', '--last-event-id', '2'], 'not both'],
    [['stream', CONV, '--since=-1'], '--since must be a journal position'],
    [['approve', CONV], 'approve needs the request id'],
    [
      ['approve', CONV, 'r-1', 'extra'],
      'approve takes a conversation id and a request id, got extra extra',
    ],
    [['answer', CONV, 'q-1'], 'answer needs the answer text'],
    [['transcript', CONV, '--format', 'yaml'], '--format must be json or text, got "yaml"'],
    [['transcript', CONV, '--json', '--format', 'text'], '--json means --format json'],
    [['transcript', CONV, '--api', 'localhost:8080'], '--api must be an http or https URL'],
  ])('%p is a usage error', async (args, message) => {
    const run = await cli(args);
    expect(run.code).toBe(ExitCode.Usage);
    expect(run.stderr).toContain(message);
    expect(api.requests).toHaveLength(0);
  });
});
