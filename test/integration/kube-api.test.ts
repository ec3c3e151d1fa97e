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
import { type KubeConfig, CoreV1Api } from '@kubernetes/client-node';
import { ClassicLevel } from 'classic-level';
import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { request as httpsRequest, type RequestOptions } from 'node:https';
import { decodePayload, EventKind } from '../../common/event-kinds';
import type { RecordsClient } from '../../common/records-client';
import type { CertFiles } from '../../hack/lib/pki';
import { pollUntil } from '../../hack/lib/processes';
import { startTracing } from '../../common/tracing';
import { serviceAccountAuthenticator } from '../../operator/kube-api/service-account-tokens';
import { tokenReviewer } from '../../operator/kube-api/kube-door-ports';
import type { TestApi } from '../support/api-fixtures';
import { field, kubeConfig } from './support/kube';
import {
  direct,
  KUBE_API_PATH,
  kubectl,
  kubectlProxy,
  kubeJson,
  startKubeDoorStack,
  type KubeAnswer,
  type KubeDoorStack,
} from './support/kube-door';
import { OtelCollector } from './support/otel-collector';
import { EXAMPLE_SPEND_LIMITS } from '../support/spend-limits';

const apiPath = KUBE_API_PATH;

describe('the Kubernetes door through kube-apiserver', () => {
  let stack: KubeDoorStack;
  let admin: string;
  let api: TestApi;
  let servingCa: string;
  let kubePort: number;
  let alice: string;
  let bob: string;
  let carol: string;
  let dave: string;
  let conversationId: string;
  let proxyClient: CertFiles;
  let strangerProxy: CertFiles;
  let records: RecordsClient;
  let recordsAdmin: RecordsClient;
  let asControlPlane: KubeConfig;
  let ns: { name: string };

  beforeAll(async () => {
    stack = await startKubeDoorStack('kubeapi');
    ({
      admin,
      api,
      servingCa,
      kubePort,
      proxyClient,
      strangerProxy,
      records,
      recordsAdmin,
      asControlPlane,
    } = stack);
    ({ alice, bob, carol, dave } = stack.users);
    ns = { name: stack.namespace };
    conversationId = stack.addConversation('hello');
  }, 180_000);

  afterAll(async () => {
    await stack?.close();
  });

  it('serves discovery: every subresource with a kind and its verbs', async () => {
    const got = await kubectl(admin, ['get', '--raw', apiPath]);
    expect(got.stderr).toBe('');
    const list = JSON.parse(got.stdout) as {
      resources: { name: string; kind: string; verbs: string[] }[];
    };
    expect(list.resources.map((r) => `${r.name} ${r.kind} ${r.verbs.join(',')}`)).toEqual([
      'conversations/transcript Transcript get',
      'conversations/memory Memory get,delete',
      'conversations/messages TurnReply create',
      'conversations/log EventStream get',
      'conversations/export JournalExport get',
      'conversations/repair RepairResult create',
      'conversations/erase EraseResult create',
      'conversations/approvals TurnReply create,delete',
      'conversations/questions TurnReply create,delete',
      'conversations/resolve ResolveResult create',
      'conversations/accept-rollback AcceptRollbackResult create',
      'conversations/payment-policy PaymentPolicySet create,get',
      'sessions Session create,delete',
      'personaroles PersonaRoles create',
      'personapaymentpolicies PersonaPaymentPolicy create,get',
    ]);
  });

  it('runs a turn for alice by Conversation name, attributed to kubernetes:alice', async () => {
    const path = `${apiPath}/namespaces/${ns.name}/conversations/hello`;
    const posted = await kubeJson(alice, 'POST', `${path}/messages`, {
      text: 'hello from kubectl',
      idempotencyKey: 'k1',
    });
    expect([posted.status, posted.message]).toEqual([200, '']);
    const reply = posted.json as Record<string, unknown>;
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
    const posted = await kubeJson(alice, 'POST', `${path}/messages`, {
      text: 'hello from kubectl',
      idempotencyKey: 'k1',
    });
    const turnId = String((posted.json as Record<string, unknown>).turnId);
    const head = (await api.turns.journal.entries(`conv-${conversationId}`)).length;
    const resolve = (who: string, body: object): Promise<KubeAnswer> =>
      kubeJson(who, 'POST', `${path}/resolve`, body);
    const asDave = { actor: 'kubernetes:dave', decision: 'did_not_run' };
    const byAlice = await resolve(alice, { ...asDave, actor: 'kubernetes:alice', turnId });
    expect(byAlice.ok).toBe(false);
    expect(byAlice.message).toContain('cannot create resource "conversations/resolve"');
    const complete = await resolve(dave, { ...asDave, turnId });
    expect(complete.ok).toBe(false);
    expect(complete.message).toContain(`turn ${turnId} is not quarantined`);
    expect(complete.message).toContain('it is complete');
    const noTurn = await resolve(dave, asDave);
    expect(noTurn.message).toContain('turnId is required');
    const impostor = await resolve(dave, { ...asDave, actor: 'kubernetes:alice', turnId });
    expect(impostor.message).toContain('is not one of your identities');
    expect((await api.turns.journal.entries(`conv-${conversationId}`)).length).toBe(head);
  });

  it('serves payment-policy to a namespace admin only, acting as their Kubernetes identity: recorded once, read back', async () => {
    const path = `${apiPath}/namespaces/${ns.name}/conversations/hello/payment-policy`;
    const entries = () => api.turns.journal.entries(`conv-${conversationId}`);
    const head = (await entries()).length;
    const link = (who: string, actor: string): Promise<KubeAnswer> =>
      kubeJson(who, 'POST', path, {
        actor,
        wallet: 'support-desk',
        limits: EXAMPLE_SPEND_LIMITS,
        reason: 'paid search',
      });
    const byAlice = await link(alice, 'kubernetes:alice');
    expect(byAlice.message).toContain('cannot create resource "conversations/payment-policy"');
    const impostor = await link(dave, 'kubernetes:alice');
    expect(impostor.message).toContain('is not one of your identities');
    expect((await entries()).length).toBe(head);
    const linked = await link(dave, 'kubernetes:dave');
    expect([linked.status, linked.message]).toEqual([200, '']);
    expect((linked.json as Record<string, unknown>).position).toBe(head);
    const read = `${path}?actor=${encodeURIComponent('kubernetes:dave')}`;
    const shown = await kubectl(dave, ['get', '--raw', read]);
    expect(JSON.parse(shown.stdout)).toMatchObject({
      wallet: 'support-desk',
      setBy: 'kubernetes:dave',
      position: head,
    });
    const readByAlice = await kubectl(alice, ['get', '--raw', read.replace('dave', 'alice')]);
    expect(readByAlice.stderr).toContain('cannot get resource "conversations/payment-policy"');
    expect((await entries()).filter((e) => e.kind === 'payment_policy')).toHaveLength(1);
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
    const posted = await kubeJson(bob, 'POST', `${path}/messages`, { text: 'let me in' });
    expect([posted.ok, posted.status]).toEqual([false, 403]);
    expect(posted.message).toContain('cannot create resource "conversations/messages"');
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
      // The turn ran under the door's span: the coordinator wrote it onto the span.
      expect(request?.attributes).toMatchObject({
        'polychrome.turn.operation': 'postMessage',
        'polychrome.turn.status': 'complete',
      });
      expect(String(request?.attributes['polychrome.turn.id'] ?? '')).not.toBe('');
      // The harness (in this process here) got the context over gRPC: its RunTurn SERVER
      // span is the door span's child, with no CLIENT span between them.
      const runTurn = await pollUntil(
        'the harness’s RunTurn span in the caller’s trace',
        () =>
          Promise.resolve(
            collector
              .spans()
              .find(
                (span) =>
                  span.traceId === traceId &&
                  span.name === 'polychrome.harness.v1.Harness/RunTurn' &&
                  span.kind === 2,
              ),
          ),
        { timeoutMs: 30_000, intervalMs: 250 },
      );
      expect(runTurn.parentSpanId).toBe(request?.spanId);
    } finally {
      await tracing?.shutdown();
      process.env = saved;
      await collector.stop();
    }
  }, 60_000);

  const allowed = (user: string, verb: string, sub: string): Promise<boolean> =>
    stack.allowed(user, verb, sub);

  it('aggregates the admin-only verbs into the built-in admin role only, not edit or view', async () => {
    await pollUntil(
      'dave may create conversations/resolve (admin aggregates polychrome-conversation-admin)',
      async () => ((await allowed('dave', 'create', 'resolve')) ? true : undefined),
      { timeoutMs: 30_000, intervalMs: 250 },
    );
    const table: [string, string, string, boolean][] = [];
    for (const user of ['dave', 'alice', 'bob']) {
      for (const [verb, sub] of [
        ['get', 'transcript'],
        ['create', 'messages'],
        ['create', 'approvals'],
        ['delete', 'approvals'],
        ['create', 'questions'],
        ['delete', 'questions'],
        ['create', 'repair'],
        ['create', 'erase'],
        ['create', 'resolve'],
        ['create', 'accept-rollback'],
        ['create', 'payment-policy'],
        ['get', 'payment-policy'],
        ['get', 'export'],
      ] as const) {
        table.push([user, verb, sub, await allowed(user, verb, sub)]);
      }
    }
    // An editor answers questions (they are for the person talking) but never approves a
    // call or cancels anything: that is the admin's.
    // Erasure is its own ClusterRole, aggregated into no built-in role: not even the admin.
    const editor = ['get transcript', 'create messages', 'create questions'];
    expect(table).toEqual(
      table.map(([user, verb, sub]) => [
        user,
        verb,
        sub,
        sub !== 'erase' &&
          (user === 'dave' || (user === 'alice' && editor.includes(`${verb} ${sub}`))),
      ]),
    );
  });

  describe('sessions', () => {
    const sessionsPath = `${apiPath}/sessions`;
    const mint = (who: string, body: object): Promise<KubeAnswer> =>
      kubeJson(who, 'POST', sessionsPath, body);

    it('mints a session token for a persona as carol (session admin): shown once, live in the records, its minter recorded', async () => {
      // Roles are set by the roles operation (here the cluster admin), never by a mint.
      const set = await kubeJson(admin, 'POST', `${apiPath}/personaroles`, {
        persona: 'bot:support-desk',
        roles: ['edge'],
      });
      expect([set.status, set.message]).toEqual([200, '']);
      const before = Date.now();
      const got = await mint(carol, { persona: 'bot:support-desk', ttl: '720h' });
      expect([got.status, got.message]).toEqual([201, '']);
      const session = got.json as {
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
      expect(found.session.mintedBy).toBe('kubernetes:carol');
      // Shown once: never in the control plane's log.
      expect(api.rawLogs.join('\n')).not.toContain(session.token);
      expect(
        api.logs.some(
          (l) => l.route === '/apis/api.polychrome.dev/v1alpha1/sessions' && l.status === 201,
        ),
      ).toBe(true);

      // Revoked with a DELETE: the token stops working at once in the records.
      const revoked = await kubeJson(carol, 'DELETE', `${sessionsPath}/${session.metadata.name}`);
      expect([revoked.status, revoked.message]).toEqual([200, '']);
      expect(field(revoked.json, 'revokedAt')).toEqual(expect.any(String));
      await expect(records.authenticate(session.token)).rejects.toMatchObject({
        code: 'unauthenticated',
      });
    });

    it('refuses carol a session for a persona with a role she does not hold (admin): nothing minted', async () => {
      const set = await kubeJson(admin, 'POST', `${apiPath}/personaroles`, {
        persona: 'email:root@example.com',
        roles: ['admin'],
      });
      expect(set.status).toBe(200);
      const got = await mint(carol, { persona: 'email:root@example.com' });
      expect([got.ok, got.status]).toEqual([false, 403]);
      expect(got.message).toContain('the role "admin", which the user does not hold');
      const persona = await records.findPersonaByIdentity('email:root@example.com');
      expect(await recordsAdmin.listSessions(persona?.id ?? '')).toEqual([]);
      // Nor may she give herself the role through the roles operation.
      const grant = await kubeJson(carol, 'POST', `${apiPath}/personaroles`, {
        persona: 'kubernetes:carol',
        roles: ['admin'],
      });
      expect([grant.ok, grant.status]).toEqual([false, 403]);
      expect(await records.findPersonaByIdentity('kubernetes:carol')).toBeUndefined();
    });

    it('refuses alice (edit), dave (a namespace admin) and bob: Forbidden, no persona, no revocation', async () => {
      const kept = (await mint(carol, { persona: 'bot:kept', ttl: '1h' })).json as {
        metadata: { name: string };
        token: string;
      };
      for (const who of [alice, dave, bob]) {
        const got = await mint(who, { persona: 'bot:intruder', role: 'admin' });
        expect([got.ok, got.status]).toEqual([false, 403]);
        expect(got.message).toMatch(/forbidden/iu);
        const deleted = await kubeJson(who, 'DELETE', `${sessionsPath}/${kept.metadata.name}`);
        expect([deleted.ok, deleted.status]).toEqual([false, 403]);
        expect(deleted.message).toMatch(/forbidden/iu);
      }
      expect(await records.findPersonaByIdentity('bot:intruder')).toBeUndefined();
      expect((await records.authenticate(kept.token)).persona.identities).toEqual(['bot:kept']);
    });

    it('names what is wrong in a bad request', async () => {
      const unknownField = await mint(carol, { persona: 'bot:x', rol: 'edge' });
      expect([unknownField.ok, unknownField.status]).toEqual([false, 400]);
      expect(unknownField.message).toContain('unknown field "rol"');
      const badTtl = await mint(carol, { persona: 'bot:x', ttl: '31d' });
      expect(badTtl.message).toContain('ttl must be a duration such as "720h"');
      const tooLong = await mint(carol, { persona: 'bot:x', ttl: '721h' });
      expect(tooLong.message).toContain('at most 720h');
      const withRole = await mint(carol, { persona: 'bot:x', role: 'member' });
      expect([withRole.status, withRole.message]).toEqual([
        400,
        expect.stringContaining("minting never changes a persona's roles"),
      ]);
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
      // A persona admin links it through the door's roles operation, as docs/kube-api.md says.
      const linked = await kubeJson(admin, 'POST', `${apiPath}/personaroles`, {
        persona: identity,
        roles: ['edge'],
      });
      expect([linked.status, linked.message]).toEqual([200, '']);
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

  describe('a namespace editor and a ServiceAccount linked to an admin persona', () => {
    const personaRoles = `${apiPath}/personaroles`;

    /** `path` on kube-apiserver with `token` as the only credential; the status code. */
    async function asBearer(token: string, path: string): Promise<number> {
      const cluster = (await kubeConfig()).getCurrentCluster();
      const server = new URL(cluster?.server ?? '');
      const ca =
        cluster?.caData === undefined
          ? await readFile(cluster?.caFile ?? '')
          : Buffer.from(cluster.caData, 'base64');
      return new Promise<number>((resolve, reject) => {
        const req = httpsRequest(
          {
            host: server.hostname,
            port: server.port,
            path,
            ca,
            headers: { authorization: `Bearer ${token}`, accept: 'application/json' },
          },
          (res) => {
            res.resume();
            res.once('end', () => resolve(res.statusCode ?? 0));
          },
        );
        req.once('error', reject);
        req.end();
      });
    }

    /**
     * Rewrites the persona record as the version before the ServiceAccount rule wrote it
     * (no rolesSetBy, admin held), with the state plane stopped: LevelDB has one writer.
     */
    async function writeOldRecord(persona: { id: string; identities: readonly string[] }) {
      await stack.state.kill();
      const db = new ClassicLevel<string, string>(`${stack.state.dataDir}-records`, {
        keyEncoding: 'utf8',
        valueEncoding: 'utf8',
      });
      const sub = db.sublevel<string, string>('records', {
        keyEncoding: 'utf8',
        valueEncoding: 'utf8',
      });
      await sub.put(
        `persona:${persona.id}`,
        JSON.stringify({
          id: persona.id,
          displayName: persona.identities[0],
          identities: persona.identities,
          roles: ['admin', 'edge'],
          version: 2,
          createdAtMs: 1,
          updatedAtMs: 1,
        }),
      );
      await db.close();
      await stack.state.start();
    }

    it('refuses admin for the account, and gives an editor who mints its token no admin from an old record, on either door', async () => {
      const core = (await kubeConfig()).makeApiClient(CoreV1Api);
      await core.createNamespacedServiceAccount({
        namespace: ns.name,
        body: { metadata: { name: 'desk-bot' } },
      });
      const identity = `kubernetes:system%3Aserviceaccount%3A${ns.name}%3Adesk-bot`;

      // Linking the account to admin is refused, by the roles operation and by the records.
      const refused = await kubeJson(admin, 'POST', personaRoles, {
        persona: identity,
        roles: ['admin'],
      });
      expect([refused.ok, refused.status]).toEqual([false, 412]);
      expect(refused.message).toContain(`ServiceAccount identity "${identity}"`);
      expect(await records.findPersonaByIdentity(identity)).toBeUndefined();
      const root = await records.createPersona({
        displayName: 'Root',
        roles: ['admin'],
        identities: [`email:root-${ns.name}@example.com`],
      });
      await expect(recordsAdmin.linkIdentity(root.id, identity)).rejects.toMatchObject({
        code: 'failed_precondition',
      });
      // A mint never takes roles; it says where roles are set.
      const mintWithRole = await kubeJson(admin, 'POST', `${apiPath}/sessions`, {
        persona: identity,
        role: 'admin',
      });
      expect([mintWithRole.status, mintWithRole.message]).toEqual([
        400,
        expect.stringContaining('POST personaroles'),
      ]);

      // The account's persona as an edge, set by the roles operation, which records who.
      const set = await kubeJson(admin, 'POST', personaRoles, {
        persona: identity,
        roles: ['edge'],
      });
      expect([set.status, set.message]).toEqual([200, '']);
      expect(set.json).toMatchObject({
        persona: { identity, roles: ['edge'] },
        setBy: expect.stringMatching(/^kubernetes:/u),
      });
      const persona = await records.findPersonaByIdentity(identity);
      if (persona === undefined) throw new Error('the roles operation created no persona');
      // And a record from before the rule, which holds admin.
      await writeOldRecord(persona);
      expect((await records.findPersonaByIdentity(identity))?.roles).toEqual(['admin', 'edge']);

      // alice holds only `edit` in the namespace: enough to ask the real TokenRequest API
      // for the account's token, with the public API's audience.
      const minted = await kubectl(alice, [
        'create',
        'token',
        'desk-bot',
        '-n',
        ns.name,
        '--audience',
        'polychrome',
      ]);
      expect(minted.stderr).toBe('');
      const token = minted.stdout.trim();

      // The public API: the real TokenReview and records make the caller, without admin.
      const caller = await serviceAccountAuthenticator({
        review: tokenReviewer(asControlPlane),
        records,
      })(token);
      expect([caller.identity, caller.roles]).toEqual([identity, ['edge']]);
      // That caller on an admin-only route of the running API: refused.
      api.tokens.callers.set(token, caller);
      const exported = await fetch(
        `${api.base}/v1/conversations/${conversationId}/export?actor=${encodeURIComponent(identity)}`,
        { headers: { authorization: `Bearer ${token}` } },
      );
      expect(exported.status).toBe(403);

      // The Kubernetes door: RBAC decides, and the account has no grant there (a token of
      // the same account for kube-apiserver, again from alice).
      const kubeToken = (
        await kubectl(alice, ['create', 'token', 'desk-bot', '-n', ns.name])
      ).stdout.trim();
      const conversation = `${apiPath}/namespaces/${ns.name}/conversations/hello`;
      expect(await asBearer(kubeToken, `${conversation}/export?actor=${identity}`)).toBe(403);
      expect(await asBearer(kubeToken, `${conversation}/transcript`)).toBe(403);
      // Nor may alice mint a session or set roles for the persona herself.
      for (const [path, body] of [
        [`${apiPath}/sessions`, { persona: identity }],
        [personaRoles, { persona: identity, roles: [] }],
      ] as const) {
        const got = await kubeJson(alice, 'POST', path, body);
        expect([got.ok, got.status]).toEqual([false, 403]);
      }
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

  describe('a web page that reaches the user’s kubectl proxy', () => {
    // kubectl proxy on loopback adds the user's credentials to whatever reaches it, web
    // pages included. A page can make the browser send a cross-site POST or DELETE with no
    // Content-Type (a no-cors fetch of a Blob) or text/plain (of a string), never
    // application/json (that needs a CORS preflight). fetch here sends exactly those.
    let asDave: Awaited<ReturnType<typeof kubectlProxy>>;
    let asCarol: Awaited<ReturnType<typeof kubectlProxy>>;
    const refusal =
      'kubectl create --raw and kubectl delete --raw send none: use kubectl polychrome';

    beforeAll(async () => {
      asDave = await kubectlProxy(dave);
      asCarol = await kubectlProxy(carol);
    }, 60_000);

    afterAll(async () => {
      await asDave?.close();
      await asCarol?.close();
    });

    /** A request through the proxy; the answer's status and Kubernetes Status message. */
    async function through(
      proxy: { readonly base: string },
      method: 'POST' | 'DELETE',
      path: string,
      body: { readonly blob?: string; readonly text?: string; readonly json?: unknown } = {},
    ): Promise<{ status: number; json: unknown; message: string }> {
      const init: RequestInit =
        body.blob !== undefined
          ? { body: new Blob([body.blob]) }
          : body.text !== undefined
            ? { body: body.text }
            : body.json !== undefined
              ? { body: JSON.stringify(body.json), headers: { 'content-type': 'application/json' } }
              : {};
      const response = await fetch(`${proxy.base}${path}`, { method, ...init });
      const json: unknown = await response.json();
      const message = field(json, 'kind') === 'Status' ? String(field(json, 'message')) : '';
      return { status: response.status, json, message };
    }

    it('refuses a message with no Content-Type or text/plain and a DELETE not declared JSON: 415, nothing committed; application/json works', async () => {
      const path = `${apiPath}/namespaces/${ns.name}/conversations/hello`;
      const head = api.head(conversationId);
      const transcript = (await kubectl(dave, ['get', '--raw', `${path}/transcript`])).stdout;
      const message = JSON.stringify({ text: 'posted by a web page', idempotencyKey: 'k-csrf' });
      const attempts = [
        await through(asDave, 'POST', `${path}/messages`, { blob: message }),
        await through(asDave, 'POST', `${path}/messages`, { text: message }),
        await through(asDave, 'DELETE', `${path}/approvals/r-none`),
      ];
      for (const attempt of attempts) {
        expect(attempt.status).toBe(415);
        expect(attempt.message).toContain('request must send "Content-Type: application/json"');
        expect(attempt.message).toContain(refusal);
      }
      expect(api.head(conversationId)).toBe(head);
      expect((await kubectl(dave, ['get', '--raw', `${path}/transcript`])).stdout).toBe(transcript);

      const declared = await through(asDave, 'POST', `${path}/messages`, {
        json: { text: 'posted by dave', idempotencyKey: 'k-proxy' },
      });
      expect([declared.status, field(declared.json, 'status')]).toEqual([200, 'complete']);
      expect(api.head(conversationId)).toBeGreaterThan(head);
      // A DELETE declared JSON reaches the turn code, which knows no such approval.
      const cancel = await through(asDave, 'DELETE', `${path}/approvals/r-none`, { json: {} });
      expect(cancel.status).toBe(404);
      expect(cancel.message).toContain('no approval r-none in this conversation');
    });

    it('mints and revokes no session for a request not declared JSON; application/json does both', async () => {
      const sessions = `${apiPath}/sessions`;
      const forged = await through(asCarol, 'POST', sessions, {
        blob: JSON.stringify({ persona: 'bot:cross-site', role: 'admin' }),
      });
      expect(forged.status).toBe(415);
      expect(forged.message).toContain(refusal);
      expect(await records.findPersonaByIdentity('bot:cross-site')).toBeUndefined();

      const minted = await through(asCarol, 'POST', sessions, {
        json: { persona: 'bot:proxied', ttl: '1h' },
      });
      expect(minted.status).toBe(201);
      const { metadata, token } = minted.json as { metadata: { name: string }; token: string };
      const revoke = await through(asCarol, 'DELETE', `${sessions}/${metadata.name}`);
      expect(revoke.status).toBe(415);
      expect((await records.authenticate(token)).persona.identities).toEqual(['bot:proxied']);
      const revoked = await through(asCarol, 'DELETE', `${sessions}/${metadata.name}`, {
        json: {},
      });
      expect(revoked.status).toBe(200);
      await expect(records.authenticate(token)).rejects.toMatchObject({
        code: 'unauthenticated',
      });
    });
  });

  // Last: it takes the door off the network for a while.
  it("shows kube-apiserver's aggregator_unavailable_apiservice, the series the PolychromeKubeApiUnavailable alert selects, at 1 while the door is down and 0 once it is back", async () => {
    const rules = await readFile('config/monitoring/prometheus-rule.yaml', 'utf8');
    const alert = rules.slice(rules.indexOf('- alert: PolychromeKubeApiUnavailable'));
    const selector = /\((\w+)\{name="([^"]+)"\}\)/u.exec(alert);
    expect(selector?.slice(1)).toEqual([
      'aggregator_unavailable_apiservice',
      'v1alpha1.api.polychrome.dev',
    ]);
    const [, metric, name] = selector ?? [];
    const series = `${String(metric)}{name="${String(name)}"} `;
    const value = async (): Promise<string | undefined> => {
      const scraped = await kubectl(admin, ['get', '--raw', '/metrics']);
      expect(scraped.stderr).toBe('');
      const line = scraped.stdout.split('\n').find((l) => l.startsWith(series));
      return line?.slice(series.length);
    };
    const becomes = (wanted: string, what: string): Promise<true> =>
      pollUntil(what, async () => ((await value()) === wanted ? true : undefined), {
        timeoutMs: 90_000,
        intervalMs: 1_000,
      });
    await becomes('0', 'the APIService reported available');
    await stack.doorDown();
    try {
      const downAt = Date.now();
      await becomes('1', 'the APIService reported unavailable');
      process.stderr.write(`APIService unavailable after ${String(Date.now() - downAt)} ms\n`);
    } finally {
      await stack.doorUp();
    }
    await becomes('0', 'the APIService reported available again');
    const discovered = await kubectl(admin, ['get', '--raw', KUBE_API_PATH]);
    expect(discovered.ok).toBe(true);
  }, 240_000);
});
