/*
 * docs/kube-api.md and docs/api.md, "Who may read, post and approve", pinned to the code.
 * The test reads the table from both pages (they must be the same) and works every cell out
 * from what decides it:
 *
 * - a Kubernetes row from config/kube-api/cluster-roles.yaml, as kube-apiserver's RBAC
 *   reads it: a ClusterRole's own rules, and for the built-in view, edit and admin the rules
 *   of every ClusterRole labelled to aggregate into them (view into edit, edit into admin,
 *   as Kubernetes' own roles are labelled); then the door's grant for that request through
 *   the turn rules (operator/turns/plan-access.ts, operator/turns/forensic-access.ts);
 * - a public API row from the same turn rules, for that persona on that conversation.
 *
 * So a role that starts to grant content to `view`, or a turn rule that lets a stranger
 * read a private conversation, fails here unless the table changes with it.
 */
import { openedTurn } from '../turns/view-state';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from '@jest/globals';
import { parseAllDocuments } from 'yaml';
import { ApprovalRequest } from '../../proto/gen/polychrome/events/v1/events';
import { Visibility } from '../api/v1alpha1/conversation-values';
import { type Conversation } from '../api/v1alpha1/conversation-types';
import { type ConversationSpec } from '../api/v1alpha1/conversation-spec';
import { ForensicAction, forensicRefusal } from '../turns/forensic-access';
import type { TurnView } from '../turns/journal-view-types';
import { authorizeApproval, authorizeMemoryClear, authorizeUse } from '../turns/plan-access';
import type { Caller } from '../turns/turn-service';

const ROOT = join(__dirname, '..', '..');
const SECTION = '## Who may read, post and approve';
const COLUMNS = [
  'door',
  'who',
  'the Conversation',
  'transcript, log, memory',
  'export, replay, verify',
  'post a message',
  'clear memory',
  'answer an approval',
] as const;
type Operation = Exclude<(typeof COLUMNS)[number], 'door' | 'who'>;
const OPERATIONS = COLUMNS.slice(2) as readonly Operation[];

/** The table's rows (header first), each a list of trimmed cells, from one docs page. */
function tableOf(page: string): string[][] {
  const text = readFileSync(join(ROOT, 'docs', page), 'utf8');
  const start = text.indexOf(SECTION);
  if (start < 0) throw new Error(`docs/${page} has no "${SECTION}" section`);
  const end = text.indexOf('\n## ', start + SECTION.length);
  return text
    .slice(start, end < 0 ? undefined : end)
    .split('\n')
    .filter((line) => line.startsWith('|'))
    .map((line) =>
      line
        .slice(1, -1)
        .split('|')
        .map((cell) => cell.trim()),
    )
    .filter((cells) => !cells.every((cell) => /^-+$/u.test(cell)));
}

// ---- RBAC, as kube-apiserver reads config/kube-api/cluster-roles.yaml ----

interface Rule {
  readonly apiGroups: readonly string[];
  readonly resources: readonly string[];
  readonly verbs: readonly string[];
}
interface ClusterRole {
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly rules: readonly Rule[];
}

function clusterRoles(): ClusterRole[] {
  const text = readFileSync(join(ROOT, 'config', 'kube-api', 'cluster-roles.yaml'), 'utf8');
  return parseAllDocuments(text)
    .map((doc) => doc.toJS() as Record<string, unknown>)
    .filter((o) => o['kind'] === 'ClusterRole')
    .map((o) => {
      const metadata = o['metadata'] as { name: string; labels?: Record<string, string> };
      return {
        name: metadata.name,
        labels: metadata.labels ?? {},
        rules: (o['rules'] as Rule[] | undefined) ?? [],
      };
    });
}

/** The built-in roles and the roles whose rules Kubernetes aggregates into each. */
const BUILT_IN: Readonly<Record<string, readonly string[]>> = {
  view: ['view'],
  edit: ['view', 'edit'],
  admin: ['view', 'edit', 'admin'],
};

/** The rules a RoleBinding to `role` gives, aggregation included. */
function rulesOf(role: string, roles: readonly ClusterRole[]): readonly Rule[] {
  const aggregated = BUILT_IN[role];
  if (aggregated === undefined) return roles.find((r) => r.name === role)?.rules ?? [];
  return roles
    .filter((r) =>
      aggregated.some((into) => r.labels[`rbac.authorization.k8s.io/aggregate-to-${into}`]),
    )
    .flatMap((r) => r.rules);
}

