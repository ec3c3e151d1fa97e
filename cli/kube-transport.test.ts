import { describe, expect, it } from '@jest/globals';

import { ApiClient } from './api-client';
import { apiErrorOf } from './api-errors';
import { forbiddenHint, kubeTransport } from './kube-transport';
import { personaPaymentPolicySchema } from './api-answers';
import { ConversationOperation, PersonaOperation } from './transport';
import type { KubeConnection } from './kube-connection';

/** A connection whose fetch records the requests and answers `answer`. */
function connection(answer: () => Response = () => new Response('{}')) {
  const seen: { url: string; init: RequestInit }[] = [];
  const conn: KubeConnection = {
    server: 'https://k8s.example:6443',
    namespace: 'team a',
    contextName: 'dev',
    fetch: (url, init = {}) => {
      seen.push({ url, init });
      return Promise.resolve(answer());
    },
  };
  return { conn, seen };
}

const base =
  'https://k8s.example:6443/apis/api.polychrome.dev/v1alpha1/namespaces/team%20a/conversations/hello';

describe('kubeTransport', () => {
  it('maps every operation onto its subresource, the stream onto log', () => {
    const transport = kubeTransport(connection().conn);
    const url = (
      operation: ConversationOperation,
      rest?: string[],
      query?: Record<string, string>,
    ) =>
      transport.url({
        conversation: 'hello',
        operation,
        ...(rest === undefined ? {} : { rest }),
        ...(query === undefined ? {} : { query }),
      });
    expect(url(ConversationOperation.Messages)).toBe(`${base}/messages`);
    expect(url(ConversationOperation.Transcript)).toBe(`${base}/transcript`);
    expect(url(ConversationOperation.Stream, undefined, { since: '3' })).toBe(
      `${base}/log?since=3`,
    );
    expect(url(ConversationOperation.Approvals, ['apr/1'])).toBe(`${base}/approvals/apr%2F1`);
    expect(url(ConversationOperation.Questions, ['q1'])).toBe(`${base}/questions/q1`);
    expect(url(ConversationOperation.Export, undefined, { actor: 'kubernetes:dave' })).toBe(
      `${base}/export?actor=kubernetes%3Adave`,
    );
    expect(url(ConversationOperation.Repair)).toBe(`${base}/repair`);
    // The door's resolve takes the turn in the body: no path segment for it.
    expect(url(ConversationOperation.Resolve, ['turn_1'])).toBe(`${base}/resolve`);
    expect(transport.description).toContain('context dev, namespace team a');
  });

  it("sends a persona's payment policy to the cluster-scoped personapaymentpolicies by id, a PUT as its POST", async () => {
    const policy = { personaId: 'p/1', wallet: '', sequence: 0, history: [] };
    const { conn, seen } = connection(() => new Response(JSON.stringify(policy)));
    const client = new ApiClient({ transport: kubeTransport(conn) });
    const target = { persona: 'p/1', operation: PersonaOperation.PaymentPolicy };
    const schema = personaPaymentPolicySchema;
    await client.exchange(
      'GET',
      { ...target, query: { actor: 'kubernetes:dave' } },
      undefined,
      schema,
      'P',
      undefined,
    );
    await client.exchange('PUT', target, { actor: 'kubernetes:dave' }, schema, 'P', undefined);
    const policies =
      'https://k8s.example:6443/apis/api.polychrome.dev/v1alpha1/personapaymentpolicies';
    expect(seen.map((s) => [s.init.method, s.url])).toEqual([
      ['GET', `${policies}/p%2F1?actor=kubernetes%3Adave`],
      ['POST', `${policies}/p%2F1`],
    ]);
  });

  it('resolves through the resolve subresource with the turn in the body', async () => {
    const { conn, seen } = connection(
      () =>
        new Response(
          JSON.stringify({
            conversationId: 'uid-1',
            turnId: 'turn_1',
            decision: 'did_not_run',
            resultUnknown: false,
            actor: 'kubernetes:dave',
            position: 7,
            head: 8,
            message: 'resolved',
          }),
        ),
    );
    const client = new ApiClient({ transport: kubeTransport(conn) });
    await client.resolveTurn('hello', 'turn_1', {
      actor: 'kubernetes:dave',
      decision: 'did_not_run',
    });
    expect(seen).toHaveLength(1);
    expect(seen[0]?.url).toBe(`${base}/resolve`);
    expect(seen[0]?.init.method).toBe('POST');
    expect(JSON.parse(seen[0]?.init.body as string)).toEqual({
      actor: 'kubernetes:dave',
      decision: 'did_not_run',
      turnId: 'turn_1',
    });
  });

  it('cancels with DELETE and a comment-only body; answers with POST; declares JSON on each', async () => {
    const reply = {
      conversationId: 'c',
      turnId: 't',
      status: 'complete',
      reply: 'ok',
      requestedAt: 1,
    };
    const { conn, seen } = connection(() => new Response(JSON.stringify(reply)));
    const client = new ApiClient({ transport: kubeTransport(conn) });
    await client.answerApproval('hello', 'r1', { decision: 'cancel', comment: 'stale' });
    await client.answerApproval('hello', 'r1', { decision: 'approve' });
    await client.answerQuestion('hello', 'q1', { cancel: true });
    await client.answerQuestion('hello', 'q1', 'prod');
    expect(seen.map((s) => [s.init.method, s.url.slice(base.length), s.init.body])).toEqual([
      ['DELETE', '/approvals/r1', '{"comment":"stale"}'],
      ['POST', '/approvals/r1', '{"decision":"approve"}'],
      ['DELETE', '/questions/q1', '{}'],
      ['POST', '/questions/q1', '{"answer":"prod"}'],
    ]);
    // The door answers 415 to any POST or DELETE not declared JSON (docs/kube-api.md).
    expect(seen.map((s) => new Headers(s.init.headers).get('content-type'))).toEqual(
      Array(4).fill('application/json'),
    );
  });
});

