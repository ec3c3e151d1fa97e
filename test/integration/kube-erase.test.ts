/**
 * Erasure through the Kubernetes door, end to end (docs/kube-api.md, the `erase`
 * subresource; docs/journal-format.md, "Erasure"): the real kubectl runs the plugin as each
 * user against the shared cluster's kube-apiserver, which aggregates the door
 * (support/kube-door.ts: the door, the real turn coordinator and store behind it). A user
 * bound to `view` or `edit`, or even `admin`, is refused `create conversations/erase` and
 * nothing changes; a user bound only to `polychrome-conversation-eraser` erases a message.
 * The export taken afterwards verifies with both verifiers (the CLI's `journal verify`, a
 * process of its own with node:crypto, and the browser's, with @noble/curves), each
 * listing the erased position, and the transcript no longer holds the message.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { RbacAuthorizationV1Api } from '@kubernetes/client-node';
import { mkdir, readFile, symlink } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { repoRoot } from '../../hack/lib/paths';
import { loadNobleCrypto } from '../../state/journal/noble-crypto';
import { verifyExportText } from '../../ui/verify/browser-verify';
import { textReply } from '../support/real-turns';
import { polychrome } from './support/polychrome-cli';
import { kubeConfig, sharedCluster } from './support/kube';
import { kubectl, startKubeDoorStack, type Kubectl, type KubeDoorStack } from './support/kube-door';

const PLUGIN_TIMEOUT_MS = 90_000;
const SECRET = 'my phone number is 555-0100';

describe('kubectl polychrome erase through the real kubectl and kube-apiserver', () => {
  let stack: KubeDoorStack;
  let env: NodeJS.ProcessEnv;
  let ns: string;
  let conversationId: string;
  /** Kubeconfigs of the users this test binds itself: `view` and the eraser role. */
  let vic: string;
  let erin: string;

  const plugin = (who: string, args: readonly string[]): Promise<Kubectl> =>
    kubectl(null, ['polychrome', ...args, '-n', ns], {
      env: { ...env, KUBECONFIG: who },
      timeoutMs: PLUGIN_TIMEOUT_MS,
    });

  beforeAll(async () => {
    stack = await startKubeDoorStack('kerase', { replies: [textReply('noted')] });
    ns = stack.namespace;
    conversationId = stack.addConversation('hello');
    const path = join(stack.dir, 'path');
    await mkdir(path, { recursive: true });
    await symlink(join(repoRoot, 'bin', 'kubectl-polychrome.js'), join(path, 'kubectl-polychrome'));
    env = {
      ...process.env,
      PATH: `${path}:${dirname(process.execPath)}:${process.env.PATH ?? ''}`,
    };
    const cluster = await sharedCluster();
    vic = await cluster.mintUser('vic', ['team-v']);
    erin = await cluster.mintUser('erin', ['team-e']);
    const rbac = (await kubeConfig()).makeApiClient(RbacAuthorizationV1Api);
    for (const [user, role] of [
      ['vic', 'view'],
      ['erin', 'polychrome-conversation-eraser'],
    ] as const) {
      await rbac.createNamespacedRoleBinding({
        namespace: ns,
        body: {
          metadata: { name: `${user}-${role}` },
          roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: role },
          subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: user }],
        },
      });
    }
  }, 240_000);

  afterAll(async () => {
    await stack?.close();
  });

  it(
    'refuses view, edit and admin the erase subresource; the eraser erases; the export verifies with both verifiers, listing the position; the transcript has no message',
    async () => {
      const sent = await plugin(stack.users.alice, ['send', 'hello', SECRET]);
      expect(sent.stderr).toBe('');
      expect(sent.stdout).toContain('noted');
      const message = (await stack.api.entries(conversationId)).find(
        (e) => e.kind === 'message_received',
      )!.position;
      const head = stack.api.head(conversationId);

      for (const [who, name] of [
        [vic, 'vic'],
        [stack.users.alice, 'alice'],
        [stack.users.dave, 'dave'],
      ] as const) {
        const refused = await plugin(who, [
          'erase',
          'hello',
          String(message),
          '--actor',
          `kubernetes:${name}`,
          '--reason',
          'erasure request 5',
        ]);
        expect({ name, code: refused.code }).toEqual({ name, code: 3 });
        expect(refused.stderr).toContain(
          `User "${name}" cannot create resource "conversations/erase" in API group "api.polychrome.dev"`,
        );
        expect(stack.api.head(conversationId)).toBe(head);
      }
      expect(await stack.allowed('erin', 'create', 'erase')).toBe(true);
      // The eraser role grants erasure only: erin may not read the transcript.
      expect(await stack.allowed('erin', 'get', 'transcript')).toBe(false);

      const erased = await plugin(erin, [
        'erase',
        'hello',
        String(message),
        '--actor',
        'kubernetes:erin',
        '--reason',
        'erasure request 5',
      ]);
      expect(erased.stderr).toBe('');
      expect(erased.code).toBe(0);
      expect(erased.stdout).toContain(String(message));
      const entries = await stack.api.entries(conversationId);
      expect(entries.find((e) => e.position === message)?.kind).toBe('');

      // The export, taken by an admin (admin holds get conversations/export).
      const file = join(stack.dir, 'hello.ndjson');
      const exported = await plugin(stack.users.dave, [
        'export',
        'hello',
        '--actor',
        'kubernetes:dave',
        '--file',
        file,
      ]);
      expect(exported.code).toBe(0);
      const text = await readFile(file, 'utf8');
      expect(text).not.toContain(Buffer.from(SECRET).toString('base64').slice(0, 16));
      const key = stack.api.turns.journal.publicKey;

      const offline = await polychrome(
        [
          'journal',
          'verify',
          file,
          '--public-key',
          Buffer.from(key).toString('base64'),
          '--format',
          'json',
        ],
        '',
      );
      expect(offline.stderr).toBe('');
      expect(offline.code).toBe(0);
      expect(JSON.parse(offline.stdout)).toMatchObject({
        ok: true,
        excised: [message],
        erased: [message],
      });

      const browser = verifyExportText(text, await loadNobleCrypto(), {
        pinnedKey: key,
        source: 'hello.ndjson',
      });
      // Every event and root of the file checks; with no checkpoint passed here, the verdict
      // adds only that none was given.
      expect(browser.result.failure).toBeUndefined();
      expect(browser.failure?.reason ?? 'none').toMatch(/^(none|no_checkpoint)$/u);
      expect(browser.result.erased).toEqual([message]);
      expect(browser.events.find((e) => e.position === message)).toMatchObject({
        excised: true,
        sealed: true,
      });

      const transcript = await plugin(stack.users.alice, ['transcript', 'hello']);
      expect(transcript.code).toBe(0);
      expect(transcript.stdout).not.toContain('555-0100');
      expect(transcript.stdout).toContain('[erased]');
    },
    8 * PLUGIN_TIMEOUT_MS,
  );
});
