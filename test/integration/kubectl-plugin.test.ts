/**
 * `kubectl polychrome` as users run it: the real kubectl of the local cluster finds the
 * plugin launcher (bin/kubectl-polychrome.js, TypeScript through tsx) on PATH and runs it
 * with the user's kubeconfig; the plugin reaches the Kubernetes door through the shared
 * cluster's kube-apiserver (support/kube-door.ts: the door, the real turn coordinator and
 * scripted model behind it, alice = edit, dave = admin, bob = nothing, carol = session
 * admin). The plugin starts slowly under load, so the timeouts are generous.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { CustomObjectsApi, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdir, readFile, symlink, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { parse } from 'yaml';
import { defaultBinDir, repoRoot } from '../../hack/lib/paths';
import { pollUntil } from '../../hack/lib/processes';
import {
  askReply,
  calculatorReply,
  DEFAULT_REPLIES,
  textReply,
  TEST_CONVERSATION_SPEC,
} from '../support/real-turns';
import { journalKeyId } from '../../common/journal-keys';
import { createConversationObject, kubeConfig } from './support/kube';
import {
  direct,
  KUBE_API_PATH,
  kubectl,
  startKubeDoorStack,
  type Kubectl,
  type KubeDoorStack,
} from './support/kube-door';
import { EXAMPLE_SPEND_LIMITS } from '../support/spend-limits';

const PLUGIN_TIMEOUT_MS = 90_000;

describe('kubectl polychrome through the real kubectl and kube-apiserver', () => {
  let stack: KubeDoorStack;
  let env: NodeJS.ProcessEnv;
  let ns: string;
  let conversationId: string;
  const children: ChildProcess[] = [];
  const doorPath = (): string => `${KUBE_API_PATH}/namespaces/${ns}/conversations/hello`;

  /** `kubectl polychrome ARGS` as `who` (KUBECONFIG), in the stack's namespace. */
  const plugin = (who: string, args: readonly string[], input?: string): Promise<Kubectl> =>
    kubectl(null, ['polychrome', ...args, '-n', ns], {
      env: { ...env, KUBECONFIG: who },
      timeoutMs: PLUGIN_TIMEOUT_MS,
      ...(input === undefined ? {} : { input }),
    });

  /** `kubectl polychrome logs NAME -f -o json` running in the background; its stdout so far. */
  const follow = (who: string, extra: readonly string[] = []) => {
    const child = spawn(
      join(defaultBinDir, 'kubectl'),
      ['polychrome', 'logs', 'hello', '-f', '-o', 'json', '-n', ns, ...extra],
      { env: { ...env, KUBECONFIG: who }, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    children.push(child);
    const out = { stdout: '', stderr: '' };
    child.stdout.setEncoding('utf8').on('data', (c: string) => (out.stdout += c));
    child.stderr.setEncoding('utf8').on('data', (c: string) => (out.stderr += c));
    const positions = (): number[] =>
      out.stdout
        .split('\n')
        .filter((l) => l.trim() !== '')
        .map((l) => JSON.parse(l) as { kind?: string; position?: number })
        .filter((e) => e.kind !== 'delta' && typeof e.position === 'number')
        .map((e) => e.position as number);
    const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
    return { child, out, positions, exited };
  };

  beforeAll(async () => {
    stack = await startKubeDoorStack('kplugin', {
      replies: [
        textReply('hello back'),
        calculatorReply('6 * 7'),
        textReply('It is 42.'),
        askReply('which cluster?'),
        textReply('thanks: prod'),
        ...DEFAULT_REPLIES,
      ],
    });
    ns = stack.namespace;
    conversationId = stack.addConversation('hello');
    // The plugin and its completion on PATH, as npm or krew installs them.
    const path = join(stack.dir, 'path');
    await mkdir(path, { recursive: true });
    await symlink(join(repoRoot, 'bin', 'kubectl-polychrome.js'), join(path, 'kubectl-polychrome'));
    await symlink(
      join(repoRoot, 'bin', 'kubectl_complete-polychrome.js'),
      join(path, 'kubectl_complete-polychrome'),
    );
    env = {
      ...process.env,
      PATH: `${path}:${dirname(process.execPath)}:${process.env.PATH ?? ''}`,
    };
    // The Conversation object itself, as the CRD API serves it (the door's coordinator keeps
    // its own copy here; `get` reads the object).
    const admin = await kubeConfig();
    await createConversationObject(admin, ns, 'hello', {
      owner: 'dev:someone-else',
      ...TEST_CONVERSATION_SPEC,
    });
    await admin.makeApiClient(CustomObjectsApi).patchNamespacedCustomObjectStatus(
      {
        group: 'polychrome.dev',
        version: 'v1alpha1',
        plural: 'conversations',
        namespace: ns,
        name: 'hello',
        body: {
          status: {
            phase: 'Ready',
            conditions: [
              {
                type: 'Ready',
                status: 'True',
                reason: 'SandboxReady',
                message: 'the sandbox is ready',
                lastTransitionTime: new Date().toISOString(),
              },
            ],
            journal: { head: 7 },
          },
        },
      },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
    // One start, measured: the launcher runs TypeScript through tsx.
    const started = Date.now();
    const help = await plugin(stack.users.alice, ['help']);
    expect(help.stdout).toContain('usage: kubectl polychrome');
    process.stdout.write(`kubectl polychrome help took ${String(Date.now() - started)} ms\n`);
  }, 240_000);

  /** Sets (or, with null, removes) the journal keys the Conversation object's status records. */
  async function setObjectKeys(
    publicKeys: { keyId: string; publicKey: string }[] | null,
  ): Promise<void> {
    const admin = await kubeConfig();
    await admin.makeApiClient(CustomObjectsApi).patchNamespacedCustomObjectStatus(
      {
        group: 'polychrome.dev',
        version: 'v1alpha1',
        plural: 'conversations',
        namespace: ns,
        name: 'hello',
        body: { status: { journal: { publicKeys } } },
      },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
  }
  const base64 = (key: Uint8Array): string => Buffer.from(key).toString('base64');

  afterAll(async () => {
    for (const child of children) if (child.exitCode === null) child.kill('SIGKILL');
    await stack?.close();
  });

  it(
    'get: the Conversation object, as text, -o json and -o yaml',
    async () => {
      const text = await plugin(stack.users.alice, ['get', 'hello']);
      expect(text.stderr).toBe('');
      expect(text.stdout).toMatch(/Phase:\s+Ready/u);
      expect(text.stdout).toMatch(/Journal head:\s+7/u);
      expect(text.stdout).toContain('Ready=True SandboxReady: the sandbox is ready');
      const json = JSON.parse(
        (await plugin(stack.users.alice, ['get', 'hello', '-o', 'json'])).stdout,
      ) as {
        metadata: { name: string; namespace: string };
      };
      expect([json.metadata.name, json.metadata.namespace]).toEqual(['hello', ns]);
      const yaml = parse(
        (await plugin(stack.users.alice, ['get', 'hello', '-o', 'yaml'])).stdout,
      ) as {
        status: { phase: string };
      };
      expect(yaml.status.phase).toBe('Ready');
      // bob may not read it: kube-apiserver says so, and the plugin says what to ask for.
      const refused = await plugin(stack.users.bob, ['get', 'hello']);
      expect(refused.code).toBe(3);
      expect(refused.stderr).toMatch(/forbidden/iu);
    },
    3 * PLUGIN_TIMEOUT_MS,
  );

  it(
    'send and transcript by name, attributed to kubernetes:alice; -o yaml',
    async () => {
      const sent = await plugin(stack.users.alice, ['send', 'hello', 'hi', 'there']);
      expect(sent.stderr).toBe('');
      expect(sent.code).toBe(0);
      expect(sent.stdout).toContain('hello back');
      const transcript = await plugin(stack.users.alice, ['transcript', 'hello']);
      expect(transcript.stdout).toContain('kubernetes:alice');
      expect(transcript.stdout).toContain('hi there');
      const asYaml = parse(
        (await plugin(stack.users.alice, ['transcript', 'hello', '-o', 'yaml'])).stdout,
      ) as {
        conversationId: string;
        turns: { user: { caller: string } }[];
      };
      expect(asYaml.conversationId).toBe(conversationId);
      expect(asYaml.turns[0]?.user.caller).toBe('kubernetes:alice');
    },
    3 * PLUGIN_TIMEOUT_MS,
  );

  it(
    'refuses alice (edit) the approval of her own turn, commits nothing; dave (admin) approves',
    async () => {
      const paused = JSON.parse(
        (await plugin(stack.users.alice, ['send', 'hello', 'what', 'is', '6*7?', '-o', 'json']))
          .stdout,
      ) as { status: string; approval?: { requestId: string } };
      expect(paused.status).toBe('paused');
      const requestId = paused.approval?.requestId ?? '';
      expect(requestId).not.toBe('');
      const head = stack.api.head(conversationId);

      const mine = await plugin(stack.users.alice, ['approve', 'hello', requestId]);
      expect(mine.code).toBe(3);
      // kube-apiserver refuses before the door sees it, and the plugin names the role to ask for.
      expect(mine.stderr).toMatch(
        /forbidden: User "alice" cannot create resource "conversations\/approvals" in API group "api\.polychrome\.dev"/u,
      );
      expect(mine.stderr).toContain('polychrome-conversation-admin');
      const cancel = await plugin(stack.users.alice, ['approve', 'hello', requestId, '--cancel']);
      expect(cancel.code).toBe(3);
      expect(cancel.stderr).toMatch(/cannot delete resource "conversations\/approvals"/u);
      // With the real front-proxy certificate, straight at the door: its own
      // SubjectAccessReview refuses alice too.
      const forged = await direct(stack.kubePort, `${doorPath()}/approvals/${requestId}`, {
        ca: stack.servingCa,
        cert: stack.proxyClient,
        method: 'POST',
        body: JSON.stringify({ decision: 'approve' }),
        headers: { 'X-Remote-User': 'alice', 'X-Remote-Group': 'team-a' },
      });
      expect(forged.status).toBe(403);
      expect(String((forged.body as { message?: unknown }).message)).toContain(
        'User "alice" cannot create resource "conversations/approvals"',
      );
      expect(stack.api.head(conversationId)).toBe(head);

      const approved = await plugin(stack.users.dave, ['approve', 'hello', requestId]);
      expect(approved.stderr).toBe('');
      expect(approved.stdout).toContain(`Approved request ${requestId}.`);
      expect(approved.stdout).toContain('It is 42.');
      expect(stack.api.head(conversationId)).toBeGreaterThan(head);
    },
    4 * PLUGIN_TIMEOUT_MS,
  );

  it(
    'lets alice answer the agent’s question, but not cancel it',
    async () => {
      const paused = JSON.parse(
        (await plugin(stack.users.alice, ['send', 'hello', 'deploy', 'it', '-o', 'json'])).stdout,
      ) as { status: string; question?: { requestId: string } };
      const requestId = paused.question?.requestId ?? '';
      expect([paused.status, requestId !== '']).toEqual(['paused', true]);
      const cancel = await plugin(stack.users.alice, ['answer', 'hello', requestId, '--cancel']);
      expect(cancel.code).toBe(3);
      expect(cancel.stderr).toMatch(/cannot delete resource "conversations\/questions"/u);
      // alice may create conversations/questions; a POST that cancels is still refused, by the
      // turn code (a create grant answers, it never cancels), and nothing is committed.
      const head = stack.api.head(conversationId);
      const forged = await direct(stack.kubePort, `${doorPath()}/questions/${requestId}`, {
        ca: stack.servingCa,
        cert: stack.proxyClient,
        method: 'POST',
        body: JSON.stringify({ cancel: true }),
        headers: { 'X-Remote-User': 'alice', 'X-Remote-Group': 'team-a' },
      });
      expect(forged.status).toBe(403);
      expect(String((forged.body as { message?: unknown }).message)).toContain(
        'may not cancel question',
      );
      expect(stack.api.head(conversationId)).toBe(head);
      const answered = await plugin(stack.users.alice, ['answer', 'hello', requestId, 'prod']);
      expect(answered.stderr).toBe('');
      expect(answered.stdout).toContain('thanks: prod');
    },
    3 * PLUGIN_TIMEOUT_MS,
  );

  it(
    'payments link, policy and unlink as dave (his own identity by default); alice may not',
    async () => {
      const limits = join(stack.dir, 'limits.json');
      await writeFile(limits, JSON.stringify(EXAMPLE_SPEND_LIMITS));
      const link = ['payments', 'link', 'hello', '--wallet', 'desk', '--limits', limits];
      const byAlice = await plugin(stack.users.alice, [...link, '--reason', 'mine']);
      expect(byAlice.code).toBe(3);
      expect(byAlice.stderr).toContain('cannot create resource "conversations/payment-policy"');
      expect(byAlice.stderr).toContain('polychrome-conversation-admin');
      const linked = await plugin(stack.users.dave, [...link, '--reason', 'paid search']);
      expect(linked.stderr).toBe('');
      expect(linked.stdout).toContain(`conversation ${conversationId}: wallet desk`);
      expect(linked.stdout).toContain('set by kubernetes:dave');
      const shown = await plugin(stack.users.dave, ['payments', 'policy', 'hello', '-o', 'json']);
      expect(JSON.parse(shown.stdout)).toMatchObject({ wallet: 'desk', setBy: 'kubernetes:dave' });
      const unlinked = await plugin(stack.users.dave, [
        'payments',
        'unlink',
        'hello',
        '--reason',
        'done',
      ]);
      expect(unlinked.stdout).toContain('no wallet linked; payments are off');
      // The listing reads the export (admin only) and audits it here: no charge yet.
      const listed = await plugin(stack.users.dave, ['payments', 'hello', '-o', 'json']);
      expect(listed.stderr).toBe('');
      expect(JSON.parse(listed.stdout)).toMatchObject({ ok: true, payments: [], findings: [] });
      const listedByAlice = await plugin(stack.users.alice, ['payments', 'hello']);
      expect(listedByAlice.code).toBe(3);
      expect(listedByAlice.stderr).toContain('conversations/export');
    },
    5 * PLUGIN_TIMEOUT_MS,
  );

  it(
    'exports and verifies the journal as dave, acting as kubernetes:dave; alice may not',
    async () => {
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
      const lines = (await readFile(file, 'utf8')).split('\n').filter((l) => l !== '');
      expect(lines.length).toBe(stack.api.head(conversationId) + 1);
      // Without --actor the plugin asks kube-apiserver who the kubeconfig is (a
      // SelfSubjectReview, as `kubectl auth whoami`) and acts as kubernetes:dave; the door
      // takes no identity but the caller's own, so any other default would be refused.
      const selfFile = join(stack.dir, 'hello-self.ndjson');
      const asSelf = await plugin(stack.users.dave, ['export', 'hello', '--file', selfFile]);
      expect(asSelf.stderr).not.toContain('is not one of your identities');
      expect(asSelf.code).toBe(0);
      const selfLines = (await readFile(selfFile, 'utf8')).split('\n').filter((l) => l !== '');
      expect(selfLines.length).toBe(lines.length);
      // The coordinator's status writes lag its turns by about a second.
      await pollUntil(
        'status.journal.publicKeys',
        () =>
          Promise.resolve(
            (stack.api.turns.conversations.byUid(conversationId)?.status?.journal?.publicKeys
              ?.length ?? 0) > 0
              ? true
              : undefined,
          ),
        { timeoutMs: 10_000, intervalMs: 100 },
      );
      const verified = await plugin(stack.users.dave, [
        'verify',
        'hello',
        '--actor',
        'kubernetes:dave',
      ]);
      expect(verified.stdout).toContain(': OK: ');
      expect(verified.code).toBe(0);
      // The Conversation object names no key here (the door's coordinator keeps its own
      // copy of the status), so the keys the control plane sent with the export are pinned.
      const honestKey = stack.api.turns.journal.publicKey;
      const honestId = journalKeyId(honestKey);
      expect(verified.stdout).toContain(
        `journal key(s): ${honestId}, pinned from the Conversation status (sent by the control plane with the export`,
      );
      // Once the object records a key, the plugin pins that one: another key than the
      // journal's fails at the first root, naming both; --public-key pins the right one.
      const other = new Uint8Array(32).fill(7);
      await setObjectKeys([{ keyId: journalKeyId(other), publicKey: base64(other) }]);
      const pinned = await plugin(stack.users.dave, [
        'verify',
        'hello',
        '--actor',
        'kubernetes:dave',
      ]);
      expect(pinned.code).toBe(1);
      expect(pinned.stdout).toContain('(wrong_key)');
      expect(pinned.stdout).toContain(journalKeyId(other));
      expect(pinned.stdout).toContain(honestId);
      expect(pinned.stdout).toContain(
        `journal key(s): ${journalKeyId(other)}, pinned from the Conversation status (read from the Conversation object`,
      );
      const replayed = await plugin(stack.users.dave, [
        'replay',
        'hello',
        '--actor',
        'kubernetes:dave',
      ]);
      expect(replayed.code).toBe(3);
      expect(replayed.stderr).toContain('(wrong_key)');
      const flagged = await plugin(stack.users.dave, [
        'verify',
        'hello',
        '--actor',
        'kubernetes:dave',
        '--public-key',
        base64(honestKey),
      ]);
      expect(flagged.stdout).toContain(': OK: ');
      // With the flag the object is not read; the note compares with the status the control
      // plane sent (here the coordinator's own copy, which records the honest key).
      expect(flagged.stdout).toContain(
        `journal key(s): ${honestId}, pinned with --public-key (the Conversation status records the same)`,
      );
      expect(flagged.code).toBe(0);
      await setObjectKeys(null);
      // Acting as someone else is refused by the door; alice lacks get conversations/export.
      const someoneElse = await plugin(stack.users.dave, [
        'export',
        'hello',
        '--actor',
        'kubernetes:alice',
      ]);
      expect(someoneElse.code).toBe(3);
      expect(someoneElse.stderr).toContain('is not one of your identities');
      const alice = await plugin(stack.users.alice, [
        'export',
        'hello',
        '--actor',
        'kubernetes:alice',
      ]);
      expect(alice.stderr).toMatch(/cannot get resource "conversations\/export"/u);
      // Her own identity by default changes nothing: RBAC still decides.
      const aliceSelf = await plugin(stack.users.alice, ['export', 'hello']);
      expect(aliceSelf.code).toBe(3);
      expect(aliceSelf.stderr).toMatch(/cannot get resource "conversations\/export"/u);
    },
    4 * PLUGIN_TIMEOUT_MS,
  );

  it(
    'sets roles as the cluster admin, mints a session token as carol, printed once to stdout, and revokes it',
    async () => {
      const set = await plugin(stack.admin, [
        'personas',
        'set-roles',
        '--persona',
        'bot:desk',
        '--roles',
        'edge',
      ]);
      expect([set.code, set.stdout]).toEqual([0, expect.stringContaining('has roles: edge')]);
      const withRole = await plugin(stack.users.carol, [
        'sessions',
        'create',
        '--persona',
        'bot:desk',
        '--role',
        'admin',
      ]);
      expect(withRole.code).not.toBe(0);
      expect(withRole.stderr).toContain('kubectl polychrome personas set-roles --persona bot:desk');
      const minted = await plugin(stack.users.carol, [
        'sessions',
        'create',
        '--persona',
        'bot:desk',
        '--ttl',
        '720h',
      ]);
      expect(minted.code).toBe(0);
      const token = minted.stdout.trim();
      expect(token).toMatch(/^pcs_[A-Za-z0-9_-]{43}$/u);
      expect(minted.stderr).not.toContain(token);
      const id = /session (\S+) for bot:desk/u.exec(minted.stderr)?.[1] ?? '';
      expect((await stack.records.authenticate(token)).session.id).toBe(id);
      const revoked = await plugin(stack.users.carol, ['sessions', 'revoke', id, '-o', 'json']);
      expect(JSON.parse(revoked.stdout)).toMatchObject({ revokedAt: expect.any(String) });
      await expect(stack.records.authenticate(token)).rejects.toMatchObject({
        code: 'unauthenticated',
      });
      const dave = await plugin(stack.users.dave, ['sessions', 'create', '--persona', 'bot:x']);
      expect(dave.code).toBe(3);
      expect(dave.stderr).toMatch(/forbidden/iu);
    },
    4 * PLUGIN_TIMEOUT_MS,
  );

  it(
    'takes --context, and names what is wrong with a bad one',
    async () => {
      const kc = parse(await readFile(stack.users.alice, 'utf8')) as {
        contexts: { name: string; context: Record<string, string> }[];
        'current-context': string;
      };
      const two = {
        ...kc,
        contexts: [
          ...kc.contexts,
          { name: 'elsewhere', context: { ...kc.contexts[0]?.context, namespace: ns } },
        ],
        'current-context': 'nowhere',
      };
      const file = join(stack.dir, 'two-contexts.yaml');
      await writeFile(file, JSON.stringify(two));
      const ok = await kubectl(
        null,
        ['polychrome', 'transcript', 'hello', '--context', 'elsewhere', '--kubeconfig', file],
        {
          env,
          timeoutMs: PLUGIN_TIMEOUT_MS,
        },
      );
      expect(ok.stderr).toBe('');
      expect(ok.stdout).toContain('hi there');
      const bad = await kubectl(null, ['polychrome', 'transcript', 'hello', '--kubeconfig', file], {
        env,
        timeoutMs: PLUGIN_TIMEOUT_MS,
      });
      expect(bad.code).toBe(3);
      expect(bad.stderr).toContain('context "nowhere" is not in kubeconfig');
      // -n decides the namespace: there is no "hello" in default.
      const elsewhere = await kubectl(
        null,
        ['polychrome', 'transcript', 'hello', '-n', 'default'],
        {
          env: { ...env, KUBECONFIG: stack.users.dave },
          timeoutMs: PLUGIN_TIMEOUT_MS,
        },
      );
      expect(elsewhere.code).toBe(3);
      expect(elsewhere.stderr).toMatch(/forbidden|not found/iu);
    },
    4 * PLUGIN_TIMEOUT_MS,
  );

  it(
    'completes verbs and Conversation names through kubectl',
    async () => {
      const verbs = await kubectl(null, ['__complete', 'polychrome', 'ap'], {
        env: { ...env, KUBECONFIG: stack.users.alice },
        timeoutMs: PLUGIN_TIMEOUT_MS,
      });
      expect(verbs.stdout.split('\n')).toContain('approve');
      const names = await kubectl(null, ['__complete', 'polychrome', 'get', '-n', ns, 'he'], {
        env: { ...env, KUBECONFIG: stack.users.alice },
        timeoutMs: PLUGIN_TIMEOUT_MS,
      });
      expect(names.stdout.split('\n')).toContain('hello');
    },
    3 * PLUGIN_TIMEOUT_MS,
  );

  it(
    'follows logs -f across a dropped connection: no event twice, none skipped',
    async () => {
      const before = stack.api.head(conversationId);
      const logs = follow(stack.users.alice, ['--since', '0']);
      await pollUntil(
        'the committed events on logs -f',
        () => Promise.resolve(logs.positions().length >= before ? true : undefined),
        { timeoutMs: PLUGIN_TIMEOUT_MS, intervalMs: 250 },
      );
      const streams = stack.api.follows.liveFollows.length;
      expect(stack.dropConnections()).toBeGreaterThan(0);
      const sent = await plugin(stack.users.alice, ['send', 'hello', 'after', 'the', 'drop']);
      expect(sent.code).toBe(0);
      const after = stack.api.head(conversationId);
      await pollUntil(
        'the events after the drop on logs -f',
        () => Promise.resolve(logs.positions().length >= after ? true : undefined),
        { timeoutMs: PLUGIN_TIMEOUT_MS, intervalMs: 250 },
      );
      expect(logs.positions()).toEqual(Array.from({ length: after }, (_, i) => i));
      // It reconnected (a new stream at the door), resumed after the last event it printed.
      expect(stack.api.follows.liveFollows.length).toBeGreaterThan(streams);
      logs.child.kill('SIGINT');
      expect(await logs.exited).toBe(0);
    },
    3 * PLUGIN_TIMEOUT_MS,
  );

  it(
    'keeps logs -f open past 60 s (log is long-running for kube-apiserver)',
    async () => {
      const logs = follow(stack.users.alice, [
        '--last-event-id',
        String(stack.api.head(conversationId) - 1),
      ]);
      await pollUntil(
        'logs -f to open its stream',
        () => Promise.resolve(stack.api.server.openStreams > 0 ? true : undefined),
        { timeoutMs: PLUGIN_TIMEOUT_MS, intervalMs: 250 },
      );
      const streams = stack.api.follows.liveFollows.length;
      await new Promise((resolve) => setTimeout(resolve, 65_000));
      const head = stack.api.head(conversationId);
      await plugin(stack.users.alice, ['send', 'hello', 'still', 'there?']);
      await pollUntil(
        'the new turn on the stream opened 65 s ago',
        () => Promise.resolve(logs.positions().includes(head) ? true : undefined),
        { timeoutMs: PLUGIN_TIMEOUT_MS, intervalMs: 250 },
      );
      // The same stream all along: no reconnect.
      expect(stack.api.follows.liveFollows.length).toBe(streams);
      expect(logs.out.stderr).not.toMatch(/reconnect|resum/iu);
      logs.child.kill('SIGINT');
      expect(await logs.exited).toBe(0);
    },
    4 * PLUGIN_TIMEOUT_MS,
  );
});
