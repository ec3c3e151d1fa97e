/*
 * docs/api.md, "Status codes and who may do what", pinned to the code: the test reads the
 * tables from the markdown, so a row changes in the doc and the test follows. Codes are
 * checked against common/errors.ts `errorStatus`; each status a request can cause on
 * demand is caused; each who-may cell is tried as that caller against the real turn
 * coordinator (test/support/api-fixtures.ts).
 */
import { afterEach, describe, expect, it } from '@jest/globals';
import { ErrorCode, errorStatus, isErrorCode } from '../../common/errors';
import { grpcStatusName } from '../../common/grpc-errors';
import {
  ADMIN,
  ALICE,
  BOB,
  EDGE,
  call,
  errorOf,
  SseClient,
  startApi,
  TOKENS,
  type Answer,
  type StartApiOptions,
  type TestApi,
} from '../../test/support/api-fixtures';
import {
  calculatorReply,
  textReply,
  askReply,
  transferReply,
  unknownFirstTransfer,
} from '../../test/support/real-turns';
import { docTable } from '../../test/support/doc-tables';
import { EXAMPLE_SPEND_LIMITS } from '../../test/support/spend-limits';

const SECTION = '## Status codes and who may do what';

/** The table of the section whose first column is `header`. */
function table(header: string): Promise<{ columns: string[]; rows: string[][] }> {
  return docTable('api.md', SECTION, header);
}

let api: TestApi | undefined;
afterEach(async () => {
  await api?.close();
  api = undefined;
});

// ---- status codes ----

/** The codes a status row names: `a`, `b` in backticks; — for none. */
function codesOf(cell: string): string[] {
  return [...cell.matchAll(/`([a-z_]+)`/gu)].map((m) => m[1] ?? '');
}

/** The gRPC status a cell names in backticks (`ABORTED`). */
function statusNameOf(cell: string): string {
  return /^`([A-Z_]+)`$/u.exec(cell)?.[1] ?? cell;
}

/** Statuses that are not `errorStatus` of their code: the protocol answers and successes. */
const PROTOCOL_STATUSES = new Set([200, 201, 405, 413, 415]);

/** A request that causes the status, for the statuses a test can cause on demand. */
const STATUS_PROBES: Readonly<Record<number, (a: TestApi, id: string) => Promise<Answer>>> = {
  200: (a, id) => call(a, 'GET', `/v1/conversations/${id}`, { token: TOKENS.alice }),
  201: (a) => call(a, 'POST', '/v1/conversations', { token: TOKENS.alice, body: {} }),
  400: (a, id) =>
    call(a, 'POST', `/v1/conversations/${id}/messages`, { token: TOKENS.alice, body: {} }),
  401: (a, id) => call(a, 'GET', `/v1/conversations/${id}`, { token: TOKENS.unknown }),
  403: (a, id) => call(a, 'GET', `/v1/conversations/${id}`, { token: TOKENS.carol }),
  404: (a) =>
    call(a, 'GET', '/v1/conversations/0b5c3a9e-4f0d-4d0a-9a52-6f1e2b7c8d90', {
      token: TOKENS.alice,
    }),
  405: (a, id) => call(a, 'DELETE', `/v1/conversations/${id}`, { token: TOKENS.alice }),
  409: async (a, id) => {
    const path = `/v1/conversations/${id}/messages`;
    await call(a, 'POST', path, { token: TOKENS.alice, body: { text: 'a', idempotencyKey: 'k' } });
    return call(a, 'POST', path, { token: TOKENS.alice, body: { text: 'b', idempotencyKey: 'k' } });
  },
  413: (a, id) =>
    call(a, 'POST', `/v1/conversations/${id}/messages`, {
      token: TOKENS.alice,
      body: { text: 'x', pad: 'y'.repeat(70_000) },
    }),
  415: (a, id) =>
    call(a, 'POST', `/v1/conversations/${id}/messages`, {
      token: TOKENS.alice,
      rawBody: '{"text":"hi"}',
      headers: { 'content-type': 'text/plain' },
    }),
};

