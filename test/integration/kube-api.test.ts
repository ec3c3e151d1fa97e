/**
 * The Kubernetes door through the real kube-apiserver (the shared local cluster, started
 * with the front-proxy flags): the APIService and RBAC from config/kube-api, the control
 * plane's door as its own least-privilege identity (SubjectAccessReviews and the
 * front-proxy ConfigMap), the real turn coordinator behind it (the public API's test stack:
 * the real JournalStore, the real harness with the scripted model), users with their own
 * client certificates running the real kubectl. And what an attacker who reaches the door's
 * port directly would try.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import {
  type KubeConfig,
  ApiregistrationV1Api,
  AuthorizationV1Api,
  CoreV1Api,
  RbacAuthorizationV1Api,
} from '@kubernetes/client-node';
import { execFile, execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFile, mkdtemp, rm } from 'node:fs/promises';
import { request as httpsRequest, type RequestOptions } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { parse, parseAllDocuments, stringify } from 'yaml';
import { decodePayload, EventKind } from '../../common/event-kinds';
import { RecordsClient } from '../../common/records-client';
import { loadStateClientTls } from '../../common/state-client';
import { ensureDevCerts } from '../../hack/lib/dev-certs';
import { defaultBinDir, repoRoot } from '../../hack/lib/local-cluster';
import { DevCertificateAuthority, type CertFiles } from '../../hack/lib/pki';
import { pollUntil } from '../../hack/lib/processes';
import { startTracing } from '../../common/tracing';
import { KubeDoor } from '../../operator/kube-api/kube-door';
import { kubeDoorPorts } from '../../operator/kube-api/kube-door-ports';
import { KubeSessions } from '../../operator/kube-api/kube-sessions';
import { serviceAccountAuthenticator } from '../../operator/kube-api/service-account-tokens';
import { tokenReviewer } from '../../operator/kube-api/kube-door-ports';
import { startApi, type TestApi } from '../../operator/public-api/testdata/fixtures';
import { field, freshNamespace, kubeConfig, sharedCluster } from './support/kube';
import { OtelCollector } from './support/otel-collector';
import { StatePlane } from './support/state-plane';

const serviceAccountUser = 'system:serviceaccount:polychrome-system:polychrome-control-plane';
const apiPath = '/apis/api.polychrome.dev/v1alpha1';

interface Kubectl {
  readonly ok: boolean;
  readonly stdout: string;
  readonly stderr: string;
}

async function kubectl(
  kubeconfig: string,
  args: readonly string[],
  input?: string,
): Promise<Kubectl> {
  const child = execFile(join(defaultBinDir, 'kubectl'), [`--kubeconfig=${kubeconfig}`, ...args], {
    encoding: 'utf8',
    timeout: 60_000,
  });
  if (input !== undefined) child.stdin?.end(input);
  return await new Promise<Kubectl>((resolve) => {
    let stdout = '';
    let stderr = '';
    child.stdout?.on('data', (chunk: string) => (stdout += chunk));
    child.stderr?.on('data', (chunk: string) => (stderr += chunk));
    child.once('exit', (code) => resolve({ ok: code === 0, stdout, stderr }));
  });
}

/**
 * config/kube-api's RBAC as kustomize puts it in polychrome-system: its ServiceAccount
 * subjects name no namespace, config/default's `namespace:` fills it in.
 */
function inPolychromeSystem(yaml: string): string {
  return parseAllDocuments(yaml)
    .map((d) => d.toJS() as { subjects?: { kind: string; namespace?: string }[] })
    .map((o) => ({
      ...o,
      ...(o.subjects === undefined
        ? {}
        : {
            subjects: o.subjects.map((subject) =>
              subject.kind === 'ServiceAccount'
                ? { ...subject, namespace: 'polychrome-system' }
                : subject,
            ),
          }),
    }))
    .map((o) => stringify(o))
    .join('---\n');
}

/** Applies YAML documents as the cluster admin, server-side. */
function applyYaml(adminConfig: string, yaml: string): void {
  execFileSync(
    join(defaultBinDir, 'kubectl'),
    [`--kubeconfig=${adminConfig}`, 'apply', '--server-side', '-f', '-'],
    { input: yaml, encoding: 'utf8' },
  );
}

