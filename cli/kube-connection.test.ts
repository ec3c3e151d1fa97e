import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { readFile, mkdtemp, rm, writeFile } from 'node:fs/promises';
import type { IncomingMessage, ServerResponse } from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TLSSocket } from 'node:tls';

import { stringify } from 'yaml';

import { DevCertificateAuthority, type CertFiles } from '../hack/lib/pki';
import { KubeConfigError, loadKubeConnection } from './kube-connection';

/*
 * Real TLS: a local https server with a certificate from a throwaway dev CA, which asks for
 * a client certificate and answers with what it saw (the certificate's CN, the
 * Authorization header). The kubeconfig files are written as kubectl users write them.
 */

interface Seen {
  readonly cn: string | null;
  readonly authorization: string | null;
  readonly path: string;
  readonly method: string;
  readonly body: string;
}

let dir: string;
let ca: DevCertificateAuthority;
let alice: CertFiles;
let server: https.Server;
let server2: https.Server;
let url: string;
/** A server whose certificate names only kube.test (for tls-server-name). */
let namedUrl: string;

function handler(req: IncomingMessage, res: ServerResponse) {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    if (req.url === '/stream') {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write('id: 1\ndata: one\n\n');
      // The second event comes only after the client has read the first.
      setTimeout(() => res.end('id: 2\ndata: two\n\n'), 300);
      return;
    }
    if (req.url === '/empty') {
      res.writeHead(204).end();
      return;
    }
    const cn: unknown = (req.socket as TLSSocket).getPeerCertificate().subject?.CN;
    const seen: Seen = {
      cn: typeof cn === 'string' ? cn : null,
      authorization: req.headers.authorization ?? null,
      path: req.url ?? '',
      method: req.method ?? '',
      body: Buffer.concat(chunks).toString(),
    };
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(seen));
  });
}

async function listen(s: https.Server): Promise<string> {
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
  return `https://127.0.0.1:${(s.address() as AddressInfo).port}`;
}

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'kube-connection-'));
  ca = await DevCertificateAuthority.create(dir, 'ca', 'kube-connection-test-ca');
  const serving = await ca.issue({
    name: 'server',
    commonName: 'kube-apiserver',
    ipAddresses: ['127.0.0.1'],
    usage: 'server',
  });
  const named = await ca.issue({
    name: 'named',
    commonName: 'kube.test',
    dnsNames: ['kube.test'],
    usage: 'server',
  });
  alice = await ca.issue({ name: 'alice', commonName: 'alice', usage: 'client' });
  const caPem = await readFile(ca.certPath);
  const tls = async (files: CertFiles) => ({
    cert: await readFile(files.certPath),
    key: await readFile(files.keyPath),
    ca: caPem,
    requestCert: true,
    rejectUnauthorized: false,
  });
  server = https.createServer(await tls(serving), handler);
  server2 = https.createServer(await tls(named), handler);
  url = await listen(server);
  namedUrl = await listen(server2);
}, 60_000);

afterAll(async () => {
  server.closeAllConnections();
  server2.closeAllConnections();
  await Promise.all([new Promise((r) => server.close(r)), new Promise((r) => server2.close(r))]);
  await rm(dir, { recursive: true, force: true });
});

interface KubeconfigSpec {
  readonly currentContext?: string;
  readonly clusters?: Record<string, Record<string, unknown>>;
  readonly users?: Record<string, Record<string, unknown>>;
  readonly contexts?: Record<string, Record<string, unknown>>;
}

async function kubeconfig(name: string, spec: KubeconfigSpec): Promise<string> {
  const path = join(dir, name);
  const entries = (kind: string, items: Record<string, Record<string, unknown>> = {}) =>
    Object.entries(items).map(([n, v]) => ({ name: n, [kind]: v }));
  await writeFile(
    path,
    stringify({
      apiVersion: 'v1',
      kind: 'Config',
      ...(spec.currentContext !== undefined ? { 'current-context': spec.currentContext } : {}),
      clusters: entries('cluster', spec.clusters),
      users: entries('user', spec.users),
      contexts: entries('context', spec.contexts),
    }),
  );
  return path;
}

async function seen(response: Promise<Response>): Promise<Seen> {
  const r = await response;
  expect(r.status).toBe(200);
  return (await r.json()) as Seen;
}