describe('Kubernetes Status errors', () => {
  const status = (code: number, body: object): Response =>
    new Response(
      JSON.stringify({ kind: 'Status', apiVersion: 'v1', status: 'Failure', code, ...body }),
      {
        status: code,
      },
    );

  it("prints kube-apiserver's Forbidden message and the role to ask for", async () => {
    const error = await apiErrorOf(
      status(403, {
        reason: 'Forbidden',
        message:
          'conversations.api.polychrome.dev "hello" is forbidden: User "alice" cannot create resource "conversations/approvals" in API group "api.polychrome.dev" in the namespace "team"',
        details: { name: 'hello', group: 'api.polychrome.dev', kind: 'conversations' },
      }),
    );
    expect(error.code).toBe('permission_denied');
    expect(error.status).toBe(403);
    expect(error.message).toMatch(
      /^conversations\.api\.polychrome\.dev "hello" is forbidden: User "alice" cannot create resource "conversations\/approvals" .*; ask your cluster admin for a RoleBinding to polychrome-conversation-admin/u,
    );
  });

  it("keeps the door's Polychrome code from details.causes[0].reason", async () => {
    const error = await apiErrorOf(
      status(409, {
        reason: 'Conflict',
        message: 'approval r1 was answered already',
        details: {
          causes: [{ reason: 'already_exists', message: 'approval r1 was answered already' }],
        },
      }),
    );
    expect([error.code, error.message]).toEqual([
      'already_exists',
      'approval r1 was answered already',
    ]);
    const unknown = await apiErrorOf(
      status(404, {
        reason: 'NotFound',
        message: 'x not found',
        details: { causes: [{ reason: 'Nope' }] },
      }),
    );
    expect(unknown.code).toBe('not_found');
  });

  it.each([
    ['get', 'conversations/log', 'polychrome-conversation-reader'],
    ['get', 'conversations/transcript', 'polychrome-conversation-reader'],
    ['create', 'conversations/messages', 'polychrome-conversation-user'],
    ['create', 'conversations/questions', 'polychrome-conversation-user'],
    ['delete', 'conversations/questions', 'polychrome-conversation-admin'],
    ['get', 'conversations/export', 'polychrome-conversation-admin'],
    ['create', 'sessions', 'ClusterRoleBinding to polychrome-session-admin'],
    ['create', 'personapaymentpolicies', 'ClusterRoleBinding to polychrome-persona-payment-admin'],
    ['get', 'personapaymentpolicies', 'ClusterRoleBinding to polychrome-persona-payment-admin'],
  ])('names the role for %s %s', (verb, resource, role) => {
    expect(
      forbiddenHint(
        `User "alice" cannot ${verb} resource "${resource}" in API group "api.polychrome.dev"`,
      ),
    ).toContain(role);
  });

  it('adds no hint to a message about another group', () => {
    expect(
      forbiddenHint('User "alice" cannot get resource "pods" in API group ""'),
    ).toBeUndefined();
  });
});