describe('docs/api.md: status codes', () => {
  it('names every error code of common/errors.ts once, each in the row of its errorStatus', async () => {
    const { columns, rows } = await table('status');
    expect(columns).toEqual(['status', 'code', 'when']);
    const named: string[] = [];
    for (const [status = '', code = ''] of rows) {
      const codes = codesOf(code);
      for (const name of codes) {
        expect({ name, known: isErrorCode(name) }).toEqual({ name, known: true });
      }
      if (PROTOCOL_STATUSES.has(Number(status))) continue;
      expect({ status, codes: codes.length > 0 }).toEqual({ status, codes: true });
      for (const name of codes) {
        named.push(name);
        if (isErrorCode(name)) {
          expect({ name, status: errorStatus[name].http }).toEqual({
            name,
            status: Number(status),
          });
        }
      }
    }
    expect([...named].sort()).toEqual([...Object.values(ErrorCode)].sort());
  });

  it('lists every status a request can cause, and each probe answers the status and code of its row', async () => {
    const { rows } = await table('status');
    const statuses = rows.map(([status = '']) => Number(status));
    expect(statuses).toEqual([...statuses].sort((x, y) => x - y));
    for (const status of Object.keys(STATUS_PROBES).map(Number)) expect(statuses).toContain(status);
    for (const [status = '', code = ''] of rows) {
      const probe = STATUS_PROBES[Number(status)];
      if (probe === undefined) continue;
      const a = await startApi();
      try {
        const id = a.seed(ALICE.identity);
        const answer = await probe(a, id);
        expect({ status, got: answer.status }).toEqual({ status, got: Number(status) });
        const codes = codesOf(code);
        if (codes.length > 0) expect(codes).toContain(errorOf(answer).code);
      } finally {
        await a.close();
      }
    }
  });
});

describe('docs/api.md: retrying', () => {
  it('lists every code once with its errorStatus row: HTTP, gRPC and whether to retry', async () => {
    const { columns, rows } = await table('code');
    expect(columns).toEqual(['code', 'HTTP', 'gRPC', 'retry']);
    const listed = rows.map(([code = '', http = '', grpc = '', retry = '']) => {
      const [name = ''] = codesOf(code);
      return { name, http: Number(http), grpc: statusNameOf(grpc), retryable: retry };
    });
    expect(listed).toEqual(
      Object.values(ErrorCode).map((name) => ({
        name,
        http: errorStatus[name].http,
        grpc: grpcStatusName(errorStatus[name].grpc),
        retryable: expect.stringMatching(errorStatus[name].retryable ? /^yes\b/u : /^no\b/u),
      })),
    );
  });
});

// ---- who may do what ----

/** The callers of the who-may table's columns, by column name. */
const CALLERS: Readonly<Record<string, string>> = {
  owner: TOKENS.alice,
  participant: TOKENS.bob,
  admin: TOKENS.admin,
  'anyone else': TOKENS.carol,
  edge: TOKENS.edge,
};

/** The shared conversation every cell is tried on: Alice owns it, Bob and the edge take part. */
function sharedConversation(a: TestApi): string {
  return a.seed(ALICE.identity, {
    visibility: 'shared',
    participants: [BOB.identity, EDGE.identity],
  });
}

/** Posts as the owner until the turn pauses; returns the answer path. */
async function pausedRequest(
  a: TestApi,
  id: string,
  kind: 'approvals' | 'questions',
  directive?: { requiredApprover: string },
): Promise<string> {
  // Only an edge may send a directive.
  const paused = await call(a, 'POST', `/v1/conversations/${id}/messages`, {
    token: directive === undefined ? TOKENS.alice : TOKENS.edge,
    body: { text: 'go', ...(directive === undefined ? {} : { directive }) },
  });
  const json = paused.json as {
    status: string;
    approval?: { requestId: string };
    question?: { requestId: string };
  };
  const requestId = (kind === 'approvals' ? json.approval : json.question)?.requestId;
  if (requestId === undefined) throw new Error(`the turn did not pause: ${paused.text}`);
  return `/v1/conversations/${id}/${kind}/${requestId}`;
}

