import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import {
  createServer as createHttpsServer,
  request as httpsRequest,
  type Server,
} from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TLSSocket } from 'node:tls';
import { AppError } from '../../common/errors';
import { ensureDevCerts, type DevCerts } from '../../hack/lib/dev-certs';
import { CertUsage, DevCertificateAuthority, type CertFiles } from '../../hack/lib/pki';
import type { PeerAddress, PeerDirectory } from './peer-endpoints';
import pino from 'pino';
import { KubeDoor } from '../kube-api/kube-door';
import { FORWARDED_HEADER, parsePeerEnvelope, type PeerTls } from './peer-hop';
import {
  ALICE,
  ADMIN,
  call,
  errorOf,
  startApi,
  TOKENS,
  type TestApi,
} from '../../test/support/api-fixtures';
import { EXAMPLE_SPEND_LIMITS } from '../../test/support/spend-limits';

// Two real API servers with real TLS on loopback: `front` is the replica a client
// reaches, `holder` the one that holds the conversation. What crosses the hop is also
// watched at a listener the test owns (`Tap`).

let dir: string;
let certs: DevCerts;
/** The control plane's certificate, as both replicas hold it. */
let controlPlane: PeerTls;
/** CA-signed, but another identity (server and client usages, so only the name differs). */
let harness: CertFiles;
/** Named like the control plane, signed by another CA. */
let foreign: CertFiles & { caPath: string };
/**
 * CA-signed, each with state-plane roles but not the replica role: the control plane's
 * name with the writer and repair roles (all a journal writer needs), a records admin, a
 * repair tool. None may claim a caller on the peer port.
 */
let stateRolesOnly: Record<'writer' | 'recordsAdmin' | 'repair', CertFiles>;

const load = async (files: CertFiles): Promise<{ cert: Buffer; key: Buffer }> => ({
  cert: await readFile(files.certPath),
  key: await readFile(files.keyPath),
});

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'polychrome-peer-hop-'));
  certs = await ensureDevCerts(join(dir, 'pki'));
  controlPlane = {
    ca: await readFile(certs.ca.certPath),
    ...(await load(certs.controlPlane)),
  };
  harness = await DevCertificateAuthority.open(certs.dir, 'ca').issue({
    name: 'harness',
    commonName: 'polychrome-harness',
    usage: CertUsage.Both,
  });
  const ca = DevCertificateAuthority.open(certs.dir, 'ca');
  const issue = (name: string, commonName: string, organizations: string[]): Promise<CertFiles> =>
    ca.issue({ name, commonName, organizations, usage: CertUsage.Both });
  stateRolesOnly = {
    writer: await issue('writer', 'polychrome-control-plane', [
      'polychrome:writer',
      'polychrome:repair',
    ]),
    recordsAdmin: await issue('records-admin', 'records-admin', ['polychrome:records-admin']),
    repair: await issue('repair', 'repair', ['polychrome:repair']),
  };
  const other = await DevCertificateAuthority.create(join(dir, 'other'), 'ca', 'Another CA');
  foreign = {
    ...(await other.issue({
      name: 'impostor',
      commonName: 'polychrome-control-plane',
      organizations: ['polychrome:writer'],
      usage: CertUsage.Both,
    })),
    caPath: other.certPath,
  };
}, 60_000);

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** A directory that answers one holder with one address (or none). */
class FixedDirectory implements PeerDirectory {
  readonly source = 'the test pods';
  readonly asked: string[] = [];
  constructor(private readonly table: Readonly<Record<string, PeerAddress>> = {}) {}
  find(holder: string): PeerAddress | undefined {
    this.asked.push(holder);
    return this.table[holder];
  }
}

/** What reached a {@link Tap}. */
interface Tapped {
  readonly method: string;
  readonly url: string;
  readonly headers: Record<string, string | string[] | undefined>;
  readonly body: string;
  readonly clientSubject: unknown;
}

/**
 * An HTTPS listener the test controls: it records every TCP connection and request and
 * answers 200 with a fixed body. Given the control plane's certificate it stands where a
 * replica would; given another it is an impostor.
 */
class Tap {
  readonly requests: Tapped[] = [];
  connections = 0;
  private constructor(private readonly server: Server) {}

