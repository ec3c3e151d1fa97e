/*
 * docs/api.md, "Status codes and who may do what", its persona table pinned to the code:
 * the test reads the table from the markdown and tries every cell as that caller on the
 * real route (`PUT`, `GET /v1/personas/{personaId}/payment-policy`) of the real API server,
 * over the state plane's real Records service on mutual TLS (the fixtures of
 * persona-payment-policy-api.test.ts). So a doc edit that gives a member the right, or
 * takes it from an admin, fails here, and a rule change fails unless the table changes with
 * it. A refused cell must also have recorded nothing.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { PersonaPaymentPolicies } from '../turns/persona-payment-policy';
import type { Caller } from '../turns/turn-service';
import {
  ADMIN,
  ALICE,
  CAROL,
  EDGE,
  call,
  startApi,
  TOKENS,
  type TestApi,
} from '../../test/support/api-fixtures';
import { docTable } from '../../test/support/doc-tables';
import { startTestRecords, type TestRecords } from '../../test/support/records-server';
import { EXAMPLE_SPEND_LIMITS } from '../../test/support/spend-limits';

const SECTION = '## Status codes and who may do what';
const HEADER = 'persona action';

/**
 * A new token for a caller the fixtures lack, added to the API's authenticator: one per
 * cell, as the API caches who a token is.
 */
function tokenFor(caller: Caller): string {
  serial += 1;
  const token = `pcs_${String(serial).padStart(43, 'T')}`;
  api.tokens.callers.set(token, caller);
  return token;
}

let records: TestRecords;
let api: TestApi;
let serial = 0;

beforeAll(async () => {
  records = await startTestRecords();
  api = await startApi({ personaPolicies: new PersonaPaymentPolicies(records.records) });
}, 60_000);
afterAll(async () => {
  await api?.close();
  await records?.close();
});

/** A fresh persona of the records (no policy yet); its id. */
function freshPersona(
  roles: readonly ('admin' | 'member' | 'edge')[] = ['member'],
): Promise<string> {
  serial += 1;
  return records.persona(`email:persona-${String(serial)}@example.com`, roles);
}

/** Who a cell acts as: the token, the identity it acts as (its own), the persona it acts on. */
interface CellCaller {
  readonly token: string;
  readonly actor: string;
  readonly personaId: string;
}

/** What a row does: read the policy, or change it. */
type Kind = 'set' | 'read';

/**
 * The caller of each column and the persona it acts on. The admin's own persona is a
 * persona of the records whose id its session names; the Kubernetes caller is what the
 * Kubernetes door lets in for a conversation's payment policy (kube-door.ts), with the verb
 * the row's action needs.
 */
const COLUMNS: Readonly<Record<string, (kind: Kind) => Promise<CellCaller>>> = {
  'admin, another persona': async () => ({
    token: TOKENS.admin,
    actor: ADMIN.identity,
    personaId: await freshPersona(),
  }),
  'admin, own persona': async () => {
    const personaId = await freshPersona(['admin']);
    const identity = `email:admin-${personaId}@example.com`;
    const own: Caller = {
      identity,
      identities: [identity],
      personaId,
      roles: ['admin'],
      sessionId: `session-${personaId}`,
    };
    return { token: tokenFor(own), actor: identity, personaId };
  },
  member: async () => ({
    token: TOKENS.alice,
    actor: ALICE.identity,
    personaId: await freshPersona(),
  }),
  edge: async () => ({ token: TOKENS.edge, actor: EDGE.identity, personaId: await freshPersona() }),
  'Kubernetes caller': async (kind) => {
    const conversationId = api.seed(ALICE.identity);
    const identity = 'kubernetes:dave';
    const kube: Caller = {
      identity,
      identities: [identity],
      personaId: '',
      roles: [],
      sessionId: '',
      kubernetes: {
        conversationId,
        subresource: 'payment-policy',
        verb: kind === 'read' ? 'get' : 'create',
        groups: ['system:authenticated'],
      },
    };
    return { token: tokenFor(kube), actor: identity, personaId: await freshPersona() };
  },
};

const pathOf = (personaId: string): string => `/v1/personas/${personaId}/payment-policy`;
const history = async (personaId: string) =>
  (await records.records.getPersonaPaymentPolicy(personaId)).history;

/** The policy another admin (the fixtures' root) set first, for the rows that need one. */
async function setByRoot(personaId: string): Promise<void> {
  const set = await call(api, 'PUT', pathOf(personaId), {
    token: TOKENS.admin,
    body: {
      actor: ADMIN.identity,
      wallet: 'team-wallet',
      limits: EXAMPLE_SPEND_LIMITS,
      reason: 'first',
    },
  });
  expect(set.status).toBe(200);
}

