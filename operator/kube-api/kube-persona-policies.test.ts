/*
 * `personapaymentpolicies` on the Kubernetes door (kube-persona-policies.ts), through the
 * real door listener, its front-proxy check and the public API's own persona operations,
 * over the state plane's real Records service on mutual TLS. kube-apiserver's authorizer is
 * the one part played here (the SubjectAccessReview port answers from a list of grants and
 * keeps what it was asked); test/integration/kube-persona-policies.test.ts runs the same
 * through the real kube-apiserver and RBAC.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { request as httpsRequest } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { RecordsClient } from '../../common/records-client';
import { loadStateClientTls } from '../../common/state-channel';
import { ensureDevCerts, type DevCerts } from '../../hack/lib/dev-certs';
import { CertUsage, DevCertificateAuthority } from '../../hack/lib/pki';
import { startApi, type TestApi } from '../../test/support/api-fixtures';
import { startTestRecords, type TestRecords } from '../../test/support/records-server';
import { EXAMPLE_SPEND_LIMITS } from '../../test/support/spend-limits';
import { PersonaPaymentPolicies } from '../turns/persona-payment-policy';
import { KubeDoor, type AccessReviewRequest } from './kube-door';
import { KubePersonaPolicies, personaPolicyCaller } from './kube-persona-policies';
import { kubeRecordsResources } from './kube-records-resources';

const POLICIES = '/apis/api.polychrome.dev/v1alpha1/personapaymentpolicies';

let dir: string;
let certs: DevCerts;
let records: TestRecords;
let api: TestApi;
let proxy: { cert: Buffer; key: Buffer };
/** What RBAC allows: `user verb name` on personapaymentpolicies. */
const grants = new Set<string>();
/** Every SubjectAccessReview the door asked. */
const reviews: AccessReviewRequest[] = [];

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'polychrome-kube-persona-'));
  certs = await ensureDevCerts(join(dir, 'pki'));
  const ca = await DevCertificateAuthority.create(join(dir, 'front-proxy'), 'ca', 'Front proxy CA');
  const client = await ca.issue({
    name: 'front-proxy-client',
    commonName: 'front-proxy-client',
    usage: CertUsage.Client,
  });
  proxy = { cert: await readFile(client.certPath), key: await readFile(client.keyPath) };
  const caPem = await readFile(ca.certPath, 'utf8');
  records = await startTestRecords();
  const door = new KubeDoor({
    ports: {
      readAuthenticationConfig: () =>
        Promise.resolve({
          'requestheader-client-ca-file': caPem,
          'requestheader-allowed-names': '["front-proxy-client"]',
          'requestheader-username-headers': '["X-Remote-User"]',
          'requestheader-group-headers': '["X-Remote-Group"]',
        }),
      review: (request) => {
        reviews.push(request);
        const key = `${request.user.username} ${request.verb} ${request.name}`;
        const allowed = request.resource === 'personapaymentpolicies' && grants.has(key);
        return Promise.resolve({ allowed, reason: allowed ? 'granted in this test' : '' });
      },
      conversationUid: () => undefined,
    },
    logger: pino({ level: 'silent' }),
  });
  api = await startApi({
    personaPolicies: new PersonaPaymentPolicies(records.records),
    kube: {
      host: '127.0.0.1',
      port: 0,
      cert: await readFile(certs.controlPlane.certPath, 'utf8'),
      key: await readFile(certs.controlPlane.keyPath, 'utf8'),
      door,
      ...kubeRecordsResources(records.records, door),
    },
  });
}, 60_000);

afterAll(async () => {
  await api?.close();
  await records?.close();
  await rm(dir, { recursive: true, force: true });
});

/** A request as kube-apiserver's front proxy sends it for `user`. */
function asUser(
  user: string,
  method: 'GET' | 'POST',
  path: string,
  body?: unknown,
): Promise<{ status: number; json: Record<string, unknown> }> {
  return new Promise((resolve, reject) => {
    const outgoing = httpsRequest(
      {
        host: '127.0.0.1',
        port: api.server.kubeAddress().port,
        method,
        path,
        ...proxy,
        rejectUnauthorized: false,
        agent: false,
        headers: {
          'content-type': 'application/json',
          'x-remote-user': user,
          'x-remote-group': 'system:authenticated',
        },
      },
      (incoming) => {
        const chunks: Buffer[] = [];
        incoming.on('data', (c: Buffer) => chunks.push(c));
        incoming.on('end', () =>
          resolve({
            status: incoming.statusCode ?? 0,
            json: JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, unknown>,
          }),
        );
      },
    );
    outgoing.on('error', reject);
    outgoing.end(body === undefined ? undefined : JSON.stringify(body));
  });
}

const change = (actor: string, over: Record<string, unknown> = {}) => ({
  actor,
  wallet: 'team-wallet',
  limits: EXAMPLE_SPEND_LIMITS,
  reason: 'the research team pays for its reports',
  ...over,
});
const readPath = (personaId: string, actor: string): string =>
  `${POLICIES}/${personaId}?${new URLSearchParams({ actor }).toString()}`;
const history = async (personaId: string) =>
  (await records.records.getPersonaPaymentPolicy(personaId)).history;