/** An HTTPS request straight to the door's port, as an attacker on the network would send it. */
async function direct(
  port: number,
  path: string,
  options: {
    cert?: CertFiles;
    headers?: Record<string, string>;
    method?: string;
    body?: string;
    ca: string;
  },
): Promise<{ status: number; body: unknown }> {
  const tls =
    options.cert === undefined
      ? {}
      : { cert: await readFile(options.cert.certPath), key: await readFile(options.cert.keyPath) };
  return await new Promise((resolve, reject) => {
    const req = httpsRequest(
      {
        host: '127.0.0.1',
        port,
        path,
        method: options.method ?? 'GET',
        ca: options.ca,
        servername: 'localhost',
        headers: { 'content-type': 'application/json', ...options.headers },
        ...tls,
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (text += chunk));
        res.on('end', () =>
          resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) as unknown }),
        );
      },
    );
    req.once('error', reject);
    req.end(options.body);
  });
}

describe('the Kubernetes door through kube-apiserver', () => {
  let admin: string;
  let api: TestApi;
  let door: KubeDoor;
  let dir: string;
  let ns: { name: string; dispose: () => Promise<void> };
  let servingCa: string;
  let kubePort: number;
  let alice: string;
  let bob: string;
  let conversationId: string;
  let proxyClient: CertFiles;
  let strangerProxy: CertFiles;
  let state: StatePlane;
  let records: RecordsClient;
  let carol: string;
  let dave: string;
  let asControlPlane: KubeConfig;

  beforeAll(async () => {
    const cluster = await sharedCluster();
    admin = cluster.kubeconfigPath;
    const adminConfig = await kubeConfig();
    dir = await mkdtemp(join(tmpdir(), 'kube-api-'));
    ns = await freshNamespace(adminConfig, 'kubeapi');
    const core = adminConfig.makeApiClient(CoreV1Api);
    await core
      .createNamespace({ body: { metadata: { name: 'polychrome-system' } } })
      .catch(() => undefined);

    // The control plane's identity and exactly the RBAC config/kube-api grants it.
    applyYaml(
      admin,
      inPolychromeSystem(
        await readFile(join(repoRoot, 'config', 'kube-api', 'auth-delegation.yaml'), 'utf8'),
      ),
    );
    applyYaml(
      admin,
      await readFile(join(repoRoot, 'config', 'kube-api', 'cluster-roles.yaml'), 'utf8'),
    );
    asControlPlane = await kubeConfig(
      await cluster.mintUser(serviceAccountUser, [
        'system:serviceaccounts',
        'system:serviceaccounts:polychrome-system',
      ]),
    );

    // The door's serving certificate, for the Service's DNS name, and the CA the APIService trusts.
    const ca = await DevCertificateAuthority.create(
      join(dir, 'pki'),
      'door-ca',
      'polychrome-kube-api-test-ca',
    );
    const serving = await ca.issue({
      name: 'door',
      commonName: 'polychrome-kube-api',
      dnsNames: [`polychrome-kube-api.${ns.name}.svc`, 'localhost'],
      usage: 'server',
    });
    servingCa = await readFile(ca.certPath, 'utf8');
    // What an attacker might hold: a certificate named like the proxy from another CA.
    const stranger = await DevCertificateAuthority.create(
      join(dir, 'pki'),
      'stranger',
      'not-the-front-proxy-ca',
    );
    strangerProxy = await stranger.issue({
      name: 'fake-proxy',
      commonName: 'front-proxy-client',
      usage: 'client',
    });
    proxyClient = {
      certPath: join(cluster.state.dir, 'pki', 'front-proxy-client.crt'),
      keyPath: join(cluster.state.dir, 'pki', 'front-proxy-client.key'),
    };

    // The real state plane's records, reached as the control plane reaches them (its
    // writer certificate): the sessions resource mints through them.
    const certs = await ensureDevCerts(join(dir, 'state-pki'));
    state = await StatePlane.create(certs, join(dir, 'state-data'));
    await state.start();
    records = new RecordsClient({
      address: state.address,
      tls: await loadStateClientTls({
        ca: certs.ca.certPath,
        cert: certs.controlPlane.certPath,
        key: certs.controlPlane.keyPath,
      }),
      callTimeoutMs: 10_000,
    });

    // The door looks names up in the stack's Conversations, which exist once it started.
    const stack: { api?: TestApi } = {};
    door = new KubeDoor({
      ports: kubeDoorPorts({
        kubeConfig: asControlPlane,
        cachedByName: (namespace, name) => stack.api?.turns.conversations.byName(namespace, name),
      }),
      logger: pino({ level: 'silent' }),
    });
    api = await startApi({
      kube: {
        host: '127.0.0.1',
        port: 0,
        cert: await readFile(serving.certPath, 'utf8'),
        key: await readFile(serving.keyPath, 'utf8'),
        door,
        sessions: new KubeSessions(records, (user, target, signal) =>
          door.admitCluster(user, target, signal),
        ),
      },
    });
    stack.api = api;
    kubePort = api.server.kubeAddress().port;
    conversationId =
      api.turns.conversations.add(
        { owner: 'dev:someone-else' },
        { name: 'hello', namespace: ns.name },
      ).metadata.uid ?? '';

    // The APIService, routed on loopback: an ExternalName Service (EndpointSlices refuse 127/8).
    const apiService = parse(
      await readFile(join(repoRoot, 'config', 'kube-api', 'api-service.yaml'), 'utf8'),
    ) as Record<string, unknown>;
    await core.createNamespacedService({
      namespace: ns.name,
      body: {
        metadata: { name: 'polychrome-kube-api' },
        spec: {
          type: 'ExternalName',
          externalName: 'localhost',
          ports: [{ name: 'https-kube', port: kubePort }],
        },
      },
    });
    const registration = adminConfig.makeApiClient(ApiregistrationV1Api);
    await registration
      .deleteAPIService({ name: 'v1alpha1.api.polychrome.dev' })
      .catch(() => undefined);
    await registration.createAPIService({
      body: {
        ...apiService,
        spec: {
          ...(apiService.spec as Record<string, unknown>),
          service: { name: 'polychrome-kube-api', namespace: ns.name, port: kubePort },
          caBundle: Buffer.from(servingCa).toString('base64'),
        },
      } as never,
    });
    await pollUntil(
      'the APIService v1alpha1.api.polychrome.dev to be Available',
      async () => {
        const current = await registration.readAPIService({ name: 'v1alpha1.api.polychrome.dev' });
        return current.status?.conditions?.some(
          (c) => c.type === 'Available' && c.status === 'True',
        ) === true
          ? true
          : undefined;
      },
      { timeoutMs: 60_000, intervalMs: 250 },
    );

    // Two ordinary users: alice may talk to the namespace's conversations (the built-in
    // edit role, which aggregates polychrome-conversation-user); bob may not. dave is the
    // namespace's admin (the built-in admin role, which aggregates
    // polychrome-conversation-admin); carol may mint sessions (a ClusterRoleBinding to
    // polychrome-session-admin) and nothing else.
    alice = await cluster.mintUser('alice', ['team-a']);
    bob = await cluster.mintUser('bob', ['team-b']);
    dave = await cluster.mintUser('dave', ['team-a']);
    carol = await cluster.mintUser('carol', ['ops']);
    const rbac = adminConfig.makeApiClient(RbacAuthorizationV1Api);
    for (const [user, role] of [
      ['alice', 'edit'],
      ['dave', 'admin'],
    ] as const) {
      await rbac.createNamespacedRoleBinding({
        namespace: ns.name,
        body: {
          metadata: { name: `${user}-${role}` },
          roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: role },
          subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: user }],
        },
      });
    }
    await rbac
      .deleteClusterRoleBinding({ name: `${ns.name}-carol-sessions` })
      .catch(() => undefined);
    await rbac.createClusterRoleBinding({
      body: {
        metadata: { name: `${ns.name}-carol-sessions` },
        roleRef: {
          apiGroup: 'rbac.authorization.k8s.io',
          kind: 'ClusterRole',
          name: 'polychrome-session-admin',
        },
        subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: 'carol' }],
      },
    });
    // The built-in roles pick the aggregated rules up through kube-controller-manager.
    const authorization = adminConfig.makeApiClient(AuthorizationV1Api);
    await pollUntil(
      'alice may create conversations/messages (edit aggregates polychrome-conversation-user)',
      async () => {
        const review = await authorization.createSubjectAccessReview({
          body: {
            spec: {
              user: 'alice',
              groups: ['team-a', 'system:authenticated'],
              resourceAttributes: {
                group: 'api.polychrome.dev',
                resource: 'conversations',
                subresource: 'messages',
                verb: 'create',
                namespace: ns.name,
                name: 'hello',
              },
            },
          },
        });
        return review.status?.allowed === true ? true : undefined;
      },
      { timeoutMs: 30_000, intervalMs: 250 },
    );
  }, 180_000);

  afterAll(async () => {
    const adminConfig = await kubeConfig();
    await adminConfig
      .makeApiClient(RbacAuthorizationV1Api)
      .deleteClusterRoleBinding({ name: `${ns?.name}-carol-sessions` })
      .catch(() => undefined);
    await adminConfig
      .makeApiClient(ApiregistrationV1Api)
      .deleteAPIService({ name: 'v1alpha1.api.polychrome.dev' })
      .catch(() => undefined);
    await api?.close();
    records?.close();
    await state?.kill();
    await ns?.dispose();
    if (dir !== undefined) await rm(dir, { recursive: true, force: true });
  });

  it('serves discovery: every subresource with a kind and its verbs', async () => {
    const got = await kubectl(admin, ['get', '--raw', apiPath]);
    expect(got.stderr).toBe('');
    const list = JSON.parse(got.stdout) as {
      resources: { name: string; kind: string; verbs: string[] }[];
    };
    expect(list.resources.map((r) => `${r.name} ${r.kind} ${r.verbs.join(',')}`)).toEqual([
      'conversations/transcript Transcript get',
      'conversations/messages TurnReply create',
      'conversations/log EventStream get',
      'conversations/export JournalExport get',
      'conversations/repair RepairResult create',
      'conversations/resolve ResolveResult create',
      'sessions Session create,delete',
    ]);
  });

  it('runs a turn for alice by Conversation name, attributed to kubernetes:alice', async () => {
    const path = `${apiPath}/namespaces/${ns.name}/conversations/hello`;
    const posted = await kubectl(
      alice,
      ['create', '--raw', `${path}/messages`, '-f', '-'],
      JSON.stringify({ text: 'hello from kubectl', idempotencyKey: 'k1' }),
    );
    expect(posted.stderr).toBe('');
    const reply = JSON.parse(posted.stdout) as Record<string, unknown>;
    expect([reply.status, reply.reply]).toEqual(['complete', 'reply 1']);

    const transcript = JSON.parse(
      (await kubectl(alice, ['get', '--raw', `${path}/transcript`])).stdout,
    ) as Record<string, unknown>;
    expect(field(transcript, 'conversationId')).toBe(conversationId);
    expect(JSON.stringify(transcript)).toContain('hello from kubectl');

    const entries = await api.turns.journal.entries(`conv-${conversationId}`);
    const received = entries.find((e) => e.kind === EventKind.MessageReceived);
    expect(received).toBeDefined();
    const message = decodePayload(EventKind.MessageReceived, received?.payload ?? new Uint8Array());
    expect(message.attribution?.caller).toBe('kubernetes:alice');
  });

  it('serves resolve to a namespace admin only: the body names the turn, the plan refuses a turn that is not quarantined, nothing is committed', async () => {
    const path = `${apiPath}/namespaces/${ns.name}/conversations/hello`;
    const posted = await kubectl(
      alice,
      ['create', '--raw', `${path}/messages`, '-f', '-'],
      JSON.stringify({ text: 'hello from kubectl', idempotencyKey: 'k1' }),
    );
    const turnId = String((JSON.parse(posted.stdout) as Record<string, unknown>).turnId);
    const head = (await api.turns.journal.entries(`conv-${conversationId}`)).length;
    const resolve = (who: string, body: object): Promise<Kubectl> =>
      kubectl(who, ['create', '--raw', `${path}/resolve`, '-f', '-'], JSON.stringify(body));
    const asDave = { actor: 'kubernetes:dave', decision: 'did_not_run' };
    const byAlice = await resolve(alice, { ...asDave, actor: 'kubernetes:alice', turnId });
    expect(byAlice.ok).toBe(false);
    expect(byAlice.stderr).toContain('cannot create resource "conversations/resolve"');
    const complete = await resolve(dave, { ...asDave, turnId });
    expect(complete.ok).toBe(false);
    expect(complete.stderr).toContain(`turn ${turnId} is not quarantined`);
    expect(complete.stderr).toContain('it is complete');
    const noTurn = await resolve(dave, asDave);
    expect(noTurn.stderr).toContain('turnId is required');
    const impostor = await resolve(dave, { ...asDave, actor: 'kubernetes:alice', turnId });
    expect(impostor.stderr).toContain('is not one of your identities');
    expect((await api.turns.journal.entries(`conv-${conversationId}`)).length).toBe(head);
  });

  it('streams committed events on the log subresource, resumed after Last-Event-ID', async () => {
    // The stream as a client of kube-apiserver reads it: alice's own certificate, SSE
    // through the aggregator. `log` is a name kube-apiserver treats as long-running.
    const kc = await kubeConfig(alice);
    const server = new URL(kc.getCurrentCluster()?.server ?? '');
    const options: RequestOptions = {
      host: server.hostname,
      port: server.port,
      path: `${apiPath}/namespaces/${ns.name}/conversations/hello/log`,
      headers: { accept: 'text/event-stream', 'last-event-id': '0' },
    };
    await kc.applyToHTTPSOptions(options);
    const frames = await new Promise<string>((resolve, reject) => {
      const req = httpsRequest(options, (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => {
          text += chunk;
          // The first turn's completion (positions 0..4 are its two batches).
          if (/event: turn_complete\n/u.test(text)) {
            req.destroy();
            resolve(text);
          }
        });
        res.once('end', () => resolve(text));
      });
      req.once('error', reject);
      req.setTimeout(20_000, () =>
        req.destroy(new Error('no turn_complete on the stream in 20 s')),
      );
      req.end();
    });
    const ids = [...frames.matchAll(/^id: (\d+)$/gmu)].map((m) => Number(m[1]));
    // Resumed after position 0: the message_received at 0 is not sent again.
    expect(ids[0]).toBe(1);
    expect(frames).toContain('event: turn_complete');
  });

  it('lets kube-apiserver refuse bob before the door sees anything, and commits nothing', async () => {
    const path = `${apiPath}/namespaces/${ns.name}/conversations/hello`;
    const head = api.head(conversationId);
    const served = api.logs.filter(
      (l) => l.msg === 'request served' && /\/(messages|transcript)$/u.test(String(l.route)),
    ).length;
    const posted = await kubectl(
      bob,
      ['create', '--raw', `${path}/messages`, '-f', '-'],
      JSON.stringify({ text: 'let me in' }),
    );
    expect(posted.ok).toBe(false);
    expect(posted.stderr).toMatch(/Forbidden|cannot create resource "conversations\/messages"/);
    const read = await kubectl(bob, ['get', '--raw', `${path}/transcript`]);
    expect(read.ok).toBe(false);
    expect(read.stderr).toMatch(/forbidden/i);
    expect(api.head(conversationId)).toBe(head);
    expect(
      api.logs.filter(
        (l) => l.msg === 'request served' && /\/(messages|transcript)$/u.test(String(l.route)),
      ).length,
    ).toBe(served);
  });

  it('answers a Conversation name that does not exist with NotFound', async () => {
    const got = await kubectl(alice, [
      'get',
      '--raw',
      `${apiPath}/namespaces/${ns.name}/conversations/nobody/transcript`,
    ]);
    expect(got.ok).toBe(false);
    expect(got.stderr).toContain('conversations.polychrome.dev "nobody" not found');
  });

  it('takes the caller’s traceparent through kube-apiserver as its request span’s trace', async () => {
    // Tracing on in this process only for this test: the door's span goes to a real
    // collector (hack/otelcol), and the SDK is shut down before the next test.
    const collector = await OtelCollector.start();
    const saved = { ...process.env };
    process.env.OTEL_EXPORTER_OTLP_ENDPOINT = collector.grpcEndpoint;
    process.env.OTEL_EXPORTER_OTLP_PROTOCOL = 'grpc';
    process.env.OTEL_BSP_SCHEDULE_DELAY = '100';
    const tracing = await startTracing('polychrome-control-plane');
    try {
      const traceId = randomBytes(16).toString('hex');
      const callerSpan = randomBytes(8).toString('hex');
      const kc = await kubeConfig(alice);
      const server = new URL(kc.getCurrentCluster()?.server ?? '');
      const options: RequestOptions = {
        host: server.hostname,
        port: server.port,
        method: 'POST',
        path: `${apiPath}/namespaces/${ns.name}/conversations/hello/messages`,
        headers: {
          'content-type': 'application/json',
          traceparent: `00-${traceId}-${callerSpan}-01`,
        },
      };
      await kc.applyToHTTPSOptions(options);
      const status = await new Promise<number>((resolve, reject) => {
        const req = httpsRequest(options, (res) => {
          res.resume();
          res.once('end', () => resolve(res.statusCode ?? 0));
        });
        req.once('error', reject);
        req.end(JSON.stringify({ text: 'traced through kube-apiserver', idempotencyKey: 'k-tr' }));
      });
      expect(status).toBe(200);
      const template = `${apiPath}/namespaces/{namespace}/conversations/{name}/messages`;
      const spans = await pollUntil(
        'the door’s request span in the collector’s file',
        () => {
          const mine = collector.spans().filter((span) => span.traceId === traceId);
          return Promise.resolve(
            mine.some((span) => span.name === `POST ${template}`) ? mine : undefined,
          );
        },
        { timeoutMs: 30_000, intervalMs: 250 },
      );
      const request = spans.find((span) => span.name === `POST ${template}`);
      // kube-apiserver runs without a tracing configuration, so it passes the header on as
      // the caller sent it: the caller's span is the parent.
      expect(request?.parentSpanId).toBe(callerSpan);
      expect(request?.attributes).toMatchObject({
        'http.route': template,
        'http.response.status_code': 200,
      });
      // The turn's harness call is in the same trace: the context crossed over gRPC.
      const runTurn = await pollUntil(
        'the RunTurn client span in the caller’s trace',
        () =>
          Promise.resolve(
            collector
              .spans()
              .find(
                (span) =>
                  span.traceId === traceId &&
                  span.name === 'polychrome.harness.v1.Harness/RunTurn' &&
                  span.kind === 3,
              ),
          ),
        { timeoutMs: 30_000, intervalMs: 250 },
      );
      expect(runTurn.parentSpanId).not.toBe('');
    } finally {
      await tracing?.shutdown();
      process.env = saved;
      await collector.stop();
    }
  }, 60_000);

  /** kube-apiserver's answer for `user` on `verb` `conversations/<subresource>` in the test namespace. */
  async function allowed(user: string, verb: string, subresource: string): Promise<boolean> {
    const review = await (
      await kubeConfig()
    )
      .makeApiClient(AuthorizationV1Api)
      .createSubjectAccessReview({
        body: {
          spec: {
            user,
            groups: ['system:authenticated'],
            resourceAttributes: {
              group: 'api.polychrome.dev',
              resource: 'conversations',
              subresource,
              verb,
              namespace: ns.name,
              name: 'hello',
            },
          },
        },
      });
    return review.status?.allowed === true;
  }

  it('aggregates the admin-only verbs into the built-in admin role only, not edit or view', async () => {
    await pollUntil(
      'dave may create conversations/replay (admin aggregates polychrome-conversation-admin)',
      async () => ((await allowed('dave', 'create', 'replay')) ? true : undefined),
      { timeoutMs: 30_000, intervalMs: 250 },
    );
    const table: [string, string, string, boolean][] = [];
    for (const user of ['dave', 'alice', 'bob']) {
      for (const [verb, sub] of [
        ['get', 'transcript'],
        ['create', 'messages'],
        ['delete', 'approvals'],
        ['create', 'replay'],
        ['get', 'verify'],
        ['create', 'repair'],
        ['create', 'resolve'],
        ['get', 'export'],
      ] as const) {
        table.push([user, verb, sub, await allowed(user, verb, sub)]);
      }
    }
    const admin = ['approvals', 'replay', 'verify', 'repair', 'resolve', 'export'];
    expect(table).toEqual(
      table.map(([user, verb, sub]) => [
        user,
        verb,
        sub,
        user === 'dave' || (user === 'alice' && !admin.includes(sub)),
      ]),
    );
  });

  describe('sessions', () => {
    const sessionsPath = `${apiPath}/sessions`;
    const mint = (who: string, body: object): Promise<Kubectl> =>
      kubectl(who, ['create', '--raw', sessionsPath, '-f', '-'], JSON.stringify(body));

    it('mints a session token for a persona as carol (session admin): shown once, live in the records', async () => {
      const before = Date.now();
      const got = await mint(carol, { persona: 'bot:support-desk', role: 'edge', ttl: '720h' });
      expect(got.stderr).toBe('');
      const session = JSON.parse(got.stdout) as {
        kind: string;
        metadata: { name: string };
        token: string;
        expiresAt: string;
        persona: { identity: string; roles: string[] };
      };
      expect([session.kind, session.persona.identity, session.persona.roles]).toEqual([
        'Session',
        'bot:support-desk',
        ['edge'],
      ]);
      expect(session.token).toMatch(/^pcs_[A-Za-z0-9_-]{43}$/u);
      const ttl = Date.parse(session.expiresAt) - before;
      expect(ttl).toBeGreaterThan(720 * 3_600_000 - 60_000);
      expect(ttl).toBeLessThanOrEqual(720 * 3_600_000 + 60_000);
      // The token is the records' own: it authenticates as the persona, with its roles.
      const found = await records.authenticate(session.token);
      expect([found.session.id, found.persona.identities, found.persona.roles]).toEqual([
        session.metadata.name,
        ['bot:support-desk'],
        ['edge'],
      ]);
      // Shown once: never in the control plane's log.
      expect(api.rawLogs.join('\n')).not.toContain(session.token);
      expect(
        api.logs.some(
          (l) => l.route === '/apis/api.polychrome.dev/v1alpha1/sessions' && l.status === 201,
        ),
      ).toBe(true);

      // Revoked with kubectl delete --raw: the token stops working at once in the records.
      const revoked = await kubectl(carol, [
        'delete',
        '--raw',
        `${sessionsPath}/${session.metadata.name}`,
      ]);
      expect(revoked.stderr).toBe('');
      expect(field(JSON.parse(revoked.stdout), 'revokedAt')).toEqual(expect.any(String));
      await expect(records.authenticate(session.token)).rejects.toMatchObject({
        code: 'unauthenticated',
      });
    });

    it('refuses alice (edit), dave (a namespace admin) and bob: Forbidden, no persona, no revocation', async () => {
      const kept = JSON.parse(
        (await mint(carol, { persona: 'bot:kept', role: 'member', ttl: '1h' })).stdout,
      ) as { metadata: { name: string }; token: string };
      for (const who of [alice, dave, bob]) {
        const got = await mint(who, { persona: 'bot:intruder', role: 'admin' });
        expect(got.ok).toBe(false);
        expect(got.stderr).toMatch(/forbidden/iu);
        const deleted = await kubectl(who, [
          'delete',
          '--raw',
          `${sessionsPath}/${kept.metadata.name}`,
        ]);
        expect(deleted.ok).toBe(false);
        expect(deleted.stderr).toMatch(/forbidden/iu);
      }
      expect(await records.findPersonaByIdentity('bot:intruder')).toBeUndefined();
      expect((await records.authenticate(kept.token)).persona.identities).toEqual(['bot:kept']);
    });

    it('names what is wrong in a bad request', async () => {
      const unknownField = await mint(carol, { persona: 'bot:x', rol: 'edge' });
      expect(unknownField.ok).toBe(false);
      expect(unknownField.stderr).toContain('unknown field "rol"');
      const badTtl = await mint(carol, { persona: 'bot:x', ttl: '31d' });
      expect(badTtl.stderr).toContain('ttl must be a duration such as "720h"');
      const tooLong = await mint(carol, { persona: 'bot:x', ttl: '721h' });
      expect(tooLong.stderr).toContain('at most 720h');
      const badRole = await mint(carol, { persona: 'bot:x', role: 'root' });
      expect(badRole.stderr).toContain('role must be one of admin, member, edge');
      expect(await records.findPersonaByIdentity('bot:x')).toBeUndefined();
    });
  });

  describe('an in-cluster edge with its ServiceAccount token', () => {
    /** A projected token of `name` in the test namespace from the real TokenRequest API. */
    async function projectedToken(name: string, audiences: string[]): Promise<string> {
      const core = (await kubeConfig()).makeApiClient(CoreV1Api);
      const request = await core.createNamespacedServiceAccountToken({
        name,
        namespace: ns.name,
        body: { spec: { audiences, expirationSeconds: 600 } },
      });
      return request.status?.token ?? '';
    }

    it('authenticates as the persona that links kubernetes:system:serviceaccount:NS:NAME, through a TokenReview', async () => {
      const core = (await kubeConfig()).makeApiClient(CoreV1Api);
      await core.createNamespacedServiceAccount({
        namespace: ns.name,
        body: { metadata: { name: 'edge-bot' } },
      });
      const token = await projectedToken('edge-bot', ['polychrome']);
      expect(token.split('.')).toHaveLength(3);
      // The control plane's own identity asks (system:auth-delegator allows TokenReviews).
      const authenticate = serviceAccountAuthenticator({
        review: tokenReviewer(asControlPlane),
        records,
      });
      const identity = `kubernetes:system%3Aserviceaccount%3A${ns.name}%3Aedge-bot`;
      // No persona links it yet: refused, and the message says what to do.
      await expect(authenticate(token)).rejects.toMatchObject({
        code: 'permission_denied',
        message: expect.stringContaining(`links the identity ${identity}`),
      });
      // A session admin links it through the door, as docs/kube-api.md says.
      const linked = await kubectl(
        carol,
        ['create', '--raw', `${apiPath}/sessions`, '-f', '-'],
        JSON.stringify({ persona: identity, role: 'edge', ttl: '1m' }),
      );
      expect(linked.stderr).toBe('');
      const caller = await authenticate(token);
      expect([caller.identity, caller.roles]).toEqual([identity, ['edge']]);

      // What an attacker would try: a token of the same account for another audience (the
      // API server's own), and a token of an account that is gone.
      await expect(
        authenticate(await projectedToken('edge-bot', ['https://kubernetes.default.svc'])),
      ).rejects.toMatchObject({ code: 'unauthenticated' });
      await core.createNamespacedServiceAccount({
        namespace: ns.name,
        body: { metadata: { name: 'gone-bot' } },
      });
      const orphan = await projectedToken('gone-bot', ['polychrome']);
      await core.deleteNamespacedServiceAccount({ name: 'gone-bot', namespace: ns.name });
      await pollUntil(
        'the deleted ServiceAccount token to stop authenticating',
        async () =>
          (await authenticate(orphan).then(
            () => false,
            (e: unknown) => field(e, 'code') === 'unauthenticated',
          ))
            ? true
            : undefined,
        { timeoutMs: 10_000, intervalMs: 250 },
      );
    });
  });

  describe('an attacker who reaches the door directly', () => {
    const body = JSON.stringify({ text: 'forged' });
    const target = (): string => `${apiPath}/namespaces/${ns.name}/conversations/hello/messages`;

    it('gets 401 without the front proxy certificate, whatever the headers claim', async () => {
      const head = api.head(conversationId);
      const answer = await direct(kubePort, target(), {
        ca: servingCa,
        method: 'POST',
        body,
        headers: { 'X-Remote-User': 'alice', 'X-Remote-Group': 'system:masters' },
      });
      expect(answer.status).toBe(401);
      expect(field(answer.body, 'kind')).toBe('Status');
      expect(String(field(answer.body, 'message'))).toContain(
        'only requests that kube-apiserver proxies',
      );
      expect(api.head(conversationId)).toBe(head);
    });

    it('gets 401 with a certificate named front-proxy-client from another CA', async () => {
      const answer = await direct(kubePort, target(), {
        ca: servingCa,
        cert: strangerProxy,
        method: 'POST',
        body,
        headers: { 'X-Remote-User': 'alice' },
      });
      expect(answer.status).toBe(401);
    });

    it('is still refused by the SubjectAccessReview with the real proxy certificate (defense in depth)', async () => {
      // Someone who stole the front-proxy key and names bob: RBAC denies bob, the door asks.
      const head = api.head(conversationId);
      const answer = await direct(kubePort, target(), {
        ca: servingCa,
        cert: proxyClient,
        method: 'POST',
        body,
        headers: { 'X-Remote-User': 'bob', 'X-Remote-Group': 'team-b' },
      });
      expect(answer.status).toBe(403);
      expect(String(field(answer.body, 'message'))).toContain(
        'User "bob" cannot create resource "conversations/messages"',
      );
      expect(api.head(conversationId)).toBe(head);
    });

    it('cannot mint a session with the real proxy certificate naming a user RBAC does not let mint', async () => {
      // dave administers a namespace; sessions are cluster-scoped, so the door's own
      // SubjectAccessReview refuses him too.
      const answer = await direct(kubePort, `${apiPath}/sessions`, {
        ca: servingCa,
        cert: proxyClient,
        method: 'POST',
        body: JSON.stringify({ persona: 'bot:forged', role: 'admin' }),
        headers: { 'X-Remote-User': 'dave', 'X-Remote-Group': 'team-a' },
      });
      expect(answer.status).toBe(403);
      expect(String(field(answer.body, 'message'))).toContain(
        'User "dave" cannot create resource "sessions" in API group "api.polychrome.dev" at the cluster scope',
      );
      expect(await records.findPersonaByIdentity('bot:forged')).toBeUndefined();
    });
  });
});
