import { describe, expect, it } from '@jest/globals';
import { matchRoute, ROUTES } from './routes';

const ID = '0b5c3a9e-4f0d-4d0a-9a52-6f1e2b7c8d90';

describe('matchRoute', () => {
  it.each([
    ['POST', '/v1/conversations', 'createConversation', {}],
    ['GET', `/v1/conversations/${ID}`, 'getConversation', { conversationId: ID }],
    ['POST', `/v1/conversations/${ID}/messages`, 'postMessage', { conversationId: ID }],
    ['GET', `/v1/conversations/${ID}/transcript`, 'getTranscript', { conversationId: ID }],
    [
      'POST',
      `/v1/conversations/${ID}/approvals/r%3A1`,
      'answerApproval',
      { conversationId: ID, requestId: 'r:1' },
    ],
    [
      'POST',
      `/v1/conversations/${ID}/questions/q-1`,
      'answerQuestion',
      { conversationId: ID, requestId: 'q-1' },
    ],
    ['GET', `/v1/conversations/${ID}/stream`, 'streamEvents', { conversationId: ID }],
    ['GET', '/v1/openapi.json', 'getOpenApi', {}],
  ])('%s %s is %s', (method, path, operation, params) => {
    const match = matchRoute(method, path);
    expect(match.kind).toBe('matched');
    if (match.kind !== 'matched') return;
    expect(match.route.operation).toBe(operation);
    expect(match.params).toEqual(params);
  });

  it.each([
    '/',
    '/v1',
    '/v1/conversations/',
    `/v1/conversations/${ID}/`,
    `/v1/conversations//messages`,
    `/v1/conversations/${ID}/messages/extra`,
    '/v2/conversations',
  ])('%s matches nothing', (path) => {
    expect(matchRoute('GET', path)).toEqual({ kind: 'not_found' });
  });

  it('answers method_not_allowed with every method the path has', () => {
    expect(matchRoute('PUT', `/v1/conversations/${ID}`)).toEqual({
      kind: 'method_not_allowed',
      template: '/v1/conversations/{conversationId}',
      allow: ['GET'],
    });
    expect(matchRoute('HEAD', '/v1/conversations')).toMatchObject({ allow: ['POST'] });
  });

  it('keeps a segment that does not percent-decode as sent (the id check refuses it)', () => {
    expect(matchRoute('GET', '/v1/conversations/%E0%A4%A')).toMatchObject({
      kind: 'matched',
      params: { conversationId: '%E0%A4%A' },
    });
  });

  it('has one row per method and template', () => {
    const keys = ROUTES.map((r) => `${r.method} ${r.template}`);
    expect(new Set(keys).size).toBe(keys.length);
  });
});