/** The shared conversation with one question turn in its journal (a journal to export). */
async function conversationWithJournal(a: TestApi): Promise<string> {
  const id = sharedConversation(a);
  await pausedRequest(a, id, 'questions');
  return id;
}

/** One action of the table, tried as `token`: the statuses of what it takes to do it. */
type Action = (a: TestApi, token: string) => Promise<number[]>;

/** What each row of the who-may table does, by its first words. Every row needs one. */
const ACTIONS: readonly {
  readonly row: RegExp;
  readonly replies?: number;
  /** The API the cell needs, when not the default one. */
  readonly start?: () => StartApiOptions;
  readonly act: Action;
}[] = [
  {
    row: /^read the conversation, its transcript and its stream$/u,
    act: async (a, token) => {
      const id = sharedConversation(a);
      const base = `/v1/conversations/${id}`;
      const stream = await SseClient.open(a, `${base}/stream`, {
        authorization: `Bearer ${token}`,
      });
      stream.close();
      return [
        (await call(a, 'GET', base, { token })).status,
        (await call(a, 'GET', `${base}/transcript`, { token })).status,
        stream.status,
      ];
    },
  },
  {
    row: /^post a message$/u,
    act: async (a, token) => {
      const id = sharedConversation(a);
      const answer = await call(a, 'POST', `/v1/conversations/${id}/messages`, {
        token,
        body: { text: 'hello' },
      });
      return [answer.status];
    },
  },
  {
    row: /^read its memory$/u,
    act: async (a, token) => {
      const id = sharedConversation(a);
      return [(await call(a, 'GET', `/v1/conversations/${id}/memory`, { token })).status];
    },
  },
  {
    row: /^clear its memory, all or one key$/u,
    act: async (a, token) => {
      const id = sharedConversation(a);
      const base = `/v1/conversations/${id}/memory`;
      return [
        (await call(a, 'DELETE', base, { token })).status,
        (await call(a, 'DELETE', `${base}/city`, { token })).status,
      ];
    },
  },
  {
    row: /^answer a question$/u,
    act: async (a, token) => {
      const id = sharedConversation(a);
      const path = await pausedRequest(a, id, 'questions');
      return [(await call(a, 'POST', path, { token, body: { answer: 'this one' } })).status];
    },
  },
  {
    row: /^answer an approval that names no required approver$/u,
    act: async (a, token) => {
      const id = sharedConversation(a);
      const path = await pausedRequest(a, id, 'approvals');
      return [(await call(a, 'POST', path, { token, body: { decision: 'approve' } })).status];
    },
  },
  {
    row: /^answer an approval whose required approver is the admin \(named by an edge\)$/u,
    act: async (a, token) => {
      const id = sharedConversation(a);
      const path = await pausedRequest(a, id, 'approvals', { requiredApprover: ADMIN.identity });
      return [(await call(a, 'POST', path, { token, body: { decision: 'approve' } })).status];
    },
  },
  {
    row: /^cancel a pending approval$/u,
    act: async (a, token) => {
      const id = sharedConversation(a);
      const path = await pausedRequest(a, id, 'approvals');
      return [(await call(a, 'POST', path, { token, body: { decision: 'cancel' } })).status];
    },
  },
  {
    row: /^cancel a pending question$/u,
    act: async (a, token) => {
      const id = sharedConversation(a);
      const path = await pausedRequest(a, id, 'questions');
      return [(await call(a, 'POST', path, { token, body: { cancel: true } })).status];
    },
  },
  {
    row: /^send a directive with a message$/u,
    act: async (a, token) => {
      const id = sharedConversation(a);
      const answer = await call(a, 'POST', `/v1/conversations/${id}/messages`, {
        token,
        body: { text: 'hello', directive: { maxSteps: 2 } },
      });
      return [answer.status];
    },
  },
  {
    row: /^export the journal, acting as one of the caller's own identities$/u,
    act: async (a, token) => {
      const id = await conversationWithJournal(a);
      const actor = encodeURIComponent(a.tokens.callers.get(token)?.identity ?? '');
      return [
        (await call(a, 'GET', `/v1/conversations/${id}/export?actor=${actor}`, { token })).status,
      ];
    },
  },
  {
    row: /^repair the journal, acting as one of the caller's own identities$/u,
    act: async (a, token) => {
      const id = await conversationWithJournal(a);
      const actor = a.tokens.callers.get(token)?.identity ?? '';
      const head = a.head(id);
      const answer = await call(a, 'POST', `/v1/conversations/${id}/repair`, {
        token,
        body: { actor },
      });
      // A refused repair commits nothing; an allowed one has nothing to excise here.
      expect(a.head(id)).toBe(head);
      return [answer.status];
    },
  },
  {
    row: /^resolve a quarantined turn, acting as one of the caller's own identities$/u,
    start: () => ({
      replies: [transferReply],
      spec: { tools: { builtin: ['transfer'] } },
      extraTools: unknownFirstTransfer([]).extraTools,
    }),
    act: async (a, token) => {
      const id = sharedConversation(a);
      const quarantined = await call(a, 'POST', `/v1/conversations/${id}/messages`, {
        token: TOKENS.alice,
        body: { text: 'pay 42' },
      });
      const { turnId, status } = quarantined.json as { turnId: string; status: string };
      expect(status).toBe('ambiguous');
      const actor = a.tokens.callers.get(token)?.identity ?? '';
      const head = a.head(id);
      const answer = await call(a, 'POST', `/v1/conversations/${id}/turns/${turnId}/resolve`, {
        token,
        body: { actor, decision: 'did_not_run' },
      });
      // A refused resolve commits nothing.
      if (answer.status !== 200) expect(a.head(id)).toBe(head);
      return [answer.status];
    },
  },
  {
    row: /^accept a rolled-back journal, acting as one of the caller's own identities$/u,
    act: async (a, token) => {
      // The status records ten entries the (empty) journal does not hold: rolled back.
      const id = a.seed(
        ALICE.identity,
        { visibility: 'shared', participants: [BOB.identity, EDGE.identity] },
        { journal: { head: 10, lastSignedRoot: 'ab'.repeat(32), keyId: '' } },
      );
      const actor = a.tokens.callers.get(token)?.identity ?? '';
      const answer = await call(a, 'POST', `/v1/conversations/${id}/accept-rollback`, {
        token,
        body: { actor, head: 0, reason: 'restored from an older copy' },
      });
      // A refused decision commits nothing.
      if (answer.status !== 200) expect(a.head(id)).toBe(0);
      else
        expect((await a.entries(id)).map((e) => e.kind)).toEqual([
          'rollback_accepted',
          'signed_root',
        ]);
      return [answer.status];
    },
  },
  {
    row: /^erase entries of the journal, acting as one of the caller's own identities$/u,
    start: () => ({ replies: [textReply('done')] }),
    act: async (a, token) => {
      const id = sharedConversation(a);
      const posted = await call(a, 'POST', `/v1/conversations/${id}/messages`, {
        token: TOKENS.alice,
        body: { text: 'my address is 1 Main St' },
      });
      expect(posted.json).toMatchObject({ status: 'complete' });
      const before = await a.entries(id);
      const message = before.find((e) => e.kind === 'message_received')!.position;
      const actor = a.tokens.callers.get(token)?.identity ?? '';
      const answer = await call(a, 'POST', `/v1/conversations/${id}/erase`, {
        token,
        body: { actor, positions: [message], reason: 'erasure request' },
      });
      const transcript = await call(a, 'GET', `/v1/conversations/${id}/transcript`, {
        token: TOKENS.admin,
      });
      if (answer.status === 200) {
        expect((await a.entries(id)).find((e) => e.position === message)?.kind).toBe('');
        expect(transcript.text).not.toContain('1 Main St');
      } else {
        // A refused erase names the missing right and changes nothing.
        expect(String(errorOf(answer).message)).toContain('only an admin may');
        expect(await a.entries(id)).toEqual(before);
        expect(transcript.text).toContain('1 Main St');
      }
      return [answer.status];
    },
  },
  {
    row: /^link a wallet to it or unlink it, acting as one of the caller's own identities$/u,
    act: async (a, token) => {
      const id = sharedConversation(a);
      const actor = a.tokens.callers.get(token)?.identity ?? '';
      const path = `/v1/conversations/${id}/payment-policy`;
      const linked = await call(a, 'PUT', path, {
        token,
        body: {
          actor,
          wallet: 'support-desk',
          limits: EXAMPLE_SPEND_LIMITS,
          reason: 'paid search',
        },
      });
      if (linked.status !== 200) {
        // A refused link commits nothing.
        expect(a.head(id)).toBe(0);
        return [linked.status];
      }
      const unlinked = await call(a, 'PUT', path, {
        token,
        body: { actor, wallet: '', reason: 'search contract ended' },
      });
      const policies = (await a.entries(id)).filter((e) => e.kind === 'payment_policy');
      const positions = [linked, unlinked].map(
        (answer) => (answer.json as { position?: number }).position,
      );
      expect(policies.map((e) => e.position)).toEqual(positions);
      return [linked.status, unlinked.status];
    },
  },
  {
    row: /^read the payment policy in force, acting as one of the caller's own identities$/u,
    act: async (a, token) => {
      const id = sharedConversation(a);
      const actor = a.tokens.callers.get(token)?.identity ?? '';
      const query = new URLSearchParams({ actor });
      const path = `/v1/conversations/${id}/payment-policy?${query.toString()}`;
      const answer = await call(a, 'GET', path, { token });
      if (answer.status === 200)
        expect(answer.json).toEqual({ conversationId: id, wallet: '', head: 0 });
      return [answer.status];
    },
  },
  {
    row: /^create a conversation/u,
    act: async (a, token) => [
      (await call(a, 'POST', '/v1/conversations', { token, body: {} })).status,
    ],
  },
];