/** What each row does, by its words: the statuses of what it takes. Every row needs one. */
const ACTIONS: readonly {
  readonly row: RegExp;
  readonly kind: Kind;
  readonly act: (cell: CellCaller) => Promise<number[]>;
}[] = [
  {
    row: /^set a persona's payment policy, acting as one of the caller's own identities$/u,
    kind: 'set',
    act: async ({ token, actor, personaId }) => {
      const body = {
        actor,
        wallet: 'team-wallet',
        limits: EXAMPLE_SPEND_LIMITS,
        reason: 'reports',
      };
      const set = await call(api, 'PUT', pathOf(personaId), { token, body });
      const recorded = await history(personaId);
      if (set.status === 200) {
        expect(recorded.map((c) => [c.wallet, c.setBy, c.reason])).toEqual([
          ['team-wallet', actor, 'reports'],
        ]);
      } else expect(recorded).toEqual([]);
      return [set.status];
    },
  },
  {
    row: /^clear a persona's payment policy, acting as one of the caller's own identities$/u,
    kind: 'set',
    act: async ({ token, actor, personaId }) => {
      await setByRoot(personaId);
      const body = { actor, wallet: '', reason: 'contract ended' };
      const cleared = await call(api, 'PUT', pathOf(personaId), { token, body });
      const recorded = await history(personaId);
      expect(recorded.map((c) => [c.wallet, c.limitsJson === '', c.setBy])).toEqual([
        ['team-wallet', false, ADMIN.identity],
        ...(cleared.status === 200 ? [['', true, actor]] : []),
      ]);
      return [cleared.status];
    },
  },
  {
    row: /^read a persona's payment policy and its history, acting as one of the caller's own identities$/u,
    kind: 'read',
    act: async ({ token, actor, personaId }) => {
      await setByRoot(personaId);
      const query = new URLSearchParams({ actor }).toString();
      const read = await call(api, 'GET', `${pathOf(personaId)}?${query}`, { token });
      if (read.status === 200) {
        expect(read.json).toMatchObject({
          personaId,
          wallet: 'team-wallet',
          setBy: ADMIN.identity,
          history: [{ sequence: 1, setBy: ADMIN.identity, reason: 'first' }],
        });
      }
      return [read.status];
    },
  },
  {
    row: /^set or read it acting as an identity that is not the caller's$/u,
    kind: 'set',
    act: async ({ token, personaId }) => {
      const actor = CAROL.identity;
      const body = {
        actor,
        wallet: 'team-wallet',
        limits: EXAMPLE_SPEND_LIMITS,
        reason: 'as carol',
      };
      const set = await call(api, 'PUT', pathOf(personaId), { token, body });
      const query = new URLSearchParams({ actor }).toString();
      const read = await call(api, 'GET', `${pathOf(personaId)}?${query}`, { token });
      expect(await history(personaId)).toEqual([]);
      return [set.status, read.status];
    },
  },
];

describe("docs/api.md: who may set and read a persona's payment policy", () => {
  it('has the caller columns the test knows and an action for every row', async () => {
    const { columns, rows } = await docTable('api.md', SECTION, HEADER);
    expect(columns).toEqual([HEADER, ...Object.keys(COLUMNS)]);
    for (const [action = ''] of rows) {
      expect({ action, known: ACTIONS.some((a) => a.row.test(action)) }).toEqual({
        action,
        known: true,
      });
    }
  });

  it('holds for every cell: the real route and the real records answer each caller as the table says', async () => {
    const { columns, rows } = await docTable('api.md', SECTION, HEADER);
    for (const [action = '', ...cells] of rows) {
      const entry = ACTIONS.find((a) => a.row.test(action));
      if (entry === undefined) continue;
      for (const [index, cell] of cells.entries()) {
        const column = columns[index + 1] ?? '';
        const caller = COLUMNS[column];
        if (caller === undefined) throw new Error(`no caller for the column "${column}"`);
        const statuses = await entry.act(await caller(entry.kind));
        const expected = cell === 'yes' ? 'yes' : Number(cell);
        const got = statuses.every((s) => s >= 200 && s < 300)
          ? 'yes'
          : (statuses.find((s) => s < 200 || s >= 300) ?? 0);
        expect({ action, column, got }).toEqual({ action, column, got: expected });
      }
    }
  }, 60_000);
});
