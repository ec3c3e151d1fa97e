import { describe, expect, it } from '@jest/globals';
import { isIdentity } from '../../common/identity';
import { AppError } from '../../common/errors';
import {
  authenticateFrontProxy,
  kubernetesIdentity,
  parseRequestHeaderConfig,
  type DistinctHeaders,
  type RequestHeaderConfig,
} from './front-proxy';

const CA = '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n';

/** The ConfigMap's data as kube-apiserver v1.36 publishes it (list values are JSON). */
const PUBLISHED = {
  'client-ca-file': CA,
  'requestheader-client-ca-file': CA,
  'requestheader-allowed-names': '["front-proxy-client"]',
  'requestheader-username-headers': '["X-Remote-User"]',
  'requestheader-group-headers': '["X-Remote-Group"]',
  'requestheader-extra-headers-prefix': '["X-Remote-Extra-"]',
};

const config: RequestHeaderConfig = parseRequestHeaderConfig(PUBLISHED);
const proxy = { authorized: true, commonName: 'front-proxy-client' };

function codeOf(run: () => unknown): string {
  try {
    run();
  } catch (err: unknown) {
    if (err instanceof AppError) return `${err.code}: ${err.message}`;
    throw err;
  }
  return 'no error';
}

describe('parseRequestHeaderConfig', () => {
  it('reads the CA, allowed names and header names kube-apiserver publishes', () => {
    expect(config).toEqual({
      clientCa: CA,
      allowedNames: ['front-proxy-client'],
      usernameHeaders: ['X-Remote-User'],
      groupHeaders: ['X-Remote-Group'],
      extraHeaderPrefixes: ['X-Remote-Extra-'],
    });
  });

  it.each([
    ['no ConfigMap data', undefined, /no requestheader-client-ca-file: start kube-apiserver/],
    [
      'the client CA only (aggregation layer off)',
      { 'client-ca-file': CA },
      /no requestheader-client-ca-file/,
    ],
    [
      'no username header',
      { ...PUBLISHED, 'requestheader-username-headers': '[]' },
      /names no requestheader-username-headers/,
    ],
    [
      'a list that is not JSON',
      { ...PUBLISHED, 'requestheader-allowed-names': 'front-proxy-client' },
      /requestheader-allowed-names is not a JSON list of strings/,
    ],
    [
      'a JSON value that is not a list of strings',
      { ...PUBLISHED, 'requestheader-group-headers': '[1]' },
      /requestheader-group-headers is not a JSON list of strings/,
    ],
  ])('refuses %s with failed_precondition', (_case, data, message) => {
    const result = codeOf(() => parseRequestHeaderConfig(data));
    expect(result).toMatch(/^failed_precondition: /);
    expect(result).toMatch(message);
  });
});

describe('authenticateFrontProxy', () => {
  const headers: DistinctHeaders = {
    'x-remote-user': ['alice'],
    'x-remote-group': ['team-a', 'system:authenticated', 'team-a'],
    'x-remote-extra-scopes': ['read', 'write'],
    'x-remote-extra-acme.com%2fproject': ['p1'],
    'x-remote-other': ['ignored'],
  };

  it('takes the user, groups (once each) and extras from a front-proxied request', () => {
    expect(authenticateFrontProxy(config, proxy, headers)).toEqual({
      username: 'alice',
      groups: ['team-a', 'system:authenticated'],
      extra: { scopes: ['read', 'write'], 'acme.com/project': ['p1'] },
    });
  });

  // What an attacker who reaches the port directly would try.
  it.each([
    [
      'no client certificate, headers that claim to be an admin',
      { authorized: false, commonName: undefined },
    ],
    [
      'a client certificate that does not chain to the requestheader CA',
      { authorized: false, commonName: 'front-proxy-client' },
    ],
  ])('refuses %s, whatever the headers say', (_case, peer) => {
    const forged = { 'x-remote-user': ['system:admin'], 'x-remote-group': ['system:masters'] };
    expect(codeOf(() => authenticateFrontProxy(config, peer, forged))).toMatch(
      /^unauthenticated: this port serves only requests that kube-apiserver proxies/,
    );
  });

  it('refuses a certificate from the requestheader CA whose name is not allowed', () => {
    // The requestheader CA may sign other clients; only the allowed names are the proxy.
    expect(
      codeOf(() =>
        authenticateFrontProxy(
          config,
          { authorized: true, commonName: 'some-other-client' },
          headers,
        ),
      ),
    ).toMatch(
      /^unauthenticated: .*"some-other-client" is not among the requestheader allowed names/,
    );
  });

  it('takes any name from the CA when kube-apiserver allows any', () => {
    const anyName = { ...config, allowedNames: [] };
    expect(
      authenticateFrontProxy(anyName, { authorized: true, commonName: 'x' }, headers).username,
    ).toBe('alice');
  });

  it('refuses a proxied request with no user', () => {
    expect(codeOf(() => authenticateFrontProxy(config, proxy, { 'x-remote-user': [''] }))).toMatch(
      /^unauthenticated: the proxied request names no user/,
    );
  });
});

describe('kubernetesIdentity', () => {
  it.each([
    ['alice', 'kubernetes:alice'],
    ['alice@example.com', 'kubernetes:alice@example.com'],
    ['system:serviceaccount:team:bot', 'kubernetes:system%3Aserviceaccount%3Ateam%3Abot'],
    ['a b', 'kubernetes:a%20b'],
    ['100%:x', 'kubernetes:100%25%3Ax'],
  ])('%s is %s, a valid identity', (username, identity) => {
    const made = kubernetesIdentity({ username, groups: [], extra: {} });
    expect(made).toBe(identity);
    expect(isIdentity(made)).toBe(true);
  });

  it('never gives two usernames one identity', () => {
    const names = ['a:b', 'a%3Ab', 'a%253Ab', 'a b', 'a%20b'];
    const identities = names.map((username) =>
      kubernetesIdentity({ username, groups: [], extra: {} }),
    );
    expect(new Set(identities).size).toBe(names.length);
  });
});