/** Every model call a cell may need: a pause (a question or an approval), then a reply. */
const CELL_REPLIES = [askReply('which one?'), textReply('done')];
const APPROVAL_REPLIES = [calculatorReply('1 + 2'), textReply('It is 3.')];

describe('docs/api.md: who may do what', () => {
  it('has the caller columns the test knows and an action for every row', async () => {
    const { columns, rows } = await table('action');
    expect(columns).toEqual(['action', ...Object.keys(CALLERS)]);
    for (const [action = ''] of rows) {
      expect({ action, known: ACTIONS.some((a) => a.row.test(action)) }).toEqual({
        action,
        known: true,
      });
    }
  });

  it('holds for every cell: the real coordinator answers each caller as the table says', async () => {
    const { columns, rows } = await table('action');
    for (const [action = '', ...cells] of rows) {
      const entry = ACTIONS.find((a) => a.row.test(action));
      if (entry === undefined) continue;
      for (const [index, cell] of cells.entries()) {
        const column = columns[index + 1] ?? '';
        const token = CALLERS[column] ?? '';
        const a = (api = await startApi(
          entry.start?.() ?? {
            replies: action.includes('approval') ? APPROVAL_REPLIES : CELL_REPLIES,
          },
        ));
        const statuses = await entry.act(a, token);
        const expected = cell === 'yes' ? 'yes' : Number(cell);
        const got = statuses.every((s) => s >= 200 && s < 300)
          ? 'yes'
          : (statuses.find((s) => s < 200 || s >= 300) ?? 0);
        expect({ action, column, got }).toEqual({ action, column, got: expected });
        await a.close();
        api = undefined;
      }
    }
  }, 120_000);
});