const matches = (list: readonly string[], value: string): boolean =>
  list.includes(value) || list.includes('*');

function rbacAllows(
  rules: readonly Rule[],
  group: string,
  resource: string,
  verb: string,
): boolean {
  return rules.some(
    (r) => matches(r.apiGroups, group) && matches(r.resources, resource) && matches(r.verbs, verb),
  );
}

// ---- the turn rules, for one caller on one conversation ----

const CONVERSATION_ID = '0b5c3a9e-4f0d-4d0a-9a52-6f1e2b7c8d90';
const OWNER = 'web:mallory';
const FRIEND = 'email:bob@example.com';

function conversation(spec: Partial<ConversationSpec>): Conversation {
  return {
    apiVersion: 'polychrome.dev/v1alpha1',
    kind: 'Conversation',
    metadata: { name: 'conv-q8x9t', namespace: 'polychrome-conversations', uid: CONVERSATION_ID },
    spec: { owner: OWNER, visibility: Visibility.Private, ...spec },
  };
}

/** A turn another person's message started, paused on an approval that names nobody. */
function pausedTurn(): { turn: TurnView; request: ApprovalRequest } {
  const request = ApprovalRequest.fromPartial({ requestId: 'req-1', toolName: 'calculator' });
  const turn: TurnView = openedTurn({
    turnId: 'turn-1',
    idempotencyKey: 'k',
    text: 'what is 6 * 7?',
    attribution: {
      caller: 'email:someone@example.com',
      participants: [],
      persona: 'persona-x',
      session: 's-1',
    },
    receivedAtMs: 0,
    messagePosition: 0,
  });
  return { turn, request };
}

function persona(identity: string, role: string): Caller {
  return {
    identity,
    identities: [identity],
    personaId: `p-${identity}`,
    roles: [role],
    sessionId: 's',
  };
}

/** What the turn rules answer `caller` for each operation on `target`. */
function turnRules(caller: Caller, target: Conversation): Record<Operation, boolean> {
  const use = authorizeUse(caller, CONVERSATION_ID, target) === undefined;
  const { turn, request } = pausedTurn();
  return {
    'the Conversation': use,
    'transcript, log, memory': use,
    'export, replay, verify':
      forensicRefusal(caller, CONVERSATION_ID, target, ForensicAction.Export, caller.identity) ===
      undefined,
    'post a message': use,
    'clear memory': authorizeMemoryClear(caller, CONVERSATION_ID, target) === undefined,
    'answer an approval':
      use && authorizeApproval(caller, turn, request, CONVERSATION_ID) === undefined,
  };
}

/** The RBAC request behind each operation on the Kubernetes door. */
const KUBE_REQUESTS: Readonly<Record<Operation, readonly [string, string, string][]>> = {
  'the Conversation': [['polychrome.dev', 'conversations', 'get']],
  'transcript, log, memory': [
    ['api.polychrome.dev', 'conversations/transcript', 'get'],
    ['api.polychrome.dev', 'conversations/log', 'get'],
    ['api.polychrome.dev', 'conversations/memory', 'get'],
  ],
  'export, replay, verify': [['api.polychrome.dev', 'conversations/export', 'get']],
  'post a message': [['api.polychrome.dev', 'conversations/messages', 'create']],
  'clear memory': [['api.polychrome.dev', 'conversations/memory', 'delete']],
  'answer an approval': [['api.polychrome.dev', 'conversations/approvals', 'create']],
};

/**
 * A Kubernetes row: kube-apiserver lets the request through only if RBAC allows it, then
 * the door hands the turn rules a grant for exactly that subresource and verb, whatever the
 * conversation's owner and visibility (it is a stranger's private conversation here).
 */
function kubernetesCell(rules: readonly Rule[], operation: Operation): boolean {
  const requests = KUBE_REQUESTS[operation];
  const allowed = requests.map(([group, resource, verb]) =>
    rbacAllows(rules, group, resource, verb),
  );
  // transcript, log and memory go together in the table: a role granting one without the others
  // needs a row of its own.
  expect({ operation, split: new Set(allowed).size > 1 }).toEqual({ operation, split: false });
  if (!allowed.every(Boolean)) return false;
  const [, resource = '', verb = ''] = requests[0] ?? [];
  const subresource = resource.replace(/^conversations\/?/u, '');
  if (subresource === '') return true; // the Conversation object: RBAC alone
  const caller: Caller = {
    identity: 'kubernetes:system%3Aserviceaccount%3Adefault%3Areader',
    identities: ['kubernetes:system%3Aserviceaccount%3Adefault%3Areader'],
    personaId: '',
    roles: [],
    sessionId: '',
    kubernetes: { conversationId: CONVERSATION_ID, subresource, verb, groups: [] },
  };
  return turnRules(caller, conversation({}))[operation];
}

