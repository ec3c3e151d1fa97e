import { describe, expect, it } from '@jest/globals';

import { DASHBOARD_COOKIE, decide, isSecret, type DashboardRequest } from './dashboard-policy';

const policy = { host: '127.0.0.1:4567', namespace: 'team', secret: 's3cret-abcdefghijklmnop' };
const door = '/apis/api.polychrome.dev/v1alpha1/namespaces/team';
const crd = '/apis/polychrome.dev/v1alpha1/namespaces/team';
const cookie = `${DASHBOARD_COOKIE}=${policy.secret}`;

function get(url: string, headers: DashboardRequest['headers'] = {}): DashboardRequest {
  return { method: 'GET', url, headers: { host: policy.host, cookie, ...headers } };
}

describe('the dashboard proxy policy', () => {
  it.each([
    `${door}/ui/index.html`,
    `${door}/ui/app.js`,
    `${crd}/conversations`,
    `${crd}/conversations/hello`,
    `${door}/conversations/hello/transcript`,
    `${door}/conversations/hello/log`,
    `${door}/conversations/hello/log?since=3`,
    `${door}/conversations/hello/export`,
  ])('forwards GET %s with the session cookie', (url) => {
    expect(decide(get(url), policy)).toMatchObject({ kind: 'forward', path: url });
  });

  it('asks for the actor only on an export that names none', () => {
    expect(decide(get(`${door}/conversations/hello/export`), policy)).toMatchObject({
      needsActor: true,
    });
    expect(
      decide(get(`${door}/conversations/hello/export?actor=kubernetes%3Adave`), policy),
    ).toMatchObject({
      needsActor: false,
      path: `${door}/conversations/hello/export?actor=kubernetes%3Adave`,
    });
    expect(decide(get(`${door}/conversations/hello/log`), policy)).toMatchObject({
      needsActor: false,
    });
  });

  it.each([
    ['a write subresource', `${door}/conversations/hello/messages`],
    ['repair', `${door}/conversations/hello/repair`],
    ['sessions', '/apis/api.polychrome.dev/v1alpha1/sessions'],
    [
      'another namespace',
      '/apis/api.polychrome.dev/v1alpha1/namespaces/other/conversations/hello/transcript',
    ],
    [
      'another namespace of the CRD',
      '/apis/polychrome.dev/v1alpha1/namespaces/other/conversations',
    ],
    ['every namespace', '/apis/polychrome.dev/v1alpha1/conversations'],
    ['secrets', '/api/v1/namespaces/team/secrets'],
    ['a nested UI path', `${door}/ui/a/b.js`],
    ['an encoded slash', `${crd}/conversations/a%2Fb`],
    ['a path that climbs out', `${door}/ui/../../../../api/v1/namespaces/team/secrets`],
    ['discovery', '/apis'],
  ])('refuses %s', (_, url) => {
    expect(decide(get(url), policy)).toMatchObject({ kind: 'refuse', status: 403 });
  });

  it('refuses query parameters it does not know, naming them', () => {
    const got = decide(get(`${crd}/conversations?watch=true`), policy);
    expect(got).toMatchObject({ kind: 'refuse', status: 400 });
    expect(got.kind === 'refuse' && got.message).toContain('"watch"');
    expect(decide(get(`${door}/conversations/hello/transcript?actor=x`), policy)).toMatchObject({
      status: 400,
    });
  });

  it('refuses every method but GET', () => {
    for (const method of ['POST', 'PUT', 'DELETE', 'PATCH', 'HEAD', 'OPTIONS']) {
      expect(
        decide({ ...get(`${door}/conversations/hello/transcript`), method }, policy),
      ).toMatchObject({
        kind: 'refuse',
        status: 405,
      });
    }
  });

  it('refuses another Host (DNS rebinding), before anything else', () => {
    for (const host of ['evil.example:4567', 'localhost:4567', '127.0.0.1:4568', undefined]) {
      expect(decide(get('/?token=' + policy.secret, { host }), policy)).toMatchObject({
        status: 421,
      });
    }
  });

  it('refuses a foreign Origin and a cross-site fetch, even with the cookie', () => {
    const url = `${door}/conversations/hello/transcript`;
    expect(decide(get(url, { origin: 'http://evil.example' }), policy)).toMatchObject({
      status: 403,
    });
    expect(decide(get(url, { origin: 'http://127.0.0.1:9999' }), policy)).toMatchObject({
      status: 403,
    });
    expect(decide(get(url, { origin: 'null' }), policy)).toMatchObject({ status: 403 });
    expect(decide(get(url, { 'sec-fetch-site': 'cross-site' }), policy)).toMatchObject({
      status: 403,
    });
    expect(decide(get(url, { origin: `http://${policy.host}` }), policy)).toMatchObject({
      kind: 'forward',
    });
  });

  it('refuses a request without the secret, or with a wrong one', () => {
    const url = `${door}/ui/index.html`;
    expect(decide(get(url, { cookie: undefined }), policy)).toMatchObject({ status: 401 });
    expect(decide(get(url, { cookie: `${DASHBOARD_COOKIE}=guess` }), policy)).toMatchObject({
      status: 401,
    });
    expect(decide(get(url, { cookie: `other=${policy.secret}` }), policy)).toMatchObject({
      status: 401,
    });
    expect(
      decide(get(`${url}?token=${policy.secret}`, { cookie: undefined }), policy),
    ).toMatchObject({
      status: 401,
    });
    expect(decide(get('/?token=wrong', { cookie: undefined }), policy)).toMatchObject({
      status: 401,
    });
  });

  it('exchanges the first-visit secret for an HttpOnly SameSite=Strict cookie and drops it from the URL', () => {
    const got = decide(get(`/?token=${policy.secret}`, { cookie: undefined }), policy);
    expect(got).toEqual({
      kind: 'login',
      location: `${door}/ui/index.html`,
      cookie: `${DASHBOARD_COOKIE}=${policy.secret}; HttpOnly; SameSite=Strict; Path=/`,
    });
    expect(decide(get('/'), policy)).toEqual({
      kind: 'redirect',
      location: `${door}/ui/index.html`,
    });
  });

  it('compares secrets in full', () => {
    expect(isSecret(policy.secret, policy.secret)).toBe(true);
    expect(isSecret(policy.secret.slice(0, -1), policy.secret)).toBe(false);
    expect(isSecret(undefined, policy.secret)).toBe(false);
  });
});
