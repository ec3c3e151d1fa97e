/**
 * Issue #25, 1: a conversation's content (transcript, log, export) is Secret-level on the
 * Kubernetes door, tried as an attacker would on the real kube-apiserver of the shared
 * cluster, with config/kube-api's roles as kube-controller-manager aggregates them.
 *
 * A member creates a private conversation through the public API; it lands in the
 * control plane's conversation namespace (polychrome-conversations), not `default`. Then
 * every Kubernetes user who holds no content grant there tries to read it: a ServiceAccount
 * with `view` there (its real token from the TokenRequest API), a user with `edit` in
 * `default`, a user with `view` cluster-wide, the stack's namespace editor and admin. Each
 * gets Forbidden from kube-apiserver and nothing reaches the door, while `view` still shows
 * the Conversation object, and an explicit polychrome-conversation-reader or `edit` there
 * reads it (so the refusals are RBAC's, not a broken route).
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { CoreV1Api, RbacAuthorizationV1Api, type KubeConfig } from '@kubernetes/client-node';
import { randomBytes } from 'node:crypto';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { pollUntil } from '../../hack/lib/processes';
import { DEFAULT_CONVERSATION_NAMESPACE } from '../../operator/config';
import { validMinimalConversationSpec } from '../../operator/api/v1alpha1/conversation-cases';
import { call, TOKENS } from '../support/api-fixtures';
import type { Caller } from '../../operator/turns/turn-service';
import {
  conversations as conversationsApi,
  createConversationObject,
  kubeConfig,
  sharedCluster,
} from './support/kube';
import {
  KUBE_API_PATH,
  kubectl,
  startKubeDoorStack,
  type KubeDoorStack,
} from './support/kube-door';

const NS = DEFAULT_CONVERSATION_NAMESPACE;
const SECRET = 'my bank PIN is 4921';
/** A member persona, as the records would answer for her session token. */
const MALLORY: Caller = {
  identity: 'web:mallory',
  identities: ['web:mallory'],
  personaId: 'persona-mallory',
  roles: ['member'],
  sessionId: 'session-mallory',
};
const MALLORY_TOKEN = `pcs_${'M'.repeat(43)}`;
/** Unique per run: the shared cluster outlives this file. */
const RUN = randomBytes(3).toString('hex');

type Binding =
  | { kind: 'RoleBinding'; namespace: string; name: string }
  | { kind: 'ClusterRoleBinding'; name: string };