/** A public API row's caller and conversation, by the row's words. Every row needs one. */
const PUBLIC_ROWS: readonly { row: RegExp; cases: () => [Caller, Conversation][] }[] = [
  {
    row: /^its owner, a `member` or `edge`$/u,
    cases: () => [
      [persona(OWNER, 'member'), conversation({})],
      [persona(OWNER, 'edge'), conversation({})],
    ],
  },
  {
    row: /^a participant of a `shared` conversation$/u,
    cases: () => [
      [
        persona(FRIEND, 'member'),
        conversation({ visibility: Visibility.Shared, participants: [FRIEND] }),
      ],
    ],
  },
  {
    row: /^named in `participants` of a `private` conversation$/u,
    cases: () => [[persona(FRIEND, 'member'), conversation({ participants: [FRIEND] })]],
  },
  {
    row: /^any other `member` or `edge`$/u,
    cases: () => [
      [persona(FRIEND, 'member'), conversation({})],
      [persona('bot:desk', 'edge'), conversation({ visibility: Visibility.Shared })],
    ],
  },
  {
    row: /^an `admin`$/u,
    cases: () => [[persona('email:root@example.com', 'admin'), conversation({})]],
  },
];

const PAGES = ['kube-api.md', 'api.md'] as const;

describe('docs: who may read, post and approve', () => {
  it('is one table, the same in docs/kube-api.md and docs/api.md, with the columns the test knows', () => {
    const [first = [], second = []] = PAGES.map(tableOf);
    expect(second).toEqual(first);
    expect(first[0]).toEqual([...COLUMNS]);
  });

  it('has a Kubernetes row for view, edit, admin, every shipped ClusterRole and no role at all', () => {
    const rows = tableOf('kube-api.md').filter(([door]) => door === 'Kubernetes');
    const named = rows.map(([, who = '']) => /^`([^`]+)`$/u.exec(who)?.[1] ?? who);
    expect(named.sort()).toEqual(
      [
        ...Object.keys(BUILT_IN),
        ...clusterRoles().map((r) => r.name),
        "no role in the conversation's namespace",
      ].sort(),
    );
  });

  it('holds for every Kubernetes cell: cluster-roles.yaml as RBAC aggregates it, then the door grant through the turn rules', () => {
    const roles = clusterRoles();
    for (const [door, who = '', ...cells] of tableOf('kube-api.md')) {
      if (door !== 'Kubernetes') continue;
      const role = /^`([^`]+)`$/u.exec(who)?.[1];
      const rules = role === undefined ? [] : rulesOf(role, roles);
      for (const [index, operation] of OPERATIONS.entries()) {
        const got = kubernetesCell(rules, operation) ? 'yes' : 'no';
        expect({ who, operation, got }).toEqual({ who, operation, got: cells[index] });
      }
    }
  });

  it('holds for every public API cell: the turn rules answer that persona on that conversation', () => {
    for (const [door, who = '', ...cells] of tableOf('api.md')) {
      if (door !== 'public API') continue;
      const entry = PUBLIC_ROWS.find((r) => r.row.test(who));
      expect({ who, known: entry !== undefined }).toEqual({ who, known: true });
      for (const [caller, target] of entry?.cases() ?? []) {
        const answers = turnRules(caller, target);
        for (const [index, operation] of OPERATIONS.entries()) {
          const got = answers[operation] ? 'yes' : 'no';
          expect({ who, caller: caller.roles[0], operation, got }).toEqual({
            who,
            caller: caller.roles[0],
            operation,
            got: cells[index],
          });
        }
      }
    }
  });

  it('keeps every conversation content out of view: no rule that view aggregates names transcript, log, memory or export', () => {
    const view = rulesOf('view', clusterRoles());
    for (const resource of [
      'conversations/transcript',
      'conversations/log',
      'conversations/memory',
      'conversations/export',
    ]) {
      expect({ resource, view: rbacAllows(view, 'api.polychrome.dev', resource, 'get') }).toEqual({
        resource,
        view: false,
      });
    }
    // Nor through a wildcard on the group.
    expect(
      view.some((r) => r.apiGroups.includes('api.polychrome.dev') && r.resources.includes('*')),
    ).toBe(false);
  });
});
