import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Role } from '../../common/persona-roles';
import { payloadCodecs } from '../../common/event-kinds';
import { apiCall, type ApiAnswer, type ApiCallOptions } from './support/public-api';
import { startTurnStack, type TurnStack } from './support/turn-stack';

// Turns end to end on the real stack: a real control-plane process (coordinator + public
// API), the real state plane over mTLS, harness processes run by the local node, the real
// Anthropic SDK in the harness talking to our Messages API server (echo responder).

type Answer = ApiAnswer;

describe('turns through the public API', () => {
  let stack: TurnStack;
  let owner: string;
  let admin: string;
  let stranger: string;
  let plain: string;
  let gated: string;

  const call = (method: string, path: string, options: ApiCallOptions = {}): Promise<Answer> =>
    apiCall(stack.apiUrl, method, path, options);
  const post = (uid: string, text: string, key: string, token = owner): Promise<Answer> =>
    call('POST', `/v1/conversations/${uid}/messages`, {
      token,
      body: { text, idempotencyKey: key },
    });
  const errorCode = (answer: Answer): unknown =>
    (answer.body.error as Record<string, unknown> | undefined)?.code;

  beforeAll(async () => {
    stack = await startTurnStack({ namespacePrefix: 'turns' });
    owner = await stack.mintToken('test:owner');
    admin = await stack.mintToken('test:admin', [Role.Admin]);
    stranger = await stack.mintToken('test:stranger');
    plain = await stack.createConversation('plain', { owner: 'test:owner' });
    gated = await stack.createConversation('gated', {
      owner: 'test:owner',
      tools: { builtin: ['calculator'], requireApproval: ['calculator'] },
    });
  }, 120_000);
  afterAll(async () => {
    await stack?.stop();
  });

  it('commits a turn in two batches and answers with the reply', async () => {
    await stack.withDiagnostics(async () => {
      const answer = await post(plain, 'hello there', 'k-hello');
      expect(answer.status).toBe(200);
      expect(answer.body).toMatchObject({
        conversationId: plain,
        status: 'complete',
        reply: 'echo: hello there',
        requestedAt: 0,
      });
      expect(String(answer.body.turnId)).toMatch(/^turn_[0-9a-f]{32}$/);
      expect(await stack.journalKinds(plain)).toEqual([
        'message_received',
        'turn_dispatched',
        'signed_root',
        // The harness records its agent configuration before the first model call
        // (HARNESS_RECORD_AGENT_CONFIG, on by default: docs/replay.md).
        'agent_config',
        'signed_root',
        // The reply that ends the turn is committed with batch two, in one durable write.
        'model_call',
        'turn_complete',
        'signed_root',
      ]);
      const journal = await stack.journal(plain);
      const dispatched = payloadCodecs.turn_dispatched.decode(journal[1]!.payload);
      expect(dispatched).toMatchObject({
        turnId: answer.body.turnId,
        attempt: 1,
        messagePosition: 0,
      });
      expect(dispatched.leaseHolder).toBe(stack.controlPlane(0).identity);
      // The model call names the configuration recorded before it and its request's digest.
      const config = payloadCodecs.agent_config.decode(journal[3]!.payload);
      expect(config.turnId).toBe(answer.body.turnId);
      const modelCall = payloadCodecs.model_call.decode(journal[5]!.payload);
      expect(Buffer.from(modelCall.configSha256).toString('hex')).toBe(
        Buffer.from(config.sha256).toString('hex'),
      );
      expect(modelCall.requestSha256).toHaveLength(32);
      expect(JSON.parse(config.configJson)).toMatchObject({
        system: 'You are a test agent. Be brief.',
      });
      expect(dispatched.attribution).toMatchObject({
        caller: 'test:owner',
        participants: ['test:owner'],
      });
      expect((await stack.verify(plain)).ok).toBe(true);

      const transcript = await call('GET', `/v1/conversations/${plain}/transcript`, {
        token: owner,
      });
      expect(transcript.status).toBe(200);
      expect(transcript.body.turns).toEqual([
        expect.objectContaining({
          turnId: answer.body.turnId,
          status: 'complete',
          reply: 'echo: hello there',
          user: expect.objectContaining({ text: 'hello there', caller: 'test:owner' }),
        }),
      ]);
    });
  });

  it('creates a conversation owned by the caller when none is named, and runs its first message', async () => {
    await stack.withDiagnostics(async () => {
      const created = await call('POST', '/v1/conversations', {
        token: owner,
        body: { message: { text: 'first words', idempotencyKey: 'k-first' } },
      });
      expect(created.status).toBe(201);
      const conversationId = String(created.body.conversationId);
      expect(conversationId).toMatch(/^[0-9a-f-]{36}$/);
      expect(created.body.conversation).toMatchObject({ conversationId, owner: 'test:owner' });
      expect(created.body.turn).toMatchObject({
        conversationId,
        status: 'complete',
        reply: 'echo: first words',
      });
      // Private to its owner.
      const other = await call('GET', `/v1/conversations/${conversationId}`, { token: stranger });
      expect(other.status).toBe(403);
      const mine = await call('GET', `/v1/conversations/${conversationId}`, { token: owner });
      expect(mine.body).toMatchObject({ conversationId, partition: `conv-${conversationId}` });
    });
  });

  it('reopens an idle-closed conversation with a new pod and replays its history', async () => {
    await stack.withDiagnostics(async () => {
      const uid = await stack.createConversation('idle', {
        owner: 'test:owner',
        idleTimeout: '3s',
      });
      const before = await stack.harness('idle');
      const first = await post(uid, 'remember the word teal', 'k-idle-1');
      expect(first.body).toMatchObject({ status: 'complete' });
      await stack.waitConversation(
        'idle',
        (obj) => (obj as { status?: { phase?: string } }).status?.phase === 'Closed',
        60_000,
      );
      const second = await post(uid, 'which word?', 'k-idle-2');
      expect(second.status).toBe(200);
      expect(second.body).toMatchObject({ status: 'complete', reply: 'echo: which word?' });
      const after = await stack.harness('idle');
      expect(after.podUid).not.toBe(before.podUid);
      const kinds = await stack.journalKinds(uid);
      expect(kinds).toContain('conversation_reopened');
      // The new harness got the committed history: the first turn came before this message.
      const request = stack.messages.requests.at(-1)?.body as {
        messages?: { role: string; content: unknown }[];
      };
      expect(JSON.stringify(request.messages)).toContain('remember the word teal');
      expect((await stack.verify(uid)).ok).toBe(true);
    });
  });

  it('gives an exact retry the same turn and refuses the key for another message', async () => {
    await stack.withDiagnostics(async () => {
      const first = await post(plain, 'retry me', 'k-retry');
      const before = (await stack.journal(plain)).length;
      const again = await post(plain, 'retry me', 'k-retry');
      expect(again.status).toBe(200);
      expect(again.body).toEqual(first.body);
      const other = await post(plain, 'something else', 'k-retry');
      expect(other.status).toBe(409);
      expect(errorCode(other)).toBe('conflict');
      expect((await stack.journal(plain)).length).toBe(before);
    });
  });

  it('starts the next turn from the cached journal view while the lease is held (no journal read)', async () => {
    await stack.withDiagnostics(async () => {
      const uid = await stack.createConversation('cached-view', { owner: 'test:owner' });
      expect((await post(uid, 'first', 'k-view-1')).status).toBe(200);
      // The status's first journal mark learns the journal's keys off the turn's path, by
      // reading the first batch once (operator/turns/journal-keys.ts): let it land first, or
      // that one Read would be counted against the second turn.
      await stack.waitConversation(
        'cached-view',
        (obj) =>
          ((obj as { status?: { journal?: { publicKeys?: unknown[] } } }).status?.journal
            ?.publicKeys?.length ?? 0) > 0,
        10_000,
      );
      const reads = await stack.stateCalls('Read');
      const second = await post(uid, 'second', 'k-view-2');
      expect(second.body).toMatchObject({ status: 'complete', reply: 'echo: second' });
      // The lease was held throughout and every append was this replica's own: no Read.
      expect(await stack.stateCalls('Read')).toBe(reads);
      expect((await stack.verify(uid)).ok).toBe(true);
    });
  });

  it('merges the status changes of quick turns into about one write a second', async () => {
    await stack.withDiagnostics(async () => {
      const uid = await stack.createConversation('status-spacing', { owner: 'test:owner' });
      expect((await post(uid, 'warm', 'k-space-0')).status).toBe(200);
      const plane = stack.controlPlane(0);
      const writes = async (): Promise<number> => {
        const text = await (await fetch(`http://127.0.0.1:${plane.healthPort}/metrics`)).text();
        const line = text
          .split('\n')
          .find((l) => l.startsWith('polychrome_turn_status_writes_total{result="ok"}'));
        return Number(line?.split(' ').at(-1) ?? 0);
      };
      const before = await writes();
      const started = Date.now();
      for (let i = 1; i <= 10; i++) {
        expect((await post(uid, `quick ${i}`, `k-space-${i}`)).status).toBe(200);
      }
      const seconds = (Date.now() - started) / 1000;
      // Unspaced, each turn wrote "running" and "settled" (merged at best into one).
      expect(await writes()).toBeLessThanOrEqual(before + Math.ceil(seconds) + 1);
      // The last change still lands: the status shows the journal's head after the last turn.
      const head = (await stack.journal(uid)).length;
      await stack.waitConversation(
        'status-spacing',
        (obj) => {
          const status = (obj as { status?: { currentTurn?: string; journal?: { head?: number } } })
            .status;
          return status?.currentTurn === undefined && status?.journal?.head === head;
        },
        10_000,
      );
    });
  });

  it('sends history of committed turns to the model', async () => {
    await stack.withDiagnostics(async () => {
      await post(plain, 'remember this', 'k-history');
      const last = stack.messages.requests.at(-1);
      const body = last?.body as { messages?: { role: string }[] } | undefined;
      // Earlier committed turns come first, as user/assistant pairs, then this message.
      expect((body?.messages?.length ?? 0) % 2).toBe(1);
      expect(body?.messages?.length ?? 0).toBeGreaterThanOrEqual(5);
    });
  });

  it('pauses for an approval bound to the call, and resumes the same turn when an admin approves', async () => {
    await stack.withDiagnostics(async () => {
      const paused = await post(
        gated,
        'please [[tool:calculator {"expression":"6*7"}]]',
        'k-approve',
      );
      expect(paused.status).toBe(200);
      expect(paused.body).toMatchObject({ status: 'paused', conversationId: gated });
      const card = paused.body.approval as Record<string, unknown>;
      expect(card).toMatchObject({ toolName: 'calculator', args: { expression: '6*7' } });
      expect(String(card.argsSha256)).toMatch(/^[0-9a-f]{64}$/);
      expect(paused.body).not.toHaveProperty('reply');

      // Status is written off the turn's path: wait for it.
      await stack.waitConversation('gated', (obj) => {
        const status = (
          obj as {
            status?: { currentTurn?: string; conditions?: { type: string; reason: string }[] };
          }
        ).status;
        return (
          status?.currentTurn === paused.body.turnId &&
          status?.conditions?.find((c) => c.type === 'Progressing')?.reason === 'AwaitingApproval'
        );
      });

      const blocked = await post(gated, 'a new message', 'k-blocked');
      expect(blocked.status).toBe(409);
      const byOwner = await call(
        'POST',
        `/v1/conversations/${gated}/approvals/${String(card.requestId)}`,
        {
          token: owner,
          body: { decision: 'approve' },
        },
      );
      expect(byOwner.status).toBe(403);

      const approved = await call(
        'POST',
        `/v1/conversations/${gated}/approvals/${String(card.requestId)}`,
        { token: admin, body: { decision: 'approve', comment: 'fine' } },
      );
      expect(approved.status).toBe(200);
      expect(approved.body).toMatchObject({
        status: 'complete',
        turnId: paused.body.turnId,
        reply: 'tool calculator said: 42',
      });
      const again = await call(
        'POST',
        `/v1/conversations/${gated}/approvals/${String(card.requestId)}`,
        {
          token: admin,
          body: { decision: 'approve' },
        },
      );
      expect(again.status).toBe(409);

      const kinds = await stack.journalKinds(gated);
      expect(kinds.filter((k) => k === 'message_received')).toHaveLength(1);
      expect(kinds.filter((k) => k === 'turn_dispatched')).toHaveLength(2);
      for (const kind of [
        'approval_request',
        'approval_response',
        'tool_call',
        'tool_result',
        'turn_complete',
      ]) {
        expect(kinds).toContain(kind);
      }
      const journal = await stack.journal(gated);
      const response = journal.find((e) => e.kind === 'approval_response');
      const recorded = payloadCodecs.approval_response.decode(response!.payload);
      expect(recorded).toMatchObject({
        answeredBy: 'test:admin',
        requestId: card.requestId,
        comment: 'fine',
      });
      expect(Buffer.from(recorded.argsSha256).toString('hex')).toBe(card.argsSha256);
      expect((await stack.verify(gated)).ok).toBe(true);
      const lastRoot = payloadCodecs.signed_root.decode(journal.at(-1)!.payload);
      await stack.waitConversation('gated', (obj) => {
        const status = (
          obj as {
            status?: { currentTurn?: string; journal?: { head?: number; lastSignedRoot?: string } };
          }
        ).status;
        return (
          status?.currentTurn === undefined &&
          status?.journal?.head === journal.length &&
          status.journal.lastSignedRoot === Buffer.from(lastRoot.root).toString('hex')
        );
      });
    });
  });

  it('gives the model a denial when an admin denies, and the turn goes on', async () => {
    await stack.withDiagnostics(async () => {
      const uid = await stack.createConversation('deny', {
        owner: 'test:owner',
        tools: { builtin: ['calculator'], requireApproval: ['calculator'] },
      });
      const paused = await post(uid, '[[tool:calculator {"expression":"1/0"}]]', 'k-deny');
      const card = paused.body.approval as Record<string, unknown>;
      const denied = await call(
        'POST',
        `/v1/conversations/${uid}/approvals/${String(card.requestId)}`,
        {
          token: admin,
          body: { decision: 'deny' },
        },
      );
      expect(denied.status).toBe(200);
      expect(denied.body).toMatchObject({ status: 'complete', turnId: paused.body.turnId });
      expect(String(denied.body.reply)).toMatch(/^tool calculator said: /);
      const journal = await stack.journal(uid);
      const results = journal
        .filter((e) => e.kind === 'tool_result')
        .map((e) => payloadCodecs.tool_result.decode(e.payload));
      expect(results).toHaveLength(1);
      expect(results[0]!.denied).toBe(true);
      // The denied call never ran: no tool_call was committed for it.
      expect(journal.filter((e) => e.kind === 'tool_call')).toHaveLength(0);
    });
  });

  it('pauses for a question and resumes with the answer', async () => {
    await stack.withDiagnostics(async () => {
      const uid = await stack.createConversation('question', { owner: 'test:owner' });
      const paused = await post(
        uid,
        'book it [[tool:__ask_user {"question":"Which size?"}]]',
        'k-q',
      );
      expect(paused.body).toMatchObject({
        status: 'paused',
        question: { question: 'Which size?' },
      });
      const question = paused.body.question as { requestId: string };
      const unknown = await call('POST', `/v1/conversations/${uid}/questions/q_nope`, {
        token: owner,
        body: { answer: 'Large' },
      });
      expect(unknown.status).toBe(404);
      const answered = await call(
        'POST',
        `/v1/conversations/${uid}/questions/${question.requestId}`,
        {
          token: owner,
          body: { answer: 'Large' },
        },
      );
      expect(answered.status).toBe(200);
      expect(answered.body).toMatchObject({
        status: 'complete',
        turnId: paused.body.turnId,
        reply: 'tool __ask_user said: Large',
      });
      const kinds = await stack.journalKinds(uid);
      expect(kinds.filter((k) => k === 'question_request')).toHaveLength(1);
      expect(kinds.filter((k) => k === 'question_response')).toHaveLength(1);
      expect((await stack.verify(uid)).ok).toBe(true);
    });
  });

  it('runs twenty concurrent messages with distinct keys as twenty turns, in order', async () => {
    await stack.withDiagnostics(async () => {
      const uid = await stack.createConversation('burst', { owner: 'test:owner' });
      const answers = await Promise.all(
        Array.from({ length: 20 }, (_, i) => post(uid, `message ${i}`, `burst-${i}`)),
      );
      expect(answers.map((a) => a.status)).toEqual(Array(20).fill(200));
      const journal = await stack.journal(uid);
      const received = journal.filter((e) => e.kind === 'message_received');
      const completed = journal.filter((e) => e.kind === 'turn_complete');
      expect(received).toHaveLength(20);
      expect(completed).toHaveLength(20);
      // Turns never interleave: each message's completion comes before the next message.
      const order = journal
        .filter((e) => e.kind === 'message_received' || e.kind === 'turn_complete')
        .map((e) => e.kind);
      expect(order).toEqual(
        Array.from({ length: 20 }, () => ['message_received', 'turn_complete']).flat(),
      );
      for (const answer of answers) {
        const text = String((answer.body as { reply?: string }).reply);
        expect(text).toMatch(/^echo: message \d+$/);
      }
      expect((await stack.verify(uid)).ok).toBe(true);
    });
  });

  it('runs twenty concurrent messages with one shared key as exactly one turn', async () => {
    await stack.withDiagnostics(async () => {
      const uid = await stack.createConversation('shared-key', { owner: 'test:owner' });
      const answers = await Promise.all(
        Array.from({ length: 20 }, () => post(uid, 'only once', 'the-key')),
      );
      expect(answers.map((a) => a.status)).toEqual(Array(20).fill(200));
      expect(new Set(answers.map((a) => String(a.body.turnId))).size).toBe(1);
      const kinds = await stack.journalKinds(uid);
      expect(kinds.filter((k) => k === 'message_received')).toHaveLength(1);
      expect(kinds.filter((k) => k === 'turn_dispatched')).toHaveLength(1);
      expect(kinds.filter((k) => k === 'turn_complete')).toHaveLength(1);
    });
  });

  it('answers bad requests with clear errors and changes nothing', async () => {
    await stack.withDiagnostics(async () => {
      const before = (await stack.journal(plain)).length;
      const unknown = await post('00000000-0000-0000-0000-000000000000', 'hi', 'k-x');
      expect(unknown.status).toBe(404);
      expect(String((unknown.body.error as { message: string }).message)).toContain(
        'does not exist',
      );
      const badJson = await call('POST', `/v1/conversations/${plain}/messages`, {
        token: owner,
        raw: '{"text":',
      });
      expect(badJson.status).toBe(400);
      const huge = await post(plain, 'x'.repeat(40_000), 'k-huge');
      expect([400, 413]).toContain(huge.status);
      const anonymous = await call('POST', `/v1/conversations/${plain}/messages`, {
        body: { text: 'hi' },
      });
      expect(anonymous.status).toBe(401);
      const forged = await post(plain, 'hi', 'k-forged', 'pcs_' + 'A'.repeat(43));
      expect(forged.status).toBe(401);
      const forbidden = await post(plain, 'hi', 'k-forbidden', stranger);
      expect(forbidden.status).toBe(403);
      const transcript = await call('GET', `/v1/conversations/${plain}/transcript`, {
        token: stranger,
      });
      expect(transcript.status).toBe(403);
      const badCursor = await fetch(`${stack.apiUrl}/v1/conversations/${plain}/stream`, {
        headers: { authorization: `Bearer ${owner}`, 'last-event-id': 'yesterday' },
      });
      expect(badCursor.status).toBe(400);
      await badCursor.body?.cancel();
      expect((await stack.journal(plain)).length).toBe(before);
    });
  });

  it('reconstructs the exact event sequence of live turns across random disconnects', async () => {
    await stack.withDiagnostics(async () => {
      const uid = await stack.createConversation('live', { owner: 'test:owner' });
      let seed = 42;
      const random = (n: number): number => {
        seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31;
        return seed % n;
      };
      let posting = true;
      const answers: Answer[] = [];
      const turns = (async () => {
        try {
          for (let i = 0; i < 4; i += 1)
            answers.push(await post(uid, `[[slow:400]] live ${i}`, `live-${i}`));
        } finally {
          posting = false;
        }
      })();
      const seen: string[] = [];
      let deltas = 0;
      let cursor: number | undefined;
      const deadline = Date.now() + 60_000;
      // Connect, read a random number of bytes, drop the connection (often mid-frame),
      // reconnect after the last id seen; until posting is over and the head is reached.
      for (;;) {
        const head = posting ? Number.POSITIVE_INFINITY : (await stack.journal(uid)).length;
        if (seen.length >= head || Date.now() > deadline) break;
        const controller = new AbortController();
        const response = await fetch(`${stack.apiUrl}/v1/conversations/${uid}/stream`, {
          headers: {
            authorization: `Bearer ${owner}`,
            ...(cursor === undefined ? {} : { 'last-event-id': String(cursor) }),
          },
          signal: controller.signal,
        });
        expect(response.status).toBe(200);
        const budget = 50 + random(600);
        let bytes = 0;
        let buffer = '';
        const decoder = new TextDecoder();
        const chunks = (response.body as unknown as AsyncIterable<Uint8Array>)[
          Symbol.asyncIterator
        ]();
        const idle = setTimeout(() => controller.abort(), 1_500);
        try {
          while (bytes < budget) {
            const chunk = await chunks.next();
            if (chunk.done) break;
            bytes += chunk.value.length;
            buffer += decoder.decode(chunk.value, { stream: true });
            let split: number;
            while ((split = buffer.indexOf('\n\n')) !== -1) {
              const frame = buffer.slice(0, split);
              buffer = buffer.slice(split + 2);
              const kind = /^event: (\S+)$/m.exec(frame)?.[1];
              const id = /^id: (\d+)$/m.exec(frame)?.[1];
              if (kind === 'delta' && id === undefined) deltas += 1;
              if (id === undefined || kind === undefined) continue;
              seen.push(`${id}:${kind}`);
              cursor = Number(id);
            }
          }
        } catch {
          // Aborted while idle: reconnect.
        } finally {
          clearTimeout(idle);
          controller.abort();
          await chunks.return?.().catch(() => undefined);
        }
      }
      await turns;
      expect(answers.map((a) => [a.status, a.body.status])).toEqual(
        Array(4).fill([200, 'complete']),
      );
      const journal = await stack.journal(uid);
      expect(seen).toEqual(journal.map((e) => `${e.position}:${e.kind}`));
      expect(journal.filter((e) => e.kind === 'turn_complete')).toHaveLength(4);
      expect(deltas).toBeGreaterThan(0);
    });
  });

  it('streams committed events with their positions and resumes exactly after Last-Event-ID', async () => {
    await stack.withDiagnostics(async () => {
      const journal = await stack.journal(plain);
      const expected = journal.map((e) => `${e.position}:${e.kind}`);
      const seen: string[] = [];
      let cursor: number | undefined;
      // Read a few events per connection, dropping it each time, until the head.
      for (let round = 0; seen.length < expected.length && round < 50; round += 1) {
        const controller = new AbortController();
        const response = await fetch(`${stack.apiUrl}/v1/conversations/${plain}/stream`, {
          headers: {
            authorization: `Bearer ${owner}`,
            ...(cursor === undefined ? {} : { 'last-event-id': String(cursor) }),
          },
          signal: controller.signal,
        });
        expect(response.status).toBe(200);
        expect(response.headers.get('content-type')).toContain('text/event-stream');
        const take = 1 + (round % 4);
        let buffer = '';
        const decoder = new TextDecoder();
        const chunks = (response.body as unknown as AsyncIterable<Uint8Array>)[
          Symbol.asyncIterator
        ]();
        let taken = 0;
        while (taken < take && seen.length < expected.length) {
          const chunk = await chunks.next();
          if (chunk.done) break;
          buffer += decoder.decode(chunk.value, { stream: true });
          let split: number;
          while ((split = buffer.indexOf('\n\n')) !== -1 && taken < take) {
            const frame = buffer.slice(0, split);
            buffer = buffer.slice(split + 2);
            const id = /^id: (\d+)$/m.exec(frame)?.[1];
            const kind = /^event: (\S+)$/m.exec(frame)?.[1];
            if (id === undefined || kind === undefined) continue;
            seen.push(`${id}:${kind}`);
            cursor = Number(id);
            taken += 1;
          }
        }
        controller.abort();
        await chunks.return?.().catch(() => undefined);
      }
      expect(seen).toEqual(expected);
    });
  });
});