  static async start(files: { cert: Buffer; key: Buffer; ca: Buffer }): Promise<Tap> {
    const server = createHttpsServer({ ...files, requestCert: true, rejectUnauthorized: false });
    const tap = new Tap(server);
    server.on('connection', () => (tap.connections += 1));
    server.on('request', (request, response) => {
      const chunks: Buffer[] = [];
      request.on('data', (c: Buffer) => chunks.push(c));
      request.on('end', () => {
        tap.requests.push({
          method: request.method ?? '',
          url: request.url ?? '',
          headers: { ...request.headers },
          body: Buffer.concat(chunks).toString('utf8'),
          clientSubject: (request.socket as TLSSocket).getPeerCertificate().subject,
        });
        response.writeHead(200, { 'content-type': 'application/json', 'idempotency-key': 'k-1' });
        response.end('{"tapped":true}');
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return tap;
  }

  get address(): PeerAddress {
    return { host: '127.0.0.1', port: (this.server.address() as AddressInfo).port };
  }

  close(): Promise<void> {
    this.server.closeAllConnections();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

const open: { close(): Promise<void> }[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((o) => o.close()));
});

const busy = (holder: string): AppError =>
  new AppError('unavailable', `replica ${holder} holds conversation x; retry`, {
    details: { holder, retryAfterMs: 1000, forwardTo: holder },
  });

async function replica(directory: PeerDirectory): Promise<TestApi> {
  const api = await startApi({
    peers: { host: '127.0.0.1', port: 0, tls: controlPlane, directory, connectTimeoutMs: 2_000 },
  });
  open.push(api);
  return api;
}

async function tap(files: { cert: Buffer; key: Buffer; ca: Buffer }): Promise<Tap> {
  const t = await Tap.start(files);
  open.push(t);
  return t;
}

/** One HTTPS request to a peer listener with the given client certificate (or none). */
function peerCall(
  address: { port: number },
  options: {
    method?: string;
    path: string;
    client?: { cert: Buffer; key: Buffer };
    headers?: Record<string, string>;
    /** @default 'application/json'; null sends none. */
    contentType?: string | null;
    body?: unknown;
  },
): Promise<{ status: number; json: unknown }> {
  const contentType = options.contentType === undefined ? 'application/json' : options.contentType;
  const payload = options.body === undefined ? '' : JSON.stringify(options.body);
  return new Promise((resolve, reject) => {
    const outgoing = httpsRequest(
      {
        host: '127.0.0.1',
        port: address.port,
        method: options.method ?? 'POST',
        path: options.path,
        ca: controlPlane.ca,
        ...(options.client ?? {}),
        checkServerIdentity: () => undefined,
        agent: false,
        headers: {
          ...(contentType === null ? {} : { 'content-type': contentType }),
          [FORWARDED_HEADER]: 'test',
          ...options.headers,
        },
      },
      (incoming) => {
        const chunks: Buffer[] = [];
        incoming.on('data', (c: Buffer) => chunks.push(c));
        incoming.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          resolve({ status: incoming.statusCode ?? 0, json: JSON.parse(text) as unknown });
        });
      },
    );
    outgoing.on('error', reject);
    outgoing.end(payload);
  });
}

const messagePath = (id: string): string => `/v1/conversations/${id}/messages`;

describe('forwarding to the replica that holds the conversation', () => {
  it('sends the authenticated caller and never the token, over mutual TLS, and relays the answer', async () => {
    const t = await tap({ ...controlPlane });
    const front = await replica(new FixedDirectory({ 'cp-b': t.address }));
    const id = front.seed(ALICE.identity);
    front.service.failNext(busy('cp-b'));

    const answer = await call(front, 'POST', messagePath(id), {
      token: TOKENS.alice,
      body: { text: 'hello', idempotencyKey: 'k-1' },
    });
    expect(answer.status).toBe(200);
    expect(answer.json).toEqual({ tapped: true });
    expect(answer.headers.get('x-polychrome-served-by')).toBe('cp-b');
    expect(answer.headers.get('idempotency-key')).toBe('k-1');

    expect(t.requests).toHaveLength(1);
    const [hop] = t.requests;
    expect(hop?.method).toBe('POST');
    expect(hop?.url).toBe(messagePath(id));
    expect(hop?.headers.authorization).toBeUndefined();
    // The token appears nowhere on the hop, in any header or in the body.
    expect(JSON.stringify(hop?.headers)).not.toContain(TOKENS.alice);
    expect(hop?.body).not.toContain(TOKENS.alice);
    expect(hop?.headers[FORWARDED_HEADER]).toEqual(expect.any(String));
    expect(hop?.clientSubject).toMatchObject({ CN: 'polychrome-control-plane' });
    expect(parsePeerEnvelope(JSON.parse(hop?.body ?? ''))).toEqual({
      caller: ALICE,
      body: { text: 'hello', idempotencyKey: 'k-1' },
    });
  });

  it('is served by the real holder, which runs the turn as the forwarded caller', async () => {
    const holder = await replica(new FixedDirectory());
    const id = holder.seed(ALICE.identity);
    const front = await replica(new FixedDirectory({ 'cp-b': holder.server.peerAddress() }));
    front.service.failNext(busy('cp-b'));

    const answer = await call(front, 'POST', messagePath(id), {
      token: TOKENS.alice,
      body: { text: 'hi there', idempotencyKey: 'k-2' },
    });
    expect(answer.status).toBe(200);
    expect(answer.json).toMatchObject({ conversationId: id, status: 'complete' });
    expect(answer.headers.get('x-polychrome-served-by')).toBe('cp-b');
    expect(holder.service.calls).toEqual([{ method: 'postMessage', caller: ALICE.identity }]);
    // The holder never authenticated a token: it was never given one.
    expect(holder.tokens.calls).toBe(0);
    expect(holder.logs).toContainEqual(
      expect.objectContaining({ listener: 'peer', status: 200, msg: 'request served' }),
    );
  });

  it("forwards an admin's payment policy (a PUT) to the real holder, which records it as the forwarded admin", async () => {
    const holder = await replica(new FixedDirectory());
    const id = holder.seed(ALICE.identity);
    const front = await replica(new FixedDirectory({ 'cp-b': holder.server.peerAddress() }));
    front.service.failNext(busy('cp-b'));
    const body = {
      actor: ADMIN.identity,
      wallet: 'support-desk',
      limits: EXAMPLE_SPEND_LIMITS,
      reason: 'paid search',
    };
    const answer = await call(front, 'PUT', `/v1/conversations/${id}/payment-policy`, {
      token: TOKENS.admin,
      body,
    });
    expect(answer.status).toBe(200);
    expect(answer.json).toMatchObject({ conversationId: id, wallet: 'support-desk', position: 0 });
    expect(answer.headers.get('x-polychrome-served-by')).toBe('cp-b');
    expect(holder.service.calls).toEqual([{ method: 'setPaymentPolicy', caller: ADMIN.identity }]);
    expect((await holder.entries(id)).map((e) => e.kind)).toContain('payment_policy');
    expect(holder.tokens.calls).toBe(0);
  });

  it('forwards approval and question answers the same way', async () => {
    const t = await tap({ ...controlPlane });
    const front = await replica(new FixedDirectory({ 'cp-b': t.address }));
    const id = front.seed(ADMIN.identity);
    front.service.failNext(busy('cp-b'));
    const approval = await call(front, 'POST', `/v1/conversations/${id}/approvals/r-1`, {
      token: TOKENS.admin,
      body: { decision: 'deny', comment: 'no' },
    });
    front.service.failNext(busy('cp-b'));
    const question = await call(front, 'POST', `/v1/conversations/${id}/questions/q-1`, {
      token: TOKENS.admin,
      body: { answer: 'blue' },
    });
    expect([approval.status, question.status]).toEqual([200, 200]);
    expect(t.requests.map((r) => JSON.parse(r.body) as unknown)).toEqual([
      { caller: ADMIN, body: { decision: 'deny', comment: 'no' } },
      { caller: ADMIN, body: { answer: 'blue' } },
    ]);
    expect(t.requests.every((r) => r.headers.authorization === undefined)).toBe(true);
  });

  it('answers 503 and sends nothing when no pod is the holder', async () => {
    const t = await tap({ ...controlPlane });
    const directory = new FixedDirectory({ 'cp-b': t.address });
    const front = await replica(directory);
    const id = front.seed(ALICE.identity);
    front.service.failNext(busy('http://127.0.0.1:9/'));
    const answer = await call(front, 'POST', messagePath(id), {
      token: TOKENS.alice,
      body: { text: 'hello' },
    });
    expect(answer.status).toBe(503);
    const error = errorOf(answer);
    expect(error.code).toBe('unavailable');
    expect(error.message).toMatch(/no Ready pod of that name is among the test pods/);
    expect(error.message).toMatch(/same idempotency key/);
    expect(directory.asked).toEqual(['http://127.0.0.1:9/']);
    expect(t.connections).toBe(0);
  });

  it('answers 503 when the hop cannot connect', async () => {
    const t = await tap({ ...controlPlane });
    const address = t.address;
    await t.close();
    const front = await replica(new FixedDirectory({ 'cp-b': address }));
    const id = front.seed(ALICE.identity);
    front.service.failNext(busy('cp-b'));
    const answer = await call(front, 'POST', messagePath(id), {
      token: TOKENS.alice,
      body: { text: 'hello' },
    });
    expect(answer.status).toBe(503);
    expect(errorOf(answer).message).toMatch(
      /replica cp-b holds conversation .*forwarding to it failed \(.*ECONNREFUSED.*\); retry \(with the same idempotency key/,
    );
  });

  it.each([
    ['a certificate of another identity from the Polychrome CA', () => harness, false],
    ['a control-plane name from another CA', () => foreign, true],
    ['the writer role but not the replica role', () => stateRolesOnly.writer, false],
  ])('refuses to send anything to a server with %s', async (_label, files, otherCa) => {
    const f = files();
    const t = await tap({
      ...(await load(f)),
      ca: otherCa ? await readFile(foreign.caPath) : controlPlane.ca,
    });
    const front = await replica(new FixedDirectory({ 'cp-b': t.address }));
    const id = front.seed(ALICE.identity);
    front.service.failNext(busy('cp-b'));
    const answer = await call(front, 'POST', messagePath(id), {
      token: TOKENS.alice,
      body: { text: 'hello' },
    });
    expect(answer.status).toBe(503);
    expect(errorOf(answer).message).toMatch(/forwarding to it failed/);
    // The handshake failed on our side: not one request, so no caller, reached it.
    expect(t.connections).toBe(1);
    expect(t.requests).toEqual([]);
  });

  it('never forwards a forwarded request again', async () => {
    const t = await tap({ ...controlPlane });
    const holder = await replica(new FixedDirectory({ 'cp-a': t.address }));
    const id = holder.seed(ALICE.identity);
    holder.service.failNext(busy('cp-a'));
    const answer = await peerCall(holder.server.peerAddress(), {
      path: messagePath(id),
      client: await load(certs.controlPlane),
      body: { caller: ALICE, body: { text: 'hello', idempotencyKey: 'k-3' } },
    });
    expect(answer.status).toBe(503);
    expect(t.connections).toBe(0);
  });
});

describe('the peer listener', () => {
  const envelope = { caller: ADMIN, body: { text: 'as admin', idempotencyKey: 'k-9' } };

  it('refuses a client without a certificate, or with one from another CA, in the handshake', async () => {
    const holder = await replica(new FixedDirectory());
    const id = holder.seed(ADMIN.identity);
    const address = holder.server.peerAddress();
    await expect(peerCall(address, { path: messagePath(id), body: envelope })).rejects.toThrow();
    await expect(
      peerCall(address, { path: messagePath(id), client: await load(foreign), body: envelope }),
    ).rejects.toThrow();
    expect(holder.service.calls).toEqual([]);
  });

  it.each([
    ['the verifier', () => certs.verifier, 'polychrome:verifier'],
    ['a harness', () => harness, 'no Polychrome role'],
    [
      "the control plane's name with the writer and repair roles",
      () => stateRolesOnly.writer,
      'polychrome:repair, polychrome:writer',
    ],
    ['a records admin', () => stateRolesOnly.recordsAdmin, 'polychrome:records-admin'],
    ['a repair tool', () => stateRolesOnly.repair, 'polychrome:repair'],
  ])('refuses %s (CA-signed, not a replica) with 403', async (_label, files, held) => {
    const holder = await replica(new FixedDirectory());
    const id = holder.seed(ADMIN.identity);
    const answer = await peerCall(holder.server.peerAddress(), {
      path: messagePath(id),
      client: await load(files()),
      body: envelope,
    });
    expect(answer.status).toBe(403);
    expect(JSON.stringify(answer.json)).toContain(
      'takes requests only from control-plane replicas (a certificate with O or OU ' +
        'polychrome:control-plane-replica)',
    );
    expect(JSON.stringify(answer.json)).toContain(`holding ${held}`);
    expect(holder.service.calls).toEqual([]);
  });

  it('answers 415 to a forwarded request not declared JSON, before it looks at the certificate or the envelope', async () => {
    const holder = await replica(new FixedDirectory());
    const id = holder.seed(ADMIN.identity);
    const address = holder.server.peerAddress();
    for (const client of [await load(certs.controlPlane), await load(certs.verifier)]) {
      for (const contentType of ['text/plain', null]) {
        const answer = await peerCall(address, {
          path: messagePath(id),
          client,
          contentType,
          body: envelope,
        });
        expect(answer.status).toBe(415);
        expect(JSON.stringify(answer.json)).toContain(
          `a POST request must send \\"Content-Type: application/json\\"`,
        );
      }
    }
    expect(holder.service.calls).toEqual([]);
  });

  it('refuses a request that carries a bearer token, and any route but the forwarded ones', async () => {
    const holder = await replica(new FixedDirectory());
    const id = holder.seed(ADMIN.identity);
    const client = await load(certs.controlPlane);
    const address = holder.server.peerAddress();
    const withToken = await peerCall(address, {
      path: messagePath(id),
      client,
      headers: { authorization: `Bearer ${TOKENS.admin}` },
      body: envelope,
    });
    expect(withToken.status).toBe(400);
    expect(JSON.stringify(withToken.json)).toMatch(/never carries an Authorization header/);
    for (const [method, path] of [
      ['GET', `/v1/conversations/${id}`],
      ['GET', `/v1/conversations/${id}/transcript`],
      ['GET', `/v1/conversations/${id}/stream`],
      ['POST', '/v1/conversations'],
      ['GET', '/v1/openapi.json'],
    ] as const) {
      const answer = await peerCall(address, { method, path, client, body: envelope });
      expect([method, path, answer.status]).toEqual([method, path, 404]);
    }
    expect(holder.service.calls).toEqual([]);
    expect(holder.tokens.calls).toBe(0);
  });

  it('ignores a caller sent to the public port: the token decides, and an envelope is refused', async () => {
    const front = await replica(new FixedDirectory());
    const id = front.seed(ADMIN.identity);
    const noToken = await call(front, 'POST', messagePath(id), {
      body: envelope,
      headers: { [FORWARDED_HEADER]: 'forged' },
    });
    expect(noToken.status).toBe(401);
    const asAlice = await call(front, 'POST', messagePath(id), {
      token: TOKENS.alice,
      body: envelope,
      headers: { [FORWARDED_HEADER]: 'forged' },
    });
    expect(asAlice.status).toBe(400);
    expect(front.service.calls).toEqual([]);
  });
});

describe('parsePeerEnvelope: a Kubernetes door caller', () => {
  const grant = {
    conversationId: '6f1d2f9e-0a4e-4c55-9c1b-8f3c8c1b2a10',
    subresource: 'messages',
    verb: 'create',
    groups: ['team-a'],
  };
  const kubeCaller = {
    identity: 'kubernetes:alice',
    identities: ['kubernetes:alice'],
    personaId: '',
    roles: [],
    sessionId: '',
    kubernetes: grant,
  };

  it('carries the grant across the hop, with no persona, session or role', () => {
    expect(parsePeerEnvelope({ caller: kubeCaller, body: { text: 'hi' } })).toEqual({
      caller: kubeCaller,
      body: { text: 'hi' },
    });
  });

  // A forwarded envelope that tries to widen a Kubernetes caller's rights.
  it.each([
    [
      'adds a role',
      { ...kubeCaller, roles: ['admin'] },
      'caller.roles must be empty for a Kubernetes caller',
    ],
    [
      'has no conversation in its grant',
      { ...kubeCaller, kubernetes: { ...grant, conversationId: '' } },
      'caller.kubernetes.conversationId',
    ],
    [
      'has no RBAC verb in its grant (it could not be told from a cancel)',
      {
        ...kubeCaller,
        kubernetes: { conversationId: grant.conversationId, subresource: 'approvals', groups: [] },
      },
      'caller.kubernetes.verb',
    ],
    [
      'has a grant that is not an object',
      { ...kubeCaller, kubernetes: 'all' },
      'caller.kubernetes must be an object',
    ],
    [
      'has groups that are not strings',
      { ...kubeCaller, kubernetes: { ...grant, groups: [1] } },
      'caller.kubernetes.groups',
    ],
  ])('refuses an envelope whose Kubernetes caller %s', (_case, caller, message) => {
    expect(() => parsePeerEnvelope({ caller, body: {} })).toThrow(message);
  });
});

describe('forwarding a request that came through the Kubernetes door', () => {
  const doorPath = (sub: string): string =>
    `/apis/api.polychrome.dev/v1alpha1/namespaces/team/conversations/hello/${sub}`;

  /** kube-apiserver's front proxy: its CA and client certificate, as the door trusts them. */
  async function frontProxy(): Promise<{ caPem: string; client: { cert: Buffer; key: Buffer } }> {
    const ca = await DevCertificateAuthority.create(
      join(dir, 'front-proxy'),
      'ca',
      'Front proxy CA',
    );
    const client = await ca.issue({
      name: 'front-proxy-client',
      commonName: 'front-proxy-client',
      usage: CertUsage.Client,
    });
    return { caPem: await readFile(ca.certPath, 'utf8'), client: await load(client) };
  }

  /** A replica whose Kubernetes door maps `team/hello` to `uid` and lets alice do anything. */
  async function doorReplica(
    directory: PeerDirectory,
    proxyCa: string,
    uid: () => string,
  ): Promise<TestApi> {
    const door = new KubeDoor({
      ports: {
        readAuthenticationConfig: () =>
          Promise.resolve({
            'requestheader-client-ca-file': proxyCa,
            'requestheader-allowed-names': '["front-proxy-client"]',
            'requestheader-username-headers': '["X-Remote-User"]',
            'requestheader-group-headers': '["X-Remote-Group"]',
          }),
        review: () => Promise.resolve({ allowed: true, reason: 'RBAC: allowed in this test' }),
        conversationUid: (namespace, name) =>
          namespace === 'team' && name === 'hello' ? uid() : undefined,
      },
      logger: pino({ level: 'silent' }),
    });
    const api = await startApi({
      peers: { host: '127.0.0.1', port: 0, tls: controlPlane, directory, connectTimeoutMs: 2_000 },
      kube: {
        host: '127.0.0.1',
        port: 0,
        cert: controlPlane.cert.toString(),
        key: controlPlane.key.toString(),
        door,
      },
    });
    open.push(api);
    return api;
  }

  /** A request as kube-apiserver proxies it for alice. */
  function viaFrontProxy(
    api: TestApi,
    client: { cert: Buffer; key: Buffer },
    path: string,
    body: unknown,
    request: { readonly method?: string; readonly contentType?: string | null } = {},
  ): Promise<{ status: number; json: unknown; servedBy: unknown }> {
    const contentType =
      request.contentType === undefined ? 'application/json' : request.contentType;
    return new Promise((resolve, reject) => {
      const outgoing = httpsRequest(
        {
          host: '127.0.0.1',
          port: api.server.kubeAddress().port,
          method: request.method ?? 'POST',
          path,
          ...client,
          rejectUnauthorized: false,
          agent: false,
          headers: {
            ...(contentType === null ? {} : { 'content-type': contentType }),
            'x-remote-user': 'alice',
            'x-remote-group': 'system:authenticated',
          },
        },
        (incoming) => {
          const chunks: Buffer[] = [];
          incoming.on('data', (c: Buffer) => chunks.push(c));
          incoming.on('end', () =>
            resolve({
              status: incoming.statusCode ?? 0,
              json: JSON.parse(Buffer.concat(chunks).toString('utf8')) as unknown,
              servedBy: incoming.headers['x-polychrome-served-by'],
            }),
          );
        },
      );
      outgoing.on('error', reject);
      outgoing.end(JSON.stringify(body));
    });
  }

  it('answers 415 to a POST or DELETE not declared JSON before the door admits it or anything is forwarded', async () => {
    const proxy = await frontProxy();
    const holder = await replica(new FixedDirectory());
    const id = holder.seed('dev:someone-else');
    let admitted = 0;
    const front = await doorReplica(
      new FixedDirectory({ 'cp-b': holder.server.peerAddress() }),
      proxy.caPem,
      () => {
        admitted += 1;
        return id;
      },
    );
    front.seed('dev:someone-else');
    front.service.failNext(busy('cp-b'));
    const cases = [
      ['POST', doorPath('messages'), null],
      ['POST', doorPath('messages'), 'text/plain'],
      ['DELETE', doorPath('approvals/r-1'), null],
      ['POST', '/apis/api.polychrome.dev/v1alpha1/sessions', null],
      ['DELETE', '/apis/api.polychrome.dev/v1alpha1/sessions/s-1', null],
    ] as const;
    for (const [method, path, contentType] of cases) {
      const answer = await viaFrontProxy(
        front,
        proxy.client,
        path,
        { text: 'cross-site' },
        { method, contentType },
      );
      expect([method, path, answer.status]).toEqual([method, path, 415]);
      // A Kubernetes Status, whose message says what to use instead of kubectl's raw verbs.
      expect(answer.json).toMatchObject({ kind: 'Status', code: 415 });
      expect(String((answer.json as { message?: unknown }).message)).toContain(
        'kubectl create --raw and kubectl delete --raw send none: use kubectl polychrome',
      );
    }
    expect(admitted).toBe(0);
    expect(front.service.calls).toEqual([]);
    expect(holder.service.calls).toEqual([]);
    // The same request declared JSON is admitted and forwarded.
    const posted = await viaFrontProxy(front, proxy.client, doorPath('messages'), {
      text: 'declared',
      idempotencyKey: 'k-json',
    });
    expect([posted.status, posted.servedBy]).toEqual([200, 'cp-b']);
  });

  it("is forwarded to the holder's public route with the door's grant, and run there as the Kubernetes user", async () => {
    const proxy = await frontProxy();
    const holder = await replica(new FixedDirectory());
    const id = holder.seed('dev:someone-else');
    const front = await doorReplica(
      new FixedDirectory({ 'cp-b': holder.server.peerAddress() }),
      proxy.caPem,
      () => id,
    );
    front.seed('dev:someone-else');
    front.service.failNext(busy('cp-b'));

    const answer = await viaFrontProxy(front, proxy.client, doorPath('messages'), {
      text: 'hello through the door',
      idempotencyKey: 'k-kube',
    });
    expect(answer.status).toBe(200);
    expect(answer.servedBy).toBe('cp-b');
    expect(answer.json).toMatchObject({ conversationId: id, status: 'complete' });
    expect(holder.service.calls).toEqual([{ method: 'postMessage', caller: 'kubernetes:alice' }]);
    expect(holder.tokens.calls).toBe(0);
    expect(holder.logs).toContainEqual(
      expect.objectContaining({
        listener: 'peer',
        route: '/v1/conversations/{conversationId}/messages',
        status: 200,
      }),
    );
  });

  it('forwards a resolve to the public route that names the turn its body names', async () => {
    const proxy = await frontProxy();
    const t = await tap({ ...controlPlane });
    let id = '';
    const front = await doorReplica(
      new FixedDirectory({ 'cp-b': t.address }),
      proxy.caPem,
      () => id,
    );
    id = front.seed('dev:someone-else');
    front.service.failNext(busy('cp-b'));
    const turnId = `turn_${'0'.repeat(32)}`;
    const answer = await viaFrontProxy(front, proxy.client, doorPath('resolve'), {
      actor: 'kubernetes:alice',
      decision: 'did_not_run',
      turnId,
    });
    expect(answer.status).toBe(200);
    expect(t.requests.map((r) => `${r.method} ${r.url}`)).toEqual([
      `POST /v1/conversations/${id}/turns/${turnId}/resolve`,
    ]);
  });

  it("answers the holder's refusal as a Kubernetes Status, with its code and message", async () => {
    const proxy = await frontProxy();
    // The holder does not know the conversation: it answers 404 in the public API's shape.
    const holder = await replica(new FixedDirectory());
    const front = await doorReplica(
      new FixedDirectory({ 'cp-b': holder.server.peerAddress() }),
      proxy.caPem,
      () => front.seed('dev:someone-else'),
    );
    front.service.failNext(busy('cp-b'));

    const answer = await viaFrontProxy(front, proxy.client, doorPath('messages'), {
      text: 'hello',
      idempotencyKey: 'k-404',
    });
    expect(answer.status).toBe(404);
    expect(answer.json).toMatchObject({
      kind: 'Status',
      apiVersion: 'v1',
      status: 'Failure',
      code: 404,
      message: expect.stringMatching(/not found|does not exist/i),
      details: { causes: [expect.objectContaining({ reason: 'not_found' })] },
    });
  });
});
