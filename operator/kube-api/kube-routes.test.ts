import { describe, expect, it } from '@jest/globals';
import { Operation } from '../public-api/routes';
import { apiResourceList, matchKubeRoute } from './kube-routes';
import { kubeStatusBody } from './kube-status';

const base = '/apis/api.polychrome.dev/v1alpha1/namespaces/team/conversations/hello';

describe('matchKubeRoute', () => {
  it.each([
    ['GET', `${base}/transcript`, Operation.GetTranscript],
    ['POST', `${base}/messages`, Operation.PostMessage],
    ['GET', `${base}/log`, Operation.StreamEvents],
    ['GET', `${base}/memory`, Operation.GetMemory],
    ['DELETE', `${base}/memory`, Operation.ClearMemory],
    ['DELETE', `${base}/memory/user%20city`, Operation.ClearMemory],
  ])('%s %s runs %s on team/hello', (method, path, operation) => {
    const match = matchKubeRoute(method, path);
    expect(match.kind === 'subresource' && match.subresource.operation).toBe(operation);
    expect(match.kind === 'subresource' && [match.namespace, match.name]).toEqual([
      'team',
      'hello',
    ]);
  });

  it('matches the UI files as GET only, one flat name under namespaces/{ns}/ui', () => {
    const ui = '/apis/api.polychrome.dev/v1alpha1/namespaces/team/ui';
    expect(matchKubeRoute('GET', `${ui}/index.html`)).toEqual({
      kind: 'ui',
      namespace: 'team',
      file: 'index.html',
    });
    expect(matchKubeRoute('POST', `${ui}/index.html`)).toEqual({
      kind: 'method_not_allowed',
      allow: ['GET'],
    });
    expect(matchKubeRoute('GET', `${ui}/a/b`).kind).toBe('not_found');
    expect(matchKubeRoute('GET', ui).kind).toBe('not_found');
  });

  it.each([
    ['POST', 'approvals', Operation.AnswerApproval, 'create'],
    ['DELETE', 'approvals', Operation.AnswerApproval, 'delete'],
    ['POST', 'questions', Operation.AnswerQuestion, 'create'],
    ['DELETE', 'questions', Operation.AnswerQuestion, 'delete'],
  ])('%s %s/{requestId} runs %s, RBAC verb %s', (method, sub, operation, verb) => {
    const match = matchKubeRoute(method, `${base}/${sub}/req%3A1`);
    expect(
      match.kind === 'subresource' && [match.subresource.operation, match.subresource.verb],
    ).toEqual([operation, verb]);
    expect(match.kind === 'subresource' && match.requestId).toBe('req:1');
  });

  it.each([
    ['POST', `${base}/approvals`, 'not_found'],
    ['GET', `${base}/approvals/r1`, 'method_not_allowed'],
    ['POST', `${base}/messages/r1`, 'not_found'],
    ['POST', `${base}/approvals/r1/more`, 'not_found'],
    ['DELETE', `${base}/approvals/%E0%A4%A`, 'not_found'],
  ])('%s %s is %s (per-request subresources)', (method, path, kind) => {
    expect(matchKubeRoute(method, path).kind).toBe(kind);
  });

  it('decodes the name and refuses one that does not decode', () => {
    const match = matchKubeRoute(
      'GET',
      '/apis/api.polychrome.dev/v1alpha1/namespaces/team/conversations/a%2Db/transcript',
    );
    expect(match.kind === 'subresource' && match.name).toBe('a-b');
    expect(matchKubeRoute('GET', `${base.replace('hello', '%E0%A4%A')}/transcript`).kind).toBe(
      'not_found',
    );
  });

  it.each([
    ['GET', `${base}/stream`, 'not_found'],
    ['GET', `${base}`, 'not_found'],
    ['GET', `${base}/transcript/extra`, 'not_found'],
    [
      'GET',
      '/apis/polychrome.dev/v1alpha1/namespaces/team/conversations/hello/transcript',
      'not_found',
    ],
    ['POST', `${base}/transcript`, 'method_not_allowed'],
    ['GET', `${base}/messages`, 'method_not_allowed'],
    ['POST', '/apis/api.polychrome.dev/v1alpha1', 'method_not_allowed'],
  ])('%s %s is %s', (method, path, kind) => {
    expect(matchKubeRoute(method, path).kind).toBe(kind);
  });

  it('matches the cluster-scoped sessions: POST mints, DELETE sessions/{id} revokes', () => {
    const sessions = '/apis/api.polychrome.dev/v1alpha1/sessions';
    expect(matchKubeRoute('POST', sessions)).toEqual({
      kind: 'sessions',
      action: { kind: 'create' },
    });
    expect(matchKubeRoute('DELETE', `${sessions}/s-1%2D2`)).toEqual({
      kind: 'sessions',
      action: { kind: 'revoke', id: 's-1-2' },
    });
    expect(matchKubeRoute('GET', sessions)).toEqual({
      kind: 'method_not_allowed',
      allow: ['POST'],
    });
    expect(matchKubeRoute('POST', `${sessions}/s-1`)).toEqual({
      kind: 'method_not_allowed',
      allow: ['DELETE'],
    });
    expect(matchKubeRoute('DELETE', `${sessions}/s-1/extra`).kind).toBe('not_found');
    expect(matchKubeRoute('DELETE', `${sessions}/%E0%A4%A`).kind).toBe('not_found');
    // Not namespaced: a namespace admin's RoleBinding never reaches it.
    expect(
      matchKubeRoute('POST', '/apis/api.polychrome.dev/v1alpha1/namespaces/team/sessions').kind,
    ).toBe('not_found');
  });

  it('matches the cluster-scoped personaroles: POST sets roles, nothing else', () => {
    const roles = '/apis/api.polychrome.dev/v1alpha1/personaroles';
    expect(matchKubeRoute('POST', roles)).toEqual({
      kind: 'sessions',
      action: { kind: 'set-roles' },
    });
    expect(matchKubeRoute('GET', roles)).toEqual({ kind: 'method_not_allowed', allow: ['POST'] });
    expect(matchKubeRoute('POST', `${roles}/admin`).kind).toBe('not_found');
  });

  it("matches a persona's payment policy by persona id: POST sets it, GET reads it, nothing else", () => {
    const policies = '/apis/api.polychrome.dev/v1alpha1/personapaymentpolicies';
    expect(matchKubeRoute('POST', `${policies}/p-1%5F2`)).toEqual({
      kind: 'persona_policy',
      personaId: 'p-1_2',
      method: 'POST',
    });
    expect(matchKubeRoute('GET', `${policies}/p-1/`)).toEqual({
      kind: 'persona_policy',
      personaId: 'p-1',
      method: 'GET',
    });
    expect(matchKubeRoute('DELETE', `${policies}/p-1`)).toEqual({
      kind: 'method_not_allowed',
      allow: ['POST', 'GET'],
    });
    // No list, no collection POST, nothing below a persona, no namespaced copy.
    expect(matchKubeRoute('GET', policies).kind).toBe('not_found');
    expect(matchKubeRoute('POST', policies).kind).toBe('not_found');
    expect(matchKubeRoute('GET', `${policies}/p-1/history`).kind).toBe('not_found');
    expect(matchKubeRoute('GET', `${policies}/%E0%A4%A`).kind).toBe('not_found');
    expect(
      matchKubeRoute(
        'POST',
        '/apis/api.polychrome.dev/v1alpha1/namespaces/team/personapaymentpolicies/p-1',
      ).kind,
    ).toBe('not_found');
  });

  it.each(['/apis', '/apis/api.polychrome.dev', '/apis/api.polychrome.dev/v1alpha1', '/apis/'])(
    'GET %s is discovery',
    (path) => {
      expect(matchKubeRoute('GET', path).kind).toBe('discovery');
    },
  );
});