describe('conversation content on the Kubernetes door is Secret-level', () => {
  let stack: KubeDoorStack;
  let admin: KubeConfig;
  let name: string;
  let path: string;
  const bindings: Binding[] = [];
  /** Kubeconfig files by who they are. */
  const users: Record<string, string> = {};

  async function bind(
    subject: { kind: 'User' | 'ServiceAccount'; name: string; namespace?: string },
    role: string,
    namespace?: string,
  ): Promise<void> {
    const rbac = admin.makeApiClient(RbacAuthorizationV1Api);
    const metadata = { name: `content-${RUN}-${subject.name}-${role}`.slice(0, 63) };
    const roleRef = { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: role };
    const subjects = [
      subject.kind === 'User'
        ? { apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: subject.name }
        : { kind: 'ServiceAccount', name: subject.name, namespace: subject.namespace },
    ];
    if (namespace === undefined) {
      await rbac.createClusterRoleBinding({ body: { metadata, roleRef, subjects } });
      bindings.push({ kind: 'ClusterRoleBinding', name: metadata.name });
    } else {
      await rbac.createNamespacedRoleBinding({ namespace, body: { metadata, roleRef, subjects } });
      bindings.push({ kind: 'RoleBinding', namespace, name: metadata.name });
    }
  }

  /** A kubeconfig that authenticates with the ServiceAccount's real token, nothing else. */
  async function serviceAccountKubeconfig(account: string): Promise<string> {
    const core = admin.makeApiClient(CoreV1Api);
    await core.createNamespacedServiceAccount({
      namespace: NS,
      body: { metadata: { name: account } },
    });
    const request = await core.createNamespacedServiceAccountToken({
      name: account,
      namespace: NS,
      body: { spec: { audiences: [], expirationSeconds: 600 } },
    });
    const cluster = admin.getCurrentCluster();
    const caData = cluster?.caData ?? (await readFile(cluster?.caFile ?? '')).toString('base64');
    const file = join(stack.dir, `${account}.kubeconfig`);
    await writeFile(
      file,
      JSON.stringify({
        apiVersion: 'v1',
        kind: 'Config',
        clusters: [
          { name: 'c', cluster: { server: cluster?.server, 'certificate-authority-data': caData } },
        ],
        users: [{ name: account, user: { token: request.status?.token } }],
        contexts: [{ name: account, context: { cluster: 'c', user: account, namespace: NS } }],
        'current-context': account,
      }),
    );
    return file;
  }

  /** kube-apiserver's answer to a GET of `sub` as the user of `kubeconfig`: 'ok', 'Forbidden', or the error. */
  async function get(kubeconfig: string, sub: string): Promise<string> {
    // An allowed log is a stream that never ends: 10 s is plenty for a refusal.
    const got = await kubectl(kubeconfig, ['get', '--raw', `${path}/${sub}`], {
      timeoutMs: 10_000,
    });
    if (got.ok) return 'ok';
    return /Error from server \(Forbidden\)/u.test(got.stderr) ? 'Forbidden' : got.stderr;
  }

  beforeAll(async () => {
    // The public API makes the conversation in its own namespace: the harness serves that one.
    stack = await startKubeDoorStack('content', { harnessNamespace: NS });
    admin = await kubeConfig();
    await admin
      .makeApiClient(CoreV1Api)
      .createNamespace({ body: { metadata: { name: NS } } })
      .catch(() => undefined);

    // web:mallory's private conversation, made through the public API as a member.
    stack.api.tokens.callers.set(MALLORY_TOKEN, MALLORY);
    const created = await call(stack.api, 'POST', '/v1/conversations', {
      token: MALLORY_TOKEN,
      body: { message: { text: SECRET } },
    });
    expect(created.status).toBe(201);
    const summary = (
      created.json as { conversation: { namespace: string; name: string; visibility: string } }
    ).conversation;
    expect([summary.namespace, summary.visibility]).toEqual([NS, 'private']);
    name = summary.name;
    path = `${KUBE_API_PATH}/namespaces/${NS}/conversations/${name}`;
    // Its object, as the control plane's create writes it, for `kubectl get`.
    await createConversationObject(admin, NS, name, validMinimalConversationSpec);

    const cluster = await sharedCluster();
    users.viewerAccount = await serviceAccountKubeconfig(`viewer-${RUN}`);
    await bind({ kind: 'ServiceAccount', name: `viewer-${RUN}`, namespace: NS }, 'view', NS);
    users.editInDefault = await cluster.mintUser(`erin-${RUN}`, ['team-e']);
    await bind({ kind: 'User', name: `erin-${RUN}` }, 'edit', 'default');
    users.clusterViewer = await cluster.mintUser(`frank-${RUN}`, ['team-f']);
    await bind({ kind: 'User', name: `frank-${RUN}` }, 'view');
    users.reader = await cluster.mintUser(`rita-${RUN}`, ['auditors']);
    await bind({ kind: 'User', name: `rita-${RUN}` }, 'polychrome-conversation-reader', NS);
    users.editor = await cluster.mintUser(`eddie-${RUN}`, ['ops']);
    await bind({ kind: 'User', name: `eddie-${RUN}` }, 'edit', NS);
    // Every binding in force before anyone is refused: the ones that grant show it.
    await pollUntil(
      'the reader and the editor to read the transcript, the viewers to see the object',
      async () => {
        const seen = await Promise.all(
          [users.viewerAccount, users.clusterViewer].map(
            async (file = '') =>
              (await kubectl(file, ['get', 'conversations.polychrome.dev', name, '-n', NS])).ok,
          ),
        );
        const read = await Promise.all(
          [users.reader, users.editor].map(
            async (file = '') => (await get(file, 'transcript')) === 'ok',
          ),
        );
        return [...seen, ...read].every(Boolean) ? true : undefined;
      },
      { timeoutMs: 30_000, intervalMs: 250 },
    );
  }, 180_000);

  afterAll(async () => {
    if (admin !== undefined) {
      const rbac = admin.makeApiClient(RbacAuthorizationV1Api);
      for (const b of bindings) {
        await (
          b.kind === 'ClusterRoleBinding'
            ? rbac.deleteClusterRoleBinding({ name: b.name })
            : rbac.deleteNamespacedRoleBinding({ name: b.name, namespace: b.namespace })
        ).catch(() => undefined);
      }
      await admin
        .makeApiClient(CoreV1Api)
        .deleteNamespacedServiceAccount({ name: `viewer-${RUN}`, namespace: NS })
        .catch(() => undefined);
      const { api, group, version, plural } = conversationsApi(admin);
      if (name !== undefined) {
        await api
          .deleteNamespacedCustomObject({ group, version, plural, namespace: NS, name })
          .catch(() => undefined);
      }
    }
    await stack?.close();
  });

  it('refuses a view-only ServiceAccount transcript, log and export (403 from kube-apiserver); nothing reaches the door', async () => {
    const before = stack.api.service.calls.length;
    expect({
      transcript: await get(users.viewerAccount ?? '', 'transcript'),
      log: await get(users.viewerAccount ?? '', 'log'),
      export: await get(users.viewerAccount ?? '', 'export?actor=kubernetes%3Aanyone'),
    }).toEqual({ transcript: 'Forbidden', log: 'Forbidden', export: 'Forbidden' });
    const refused = await kubectl(users.viewerAccount ?? '', [
      'get',
      '--raw',
      `${path}/transcript`,
    ]);
    expect(refused.stderr).toContain(
      `cannot get resource "conversations/transcript" in API group "api.polychrome.dev" in the namespace "${NS}"`,
    );
    expect(stack.api.service.calls.slice(before)).toEqual([]);
  });

  it('still shows the Conversation object to view', async () => {
    const got = await kubectl(users.viewerAccount ?? '', [
      'get',
      'conversations.polychrome.dev',
      name,
      '-n',
      NS,
      '-o',
      'jsonpath={.metadata.name}',
    ]);
    expect([got.ok, got.stdout]).toEqual([true, name]);
  });

  it("keeps a member's private conversation from every Kubernetes user without a content grant in its namespace", async () => {
    const before = stack.api.service.calls.length;
    const attackers = {
      'view there (a ServiceAccount)': users.viewerAccount,
      'edit in default': users.editInDefault,
      'view cluster-wide': users.clusterViewer,
      'edit in another namespace': stack.users.alice,
      'admin in another namespace': stack.users.dave,
      'no role at all': stack.users.bob,
    };
    const answers: Record<string, string[]> = {};
    for (const [who, file = ''] of Object.entries(attackers)) {
      answers[who] = [
        await get(file, 'transcript'),
        await get(file, 'log'),
        await get(file, 'export?actor=kubernetes%3Aanyone'),
      ];
    }
    expect(answers).toEqual(
      Object.fromEntries(
        Object.keys(attackers).map((who) => [who, ['Forbidden', 'Forbidden', 'Forbidden']]),
      ),
    );
    expect(stack.api.service.calls.slice(before)).toEqual([]);
  });

  it('lets an explicit reader or an editor of the namespace read it, the reader without export', async () => {
    const transcript = await kubectl(users.reader ?? '', ['get', '--raw', `${path}/transcript`]);
    expect(transcript.stdout).toContain(SECRET);
    expect(await get(users.editor ?? '', 'transcript')).toBe('ok');
    expect(await get(users.reader ?? '', 'export?actor=kubernetes%3Aanyone')).toBe('Forbidden');
  });

  it('holds the public API to owner and visibility: another member is refused, the owner reads', async () => {
    const uid = stack.api.turns.conversations.byName(NS, name)?.metadata.uid ?? '';
    const other = await call(stack.api, 'GET', `/v1/conversations/${uid}/transcript`, {
      token: TOKENS.alice,
    });
    expect(other.status).toBe(403);
    const owner = await call(stack.api, 'GET', `/v1/conversations/${uid}/transcript`, {
      token: MALLORY_TOKEN,
    });
    expect([owner.status, owner.text.includes(SECRET)]).toEqual([200, true]);
  });
});