describe('personapaymentpolicies on the Kubernetes door', () => {
  it('sets and reads a policy as the user RBAC allows, recorded with who and why; the review named that verb and persona', async () => {
    const personaId = await records.persona('email:research@example.com');
    grants.add(`erin create ${personaId}`).add(`erin get ${personaId}`);
    const set = await asUser('erin', 'POST', `${POLICIES}/${personaId}`, change('kubernetes:erin'));
    expect([set.status, set.json]).toEqual([
      200,
      expect.objectContaining({ personaId, wallet: 'team-wallet', setBy: 'kubernetes:erin' }),
    ]);
    const [recorded] = await history(personaId);
    expect(recorded).toMatchObject({
      setBy: 'kubernetes:erin',
      session: '',
      reason: 'the research team pays for its reports',
    });
    const read = await asUser('erin', 'GET', readPath(personaId, 'kubernetes:erin'));
    expect(read.status).toBe(200);
    expect(read.json.history).toEqual([
      expect.objectContaining({ sequence: 1, setBy: 'kubernetes:erin', wallet: 'team-wallet' }),
    ]);
    const asked = reviews.filter((r) => r.user.username === 'erin' && r.name === personaId);
    expect(asked.map((r) => [r.verb, r.resource, r.namespace, r.subresource])).toEqual([
      ['create', 'personapaymentpolicies', '', ''],
      ['get', 'personapaymentpolicies', '', ''],
    ]);
  });

  it('refuses a verb or a persona RBAC does not give, before the records are touched', async () => {
    const granted = await records.persona('email:granted@example.com');
    const other = await records.persona('email:other@example.com');
    grants.add(`gary get ${granted}`).add(`gary create ${granted}`);
    const otherSet = await asUser(
      'gary',
      'POST',
      `${POLICIES}/${other}`,
      change('kubernetes:gary'),
    );
    expect(otherSet.status).toBe(403);
    expect(String(otherSet.json.message)).toContain(
      'ask for a ClusterRoleBinding to polychrome-persona-payment-admin',
    );
    const otherRead = await asUser('gary', 'GET', readPath(other, 'kubernetes:gary'));
    expect(otherRead.status).toBe(403);
    const nobody = await asUser(
      'mallory',
      'POST',
      `${POLICIES}/${granted}`,
      change('kubernetes:mallory'),
    );
    expect(nobody.status).toBe(403);
    expect(await history(other)).toEqual([]);
    expect(await history(granted)).toEqual([]);
  });

  it('refuses a user their own persona (the one that links kubernetes:<user>) whatever RBAC gives; reading it is allowed', async () => {
    const own = await records.persona('kubernetes:frank');
    grants.add(`frank create ${own}`).add(`frank get ${own}`);
    const set = await asUser('frank', 'POST', `${POLICIES}/${own}`, change('kubernetes:frank'));
    expect(set.status).toBe(403);
    expect(String(set.json.message)).toContain(
      'may not set the payment policy of their own persona',
    );
    expect(await history(own)).toEqual([]);
    const read = await asUser('frank', 'GET', readPath(own, 'kubernetes:frank'));
    expect([read.status, read.json.sequence]).toEqual([200, 0]);
  });

  it('acts only as the Kubernetes identity: another actor is refused, nothing recorded', async () => {
    const personaId = await records.persona('email:impersonated@example.com');
    grants.add(`hana create ${personaId}`).add(`hana get ${personaId}`);
    const set = await asUser(
      'hana',
      'POST',
      `${POLICIES}/${personaId}`,
      change('email:root@example.com'),
    );
    expect(set.status).toBe(403);
    expect(String(set.json.message)).toContain('is not one of your identities');
    const read = await asUser('hana', 'GET', readPath(personaId, 'email:root@example.com'));
    expect(read.status).toBe(403);
    expect(await history(personaId)).toEqual([]);
  });

  it('names the field at fault in a bad body, and records nothing', async () => {
    const personaId = await records.persona('email:bad-limits@example.com');
    grants.add(`ivan create ${personaId}`);
    const bad = await asUser(
      'ivan',
      'POST',
      `${POLICIES}/${personaId}`,
      change('kubernetes:ivan', { limits: { ...EXAMPLE_SPEND_LIMITS, periodSeconds: 0 } }),
    );
    expect([bad.status, bad.json.kind]).toEqual([400, 'Status']);
    expect(bad.json.details).toMatchObject({ polychrome: { field: 'limits.periodSeconds' } });
    const unknown = await asUser('ivan', 'POST', `${POLICIES}/${personaId}`, {
      ...change('kubernetes:ivan'),
      apiVersion: 'api.polychrome.dev/v1alpha1',
    });
    expect([unknown.status, unknown.json.details]).toEqual([
      400,
      expect.objectContaining({ polychrome: { field: 'apiVersion' } }),
    ]);
    expect(await history(personaId)).toEqual([]);
  });
});

describe('KubePersonaPolicies', () => {
  const user = { username: 'system:serviceaccount:team:bot', groups: [], extra: {} };

  it('gives the caller the admin role for the request, its Kubernetes identity only, and the persona that links it', () => {
    const identity = 'kubernetes:system%3Aserviceaccount%3Ateam%3Abot';
    const own = { id: 'p-bot', identities: [identity, 'bot:desk'] };
    expect(personaPolicyCaller(user, own as never)).toEqual({
      identity,
      identities: [identity],
      personaId: 'p-bot',
      roles: ['admin'],
      sessionId: '',
    });
    expect(personaPolicyCaller(user, undefined).personaId).toBe('');
  });

  it('decides nothing when the records cannot say whose persona it is', async () => {
    // The control plane's real records client, with its certificate, and no state plane.
    const unreachable = new RecordsClient({
      address: '127.0.0.1:9',
      tls: await loadStateClientTls({
        ca: certs.ca.certPath,
        cert: certs.controlPlane.certPath,
        key: certs.controlPlane.keyPath,
      }),
      callTimeoutMs: 2_000,
    });
    const policies = new KubePersonaPolicies(unreachable, () => Promise.resolve(), 2_000);
    await expect(
      policies.caller(user, { personaId: 'p-1', verb: 'create' }, new AbortController().signal),
    ).rejects.toMatchObject({ code: 'unavailable' });
    unreachable.close();
  });
});