describe('apiResourceList', () => {
  it('lists every subresource once, namespaced, with a kind and its verbs', () => {
    expect(apiResourceList()).toEqual({
      kind: 'APIResourceList',
      apiVersion: 'v1',
      groupVersion: 'api.polychrome.dev/v1alpha1',
      resources: [
        {
          name: 'conversations/transcript',
          singularName: '',
          namespaced: true,
          kind: 'Transcript',
          verbs: ['get'],
        },
        {
          name: 'conversations/memory',
          singularName: '',
          namespaced: true,
          kind: 'Memory',
          verbs: ['get', 'delete'],
        },
        {
          name: 'conversations/messages',
          singularName: '',
          namespaced: true,
          kind: 'TurnReply',
          verbs: ['create'],
        },
        {
          name: 'conversations/log',
          singularName: '',
          namespaced: true,
          kind: 'EventStream',
          verbs: ['get'],
        },
        {
          name: 'conversations/export',
          singularName: '',
          namespaced: true,
          kind: 'JournalExport',
          verbs: ['get'],
        },
        {
          name: 'conversations/repair',
          singularName: '',
          namespaced: true,
          kind: 'RepairResult',
          verbs: ['create'],
        },
        {
          name: 'conversations/erase',
          singularName: '',
          namespaced: true,
          kind: 'EraseResult',
          verbs: ['create'],
        },
        {
          name: 'conversations/approvals',
          singularName: '',
          namespaced: true,
          kind: 'TurnReply',
          verbs: ['create', 'delete'],
        },
        {
          name: 'conversations/questions',
          singularName: '',
          namespaced: true,
          kind: 'TurnReply',
          verbs: ['create', 'delete'],
        },
        {
          name: 'conversations/resolve',
          singularName: '',
          namespaced: true,
          kind: 'ResolveResult',
          verbs: ['create'],
        },
        {
          name: 'conversations/accept-rollback',
          singularName: '',
          namespaced: true,
          kind: 'AcceptRollbackResult',
          verbs: ['create'],
        },
        {
          name: 'conversations/payment-policy',
          singularName: '',
          namespaced: true,
          kind: 'PaymentPolicySet',
          verbs: ['create', 'get'],
        },
        {
          name: 'sessions',
          singularName: '',
          namespaced: false,
          kind: 'Session',
          verbs: ['create', 'delete'],
        },
        {
          name: 'personaroles',
          singularName: '',
          namespaced: false,
          kind: 'PersonaRoles',
          verbs: ['create'],
        },
        {
          name: 'personapaymentpolicies',
          singularName: '',
          namespaced: false,
          kind: 'PersonaPaymentPolicy',
          verbs: ['create', 'get'],
        },
      ],
    });
  });
});

describe('kubeStatusBody', () => {
  it('answers a refusal as the Status kubectl prints, with the Polychrome code kept', () => {
    expect(
      kubeStatusBody(403, { code: 'permission_denied', message: 'no', details: { name: 'hello' } }),
    ).toEqual({
      kind: 'Status',
      apiVersion: 'v1',
      metadata: {},
      status: 'Failure',
      message: 'no',
      reason: 'Forbidden',
      details: {
        group: 'api.polychrome.dev',
        kind: 'conversations',
        causes: [{ reason: 'permission_denied', message: 'no' }],
        polychrome: { name: 'hello' },
      },
      code: 403,
    });
  });
});
