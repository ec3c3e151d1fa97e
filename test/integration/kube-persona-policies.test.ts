/**
 * A persona's payment policy through the Kubernetes door and the real kube-apiserver
 * (docs/kube-api.md, "Persona payment policies"): the cluster-scoped
 * `personapaymentpolicies`, named by persona id, config/kube-api's ClusterRole
 * `polychrome-persona-payment-admin` bound to erin, the door's SubjectAccessReview, the
 * public API's persona operations and the state plane's real records. And what the others
 * would try: users without the verb, a namespace admin, erin on her own persona, as someone
 * else, with bad limits, and a grant for one persona used on another.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { RbacAuthorizationV1Api, type V1PolicyRule } from '@kubernetes/client-node';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { ExitCode } from '../../cli/cli-support';
import { runKubectlPolychrome } from '../../cli/kube-cli';
import type { RecordsClient } from '../../common/records-client';
import { pollUntil } from '../../hack/lib/processes';
import { EXAMPLE_SPEND_LIMITS } from '../support/spend-limits';
import { field, kubeConfig, sharedCluster } from './support/kube';
import {
  direct,
  KUBE_API_PATH,
  kubectl,
  kubeJson,
  startKubeDoorStack,
  type KubeAnswer,
  type KubeDoorStack,
} from './support/kube-door';

const POLICIES = `${KUBE_API_PATH}/personapaymentpolicies`;

describe("a persona's payment policy through kube-apiserver", () => {
  let stack: KubeDoorStack;
  let records: RecordsClient;
  let erin: string;
  let frank: string;
  let dir: string;
  /** Cluster-scoped RBAC objects the test made, deleted at the end. */
  const made: { roles: string[]; bindings: string[] } = { roles: [], bindings: [] };
  let serial = 0;

  /** A ClusterRoleBinding of `user` to `role`, and, when `rules` are given, that role. */
  async function bind(user: string, role: string, rules?: V1PolicyRule[]): Promise<void> {
    const rbac = (await kubeConfig()).makeApiClient(RbacAuthorizationV1Api);
    if (rules !== undefined) {
      await rbac.createClusterRole({ body: { metadata: { name: role }, rules } });
      made.roles.push(role);
    }
    const name = `${stack.namespace}-${user}-${role}`.slice(0, 63);
    await rbac.createClusterRoleBinding({
      body: {
        metadata: { name },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: role },
        subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: user }],
      },
    });
    made.bindings.push(name);
  }

  /** A persona of the records linking a fresh identity, or `identity`; its id. */
  async function persona(identity?: string): Promise<string> {
    serial += 1;
    const linked = identity ?? `email:kube-persona-${String(serial)}@example.com`;
    const created = await records.createPersona({
      displayName: linked,
      identities: [linked],
      roles: [],
    });
    return created.id;
  }

  const history = async (personaId: string) =>
    (await records.getPersonaPaymentPolicy(personaId)).history;

  const set = (
    who: string,
    personaId: string,
    over: Record<string, unknown> = {},
  ): Promise<KubeAnswer> =>
    kubeJson(who, 'POST', `${POLICIES}/${personaId}`, {
      actor: 'kubernetes:erin',
      wallet: 'research',
      limits: EXAMPLE_SPEND_LIMITS,
      reason: 'the research team pays for its reports',
      ...over,
    });

  const readPath = (personaId: string, actor: string): string =>
    `${POLICIES}/${personaId}?${new URLSearchParams({ actor }).toString()}`;

  beforeAll(async () => {
    stack = await startKubeDoorStack('kpersona');
    records = stack.records;
    dir = await mkdtemp(join(tmpdir(), 'kpersona-cli-'));
    await writeFile(join(dir, 'limits.json'), JSON.stringify(EXAMPLE_SPEND_LIMITS));
    const cluster = await sharedCluster();
    erin = await cluster.mintUser('erin', ['finance']);
    frank = await cluster.mintUser('frank', ['finance']);
    await bind('erin', 'polychrome-persona-payment-admin');
    await pollUntil(
      'erin may create personapaymentpolicies (the ClusterRoleBinding is in force)',
      async () => {
        const got = await kubectl(erin, [
          'auth',
          'can-i',
          'create',
          'personapaymentpolicies.api.polychrome.dev',
        ]);
        return got.stdout.trim() === 'yes' ? true : undefined;
      },
      { timeoutMs: 30_000, intervalMs: 250 },
    );
  }, 180_000);

  afterAll(async () => {
    const rbac = (await kubeConfig()).makeApiClient(RbacAuthorizationV1Api);
    for (const name of made.bindings) {
      await rbac.deleteClusterRoleBinding({ name }).catch(() => undefined);
    }
    for (const name of made.roles) await rbac.deleteClusterRole({ name }).catch(() => undefined);
    await stack?.close();
    if (dir !== undefined) await rm(dir, { recursive: true, force: true });
  });

  it('is in discovery: cluster-scoped, create and get', async () => {
    const got = await kubectl(stack.admin, ['get', '--raw', KUBE_API_PATH]);
    const list = JSON.parse(got.stdout) as {
      resources: { name: string; namespaced: boolean; kind: string; verbs: string[] }[];
    };
    expect(list.resources.find((r) => r.name === 'personapaymentpolicies')).toEqual(
      expect.objectContaining({
        namespaced: false,
        kind: 'PersonaPaymentPolicy',
        verbs: ['create', 'get'],
      }),
    );
  });

  it('sets another persona’s policy as erin, and reads it back with the change naming who and why', async () => {
    const personaId = await persona();
    const changed = await set(erin, personaId);
    expect([changed.status, changed.message]).toEqual([200, '']);
    expect(changed.json).toMatchObject({
      personaId,
      wallet: 'research',
      setBy: 'kubernetes:erin',
      sequence: 1,
    });
    const shown = await kubectl(erin, ['get', '--raw', readPath(personaId, 'kubernetes:erin')]);
    expect(shown.stderr).toBe('');
    expect(JSON.parse(shown.stdout)).toMatchObject({
      personaId,
      wallet: 'research',
      limits: EXAMPLE_SPEND_LIMITS,
      history: [
        {
          sequence: 1,
          wallet: 'research',
          setBy: 'kubernetes:erin',
          reason: 'the research team pays for its reports',
        },
      ],
    });
    const [recorded] = await history(personaId);
    expect(recorded).toMatchObject({ setBy: 'kubernetes:erin', session: '' });
    expect(
      stack.api.logs.some(
        (l) => l.route === `${POLICIES}/{personaId}` && l.status === 200 && l.listener === 'kube',
      ),
    ).toBe(true);
  });

  it('refuses bob (no role), dave (a namespace admin) and carol (session admin) in kube-apiserver: 403, nothing recorded', async () => {
    const personaId = await persona();
    for (const [who, name] of [
      [stack.users.bob, 'bob'],
      [stack.users.dave, 'dave'],
      [stack.users.carol, 'carol'],
    ] as const) {
      const got = await set(who, personaId, { actor: `kubernetes:${name}` });
      expect([name, got.status]).toEqual([name, 403]);
      expect(got.message).toContain(
        `User "${name}" cannot create resource "personapaymentpolicies" in API group "api.polychrome.dev"`,
      );
      const read = await kubectl(who, ['get', '--raw', readPath(personaId, `kubernetes:${name}`)]);
      expect(read.stderr).toContain('cannot get resource "personapaymentpolicies"');
    }
    expect(await history(personaId)).toEqual([]);
  });

  it('is still refused by the door’s own SubjectAccessReview with the real proxy certificate naming bob (defense in depth)', async () => {
    const personaId = await persona();
    const answer = await direct(stack.kubePort, `${POLICIES}/${personaId}`, {
      ca: stack.servingCa,
      cert: stack.proxyClient,
      method: 'POST',
      body: JSON.stringify({
        actor: 'kubernetes:bob',
        wallet: 'research',
        limits: EXAMPLE_SPEND_LIMITS,
        reason: 'forged',
      }),
      headers: { 'X-Remote-User': 'bob', 'X-Remote-Group': 'team-b' },
    });
    expect(answer.status).toBe(403);
    expect(String(field(answer.body, 'message'))).toContain(
      'User "bob" cannot create resource "personapaymentpolicies" in API group "api.polychrome.dev" at the cluster scope',
    );
    expect(await history(personaId)).toEqual([]);
  });

  it('refuses erin her own persona (the one that links kubernetes:erin), though RBAC allows the verb; she may read it', async () => {
    // The cluster admin sets up erin's persona as the roles operation does.
    const made = await kubeJson(stack.admin, 'POST', `${KUBE_API_PATH}/personaroles`, {
      persona: 'kubernetes:erin',
      roles: [],
    });
    expect(made.status).toBe(200);
    const own = (made.json as { persona: { id: string } }).persona.id;
    const got = await set(erin, own);
    expect([got.status, got.message]).toEqual([
      403,
      expect.stringContaining('may not set the payment policy of their own persona'),
    ]);
    expect(await history(own)).toEqual([]);
    const read = await kubectl(erin, ['get', '--raw', readPath(own, 'kubernetes:erin')]);
    expect(JSON.parse(read.stdout)).toMatchObject({ personaId: own, sequence: 0, history: [] });
  });

  it('refuses erin acting as another identity, and names the field of bad limits (400); nothing recorded', async () => {
    const personaId = await persona();
    const impostor = await set(erin, personaId, { actor: 'email:root@example.com' });
    expect([impostor.status, impostor.message]).toEqual([
      403,
      expect.stringContaining('is not one of your identities'),
    ]);
    const bad = await set(erin, personaId, {
      limits: { ...EXAMPLE_SPEND_LIMITS, periodSeconds: 0 },
    });
    expect(bad.status).toBe(400);
    expect(bad.json).toMatchObject({
      kind: 'Status',
      reason: 'BadRequest',
      details: { polychrome: { field: 'limits.periodSeconds' } },
    });
    expect(await history(personaId)).toEqual([]);
  });

  it('holds a grant to its persona name: frank sets the one he is granted, and is refused any other', async () => {
    const granted = await persona();
    const other = await persona();
    // RBAC by name: the persona id is the name kube-apiserver reads from the path, of a POST
    // as of a GET.
    await bind('frank', `${stack.namespace}-one-persona`, [
      {
        apiGroups: ['api.polychrome.dev'],
        resources: ['personapaymentpolicies'],
        resourceNames: [granted],
        verbs: ['create', 'get'],
      },
    ]);
    await pollUntil(
      'frank may create personapaymentpolicies of his one persona',
      async () => {
        const got = await kubectl(frank, [
          'auth',
          'can-i',
          'create',
          `personapaymentpolicies.api.polychrome.dev/${granted}`,
        ]);
        return got.stdout.trim() === 'yes' ? true : undefined;
      },
      { timeoutMs: 30_000, intervalMs: 250 },
    );
    const refused = await set(frank, other, { actor: 'kubernetes:frank' });
    expect([refused.status, refused.message]).toEqual([
      403,
      expect.stringContaining(`cannot create resource "personapaymentpolicies"`),
    ]);
    const allowed = await set(frank, granted, { actor: 'kubernetes:frank' });
    expect([allowed.status, allowed.message]).toEqual([200, '']);
    expect(await history(other)).toEqual([]);
    expect((await history(granted)).map((c) => c.setBy)).toEqual(['kubernetes:frank']);
  });

  it('runs kubectl polychrome personas payment-policy set, get -o yaml and clear as erin, acting as her Kubernetes identity', async () => {
    const personaId = await persona();
    const run = async (...args: string[]) => {
      const stdout = new PassThrough();
      const stderr = new PassThrough();
      const text = { out: '', err: '' };
      stdout.on('data', (c: Buffer) => (text.out += c.toString()));
      stderr.on('data', (c: Buffer) => (text.err += c.toString()));
      const code = await runKubectlPolychrome(
        ['personas', 'payment-policy', ...args, '--kubeconfig', erin],
        { stdout, stderr },
        {},
      );
      return { code, ...text };
    };
    const limits = join(dir, 'limits.json');
    const setRun = await run(
      'set',
      personaId,
      '--limits',
      limits,
      '--wallet',
      'research',
      '--reason',
      'OPS-140',
    );
    expect([setRun.code, setRun.err]).toEqual([ExitCode.Ok, '']);
    expect(setRun.out).toContain(`persona ${personaId}: wallet research`);
    expect(setRun.out).toContain('set by kubernetes:erin');
    const yaml = await run('get', personaId, '-o', 'yaml');
    expect(yaml.code).toBe(ExitCode.Ok);
    expect(yaml.out).toContain(`personaId: ${personaId}`);
    expect(yaml.out).toContain('setBy: kubernetes:erin');
    expect(yaml.out).toContain('reason: OPS-140');
    const cleared = await run('clear', personaId, '--reason', 'contract ended');
    expect(cleared.out).toContain(`persona ${personaId}: no payment policy`);
    const bobRun = await (async () => {
      const stdout = new PassThrough();
      const stderr = new PassThrough();
      let err = '';
      stderr.on('data', (c: Buffer) => (err += c.toString()));
      const code = await runKubectlPolychrome(
        ['personas', 'payment-policy', 'get', personaId, '--kubeconfig', stack.users.bob],
        { stdout, stderr },
        {},
      );
      return { code, err };
    })();
    expect(bobRun.code).toBe(ExitCode.Error);
    expect(bobRun.err).toContain(
      'ask your cluster admin for a ClusterRoleBinding to polychrome-persona-payment-admin',
    );
    expect((await history(personaId)).map((c) => [c.setBy, c.reason])).toEqual([
      ['kubernetes:erin', 'OPS-140'],
      ['kubernetes:erin', 'contract ended'],
    ]);
  });
});