describe('loadKubeConnection', () => {
  it('presents the client certificate files and trusts the cluster CA file', async () => {
    const path = await kubeconfig('certs', {
      currentContext: 'dev',
      clusters: { local: { server: `${url}/`, 'certificate-authority': ca.certPath } },
      users: {
        alice: { 'client-certificate': alice.certPath, 'client-key': alice.keyPath },
      },
      contexts: { dev: { cluster: 'local', user: 'alice', namespace: 'team-a' } },
    });
    const conn = await loadKubeConnection({ kubeconfig: path, env: {} });
    expect(conn).toMatchObject({ server: url, namespace: 'team-a', contextName: 'dev' });
    const body = await seen(
      conn.fetch(`${conn.server}/apis/x?watch=1`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: '{"a":1}',
      }),
    );
    expect(body).toEqual({
      cn: 'alice',
      authorization: null,
      path: '/apis/x?watch=1',
      method: 'POST',
      body: '{"a":1}',
    });
  });

  it('sends a bearer token with inline CA data; -n and --context win over the kubeconfig', async () => {
    const caData = (await readFile(ca.certPath)).toString('base64');
    const path = await kubeconfig('token', {
      currentContext: 'other',
      clusters: { local: { server: url, 'certificate-authority-data': caData } },
      users: { bob: { token: 'tok-bob' } },
      contexts: {
        other: { cluster: 'missing' },
        bob: { cluster: 'local', user: 'bob', namespace: 'ignored' },
      },
    });
    const conn = await loadKubeConnection({
      kubeconfig: path,
      context: 'bob',
      namespace: 'ns1',
      env: {},
    });
    expect(conn).toMatchObject({ namespace: 'ns1', contextName: 'bob' });
    expect(await seen(conn.fetch(`${url}/t`))).toMatchObject({
      cn: null,
      authorization: 'Bearer tok-bob',
    });
    // A context with no namespace means "default".
    const other = await kubeconfig('token-default-ns', {
      currentContext: 'bob',
      clusters: { local: { server: url, 'certificate-authority-data': caData } },
      users: { bob: { token: 'tok-bob' } },
      contexts: { bob: { cluster: 'local', user: 'bob' } },
    });
    expect((await loadKubeConnection({ kubeconfig: other, env: {} })).namespace).toBe('default');
  });

  it('runs an exec credential plugin and sends its token', async () => {
    const script = join(dir, 'exec-plugin.js');
    await writeFile(
      script,
      `process.stdout.write(JSON.stringify({
        apiVersion: 'client.authentication.k8s.io/v1', kind: 'ExecCredential',
        status: { token: 'exec-' + process.argv[2], expirationTimestamp: '2999-01-01T00:00:00Z' },
      }));`,
    );
    const path = await kubeconfig('exec', {
      currentContext: 'exec',
      clusters: { local: { server: url, 'certificate-authority': ca.certPath } },
      users: {
        plugin: {
          exec: {
            apiVersion: 'client.authentication.k8s.io/v1',
            command: process.execPath,
            args: [script, 'carol'],
            interactiveMode: 'Never',
          },
        },
      },
      contexts: { exec: { cluster: 'local', user: 'plugin' } },
    });
    const conn = await loadKubeConnection({ kubeconfig: path, env: {} });
    expect(await seen(conn.fetch(`${url}/e`))).toMatchObject({
      authorization: 'Bearer exec-carol',
    });
  });

  it('checks the server name given by tls-server-name, or skips verification when told', async () => {
    const base = {
      currentContext: 'n',
      users: { bob: { token: 't' } },
      contexts: { n: { cluster: 'named', user: 'bob' } },
    };
    const wrongName = await kubeconfig('named-wrong', {
      ...base,
      clusters: { named: { server: namedUrl, 'certificate-authority': ca.certPath } },
    });
    const conn = await loadKubeConnection({ kubeconfig: wrongName, env: {} });
    await expect(conn.fetch(`${namedUrl}/x`)).rejects.toThrow();
    const rightName = await kubeconfig('named-right', {
      ...base,
      clusters: {
        named: {
          server: namedUrl,
          'certificate-authority': ca.certPath,
          'tls-server-name': 'kube.test',
        },
      },
    });
    const named = await loadKubeConnection({ kubeconfig: rightName, env: {} });
    expect(await seen(named.fetch(`${namedUrl}/x`))).toMatchObject({ authorization: 'Bearer t' });
    const noCa = await kubeconfig('no-ca', {
      ...base,
      clusters: { named: { server: namedUrl } },
    });
    const untrusted = await loadKubeConnection({ kubeconfig: noCa, env: {} });
    await expect(untrusted.fetch(`${namedUrl}/x`)).rejects.toThrow();
    const insecure = await kubeconfig('insecure', {
      ...base,
      clusters: { named: { server: namedUrl, 'insecure-skip-tls-verify': true } },
    });
    const skipping = await loadKubeConnection({ kubeconfig: insecure, env: {} });
    expect((await skipping.fetch(`${namedUrl}/x`)).status).toBe(200);
  });

  it('streams a response body as it arrives, and answers 204 with no body', async () => {
    const path = await kubeconfig('stream', {
      currentContext: 's',
      clusters: { local: { server: url, 'certificate-authority': ca.certPath } },
      users: { bob: { token: 't' } },
      contexts: { s: { cluster: 'local', user: 'bob' } },
    });
    const conn = await loadKubeConnection({ kubeconfig: path, env: {} });
    const response = await conn.fetch(`${url}/stream`);
    expect(response.headers.get('content-type')).toBe('text/event-stream');
    const reader = response.body!.getReader() as ReadableStreamDefaultReader<Uint8Array>;
    const first = await reader.read();
    expect(new TextDecoder().decode(first.value)).toBe('id: 1\ndata: one\n\n');
    let rest = '';
    for (let r = await reader.read(); !r.done; r = await reader.read()) {
      rest += new TextDecoder().decode(r.value);
    }
    expect(rest).toBe('id: 2\ndata: two\n\n');
    const empty = await conn.fetch(`${url}/empty`, { method: 'DELETE' });
    expect(empty.status).toBe(204);
    // An aborted request rejects with the signal's reason.
    const abort = new AbortController();
    const pending = conn.fetch(`${url}/stream`, { signal: abort.signal });
    abort.abort(new Error('stop'));
    await expect(pending).rejects.toThrow('stop');
  });

  it('merges a KUBECONFIG list as kubectl: missing files skipped, the first definition wins', async () => {
    const first = await kubeconfig('list-1', {
      clusters: { local: { server: url, 'certificate-authority': ca.certPath } },
      users: { bob: { token: 'first' } },
      contexts: { c: { cluster: 'local', user: 'bob', namespace: 'from-first' } },
    });
    const second = await kubeconfig('list-2', {
      currentContext: 'c',
      clusters: { local: { server: 'https://127.0.0.1:1' } },
      users: { bob: { token: 'second' } },
      contexts: { c: { cluster: 'local', user: 'bob', namespace: 'from-second' } },
    });
    const list = [join(dir, 'absent'), first, second].join(':');
    const conn = await loadKubeConnection({ env: { KUBECONFIG: list } });
    expect(conn).toMatchObject({ server: url, namespace: 'from-first', contextName: 'c' });
    expect(await seen(conn.fetch(`${url}/m`))).toMatchObject({ authorization: 'Bearer first' });
    // --kubeconfig wins over KUBECONFIG.
    await expect(
      loadKubeConnection({ kubeconfig: join(dir, 'absent'), env: { KUBECONFIG: first } }),
    ).rejects.toThrow(KubeConfigError);
  });

  it('names what to set when the kubeconfig, the context or its cluster is missing', async () => {
    await expect(loadKubeConnection({ kubeconfig: join(dir, 'nope'), env: {} })).rejects.toThrow(
      /no kubeconfig: .*nope \(from --kubeconfig\).*pass --kubeconfig FILE/u,
    );
    await expect(loadKubeConnection({ env: { HOME: join(dir, 'no-home') } })).rejects.toThrow(
      /no kubeconfig: .*\.kube\/config .*set KUBECONFIG/u,
    );
    const path = await kubeconfig('broken', {
      clusters: { local: { server: url } },
      users: { bob: { token: 'secret-token' } },
      contexts: {
        good: { cluster: 'local', user: 'bob' },
        orphan: { cluster: 'gone', user: 'bob' },
        nouser: { cluster: 'local', user: 'ghost' },
      },
    });
    await expect(loadKubeConnection({ kubeconfig: path, env: {} })).rejects.toThrow(
      /has no current-context; pass --context NAME/u,
    );
    const unknown = loadKubeConnection({ kubeconfig: path, context: 'prod', env: {} });
    await expect(unknown).rejects.toThrow(
      /context "prod" is not in kubeconfig .* \(contexts: good, orphan, nouser\); pass --context/u,
    );
    await expect(
      loadKubeConnection({ kubeconfig: path, context: 'orphan', env: {} }),
    ).rejects.toThrow(/context "orphan" names cluster "gone", which is not in kubeconfig/u);
    await expect(
      loadKubeConnection({ kubeconfig: path, context: 'nouser', env: {} }),
    ).rejects.toThrow(/context "nouser" names user "ghost"/u);
    // No message names a credential.
    const messages = await Promise.all(
      ['prod', 'orphan', 'nouser'].map((context) =>
        loadKubeConnection({ kubeconfig: path, context, env: {} }).catch((e: Error) => e.message),
      ),
    );
    messages.forEach((m) => expect(m).not.toContain('secret-token'));
    const plain = await kubeconfig('plain', {
      currentContext: 'p',
      clusters: { local: { server: 'http://127.0.0.1:1' } },
      users: { bob: { token: 't' } },
      contexts: { p: { cluster: 'local', user: 'bob' } },
    });
    await expect(loadKubeConnection({ kubeconfig: plain, env: {} })).rejects.toThrow(
      /plain http .*insecure-skip-tls-verify/u,
    );
  });
});
