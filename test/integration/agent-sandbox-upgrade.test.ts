import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { CustomObjectsApi } from '@kubernetes/client-node';
import { execFile } from 'node:child_process';
import { readFile, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { agentSandboxControllerArgs, LocalCluster } from '../../hack/lib/local-cluster';
import { defaultBinDir, repoRoot } from '../../hack/lib/paths';
import { freePort, pollUntil, startProcess, stopPid } from '../../hack/lib/processes';
import { AgentSandboxApi } from '../../operator/controller/agent-sandbox-api';
import { conversations, field } from './support/kube';
import { postMessage } from './support/public-api';
import { sandboxCore, sandboxExtensions } from './support/sandbox';
import {
  DEFAULT_CONVERSATION_SPEC,
  isReady,
  startTurnStack,
  type TurnStack,
} from './support/turn-stack';

// docs/operator.md "Upgrading agent-sandbox from 0.5.x", run as written on a local cluster
// of its own (the shared one runs the pinned release): agent-sandbox 0.5.6's CRDs and
// controller (hack/agent-sandbox-previous, built from its module), a Conversation on the
// agent-sandbox backend takes a turn, the doc's steps upgrade to the pinned v1.0.x, and the
// same Conversation takes a second turn. Step 3 (apply the release asset) is the one step
// not run as written: the test applies the same CRDs from the pinned module
// (config/crd/agent-sandbox) and starts the pinned controller binary instead.

const DOC = join(repoRoot, 'docs', 'operator.md');
const SECTION = '### Upgrading agent-sandbox from 0.5.x';
const CRDS = [
  `${AgentSandboxApi.sandboxPlural}.${AgentSandboxApi.coreGroup}`,
  `${AgentSandboxApi.claimPlural}.${AgentSandboxApi.extensionsGroup}`,
  `${AgentSandboxApi.templatePlural}.${AgentSandboxApi.extensionsGroup}`,
  `${AgentSandboxApi.warmPoolPlural}.${AgentSandboxApi.extensionsGroup}`,
];
const OWNER = 'test:upgrade-owner';
const NAME = 'before-and-after';
const run = promisify(execFile);

/** The `sh` blocks of the doc's upgrade section, in order, without their list indent. */
async function upgradeSteps(): Promise<string[]> {
  const text = await readFile(DOC, 'utf8');
  const start = text.indexOf(SECTION);
  if (start < 0) throw new Error(`docs/operator.md has no "${SECTION}"`);
  const end = text.indexOf('\n### ', start + SECTION.length);
  const section = text.slice(start, end < 0 ? undefined : end);
  return [...section.matchAll(/^( *)```sh\n([\s\S]*?)^ *```$/gmu)].map(([, indent, body]) =>
    (body ?? '')
      .split('\n')
      .map((line) => line.slice(Math.min(indent?.length ?? 0, line.search(/\S|$/u))))
      .join('\n'),
  );
}

describe('upgrading agent-sandbox from 0.5.x (docs/operator.md)', () => {
  let dir: string;
  let cluster: LocalCluster;
  let stack: TurnStack;
  let token: string;
  let uid: string;
  let controllerPid: number | undefined;
  let steps: string[];
  const started = Date.now();

  /** A command with kubectl (hack/bin) on PATH and the test cluster's kubeconfig. */
  const sh = async (script: string): Promise<{ stdout: string; stderr: string }> =>
    run('bash', ['-euo', 'pipefail', '-c', script], {
      cwd: repoRoot,
      env: {
        ...process.env,
        PATH: `${defaultBinDir}:${process.env.PATH ?? ''}`,
        KUBECONFIG: cluster.kubeconfigPath,
        CRDS: CRDS.join(' '),
      },
    });

  /** Starts an agent-sandbox controller binary of hack/bin and waits for its /readyz. */
  const startController = async (binary: string, extra: string[] = []): Promise<number> => {
    const probePort = await freePort();
    const child = startProcess(
      join(defaultBinDir, binary),
      [...agentSandboxControllerArgs(cluster.kubeconfigPath, probePort), ...extra],
      { logPath: join(dir, `${binary}.log`) },
    );
    if (child.pid === undefined) throw new Error(`${binary} did not start`);
    const pid = child.pid;
    await pollUntil(`${binary} /readyz`, async () => {
      const res = await fetch(`http://127.0.0.1:${probePort}/readyz`).catch(() => undefined);
      return res?.ok === true ? true : undefined;
    });
    return pid;
  };

  const claim = async (): Promise<unknown> =>
    stack.admin.makeApiClient(CustomObjectsApi).getNamespacedCustomObject({
      ...sandboxExtensions,
      namespace: stack.namespace,
      plural: AgentSandboxApi.claimPlural,
      name: NAME,
    });
  const sandboxOf = async (name: string): Promise<unknown> =>
    stack.admin.makeApiClient(CustomObjectsApi).getNamespacedCustomObject({
      ...sandboxCore,
      namespace: stack.namespace,
      plural: AgentSandboxApi.sandboxPlural,
      name,
    });
  const turn = async (text: string, key: string): Promise<void> => {
    const answer = await postMessage(stack.apiUrl, token, uid, text, key);
    expect(answer.status).toBe(200);
    expect(answer.body).toMatchObject({ status: 'complete' });
  };

  beforeAll(async () => {
    steps = await upgradeSteps();
    dir = await mkdtemp(join(tmpdir(), 'polychrome-upgrade-'));
    cluster = await LocalCluster.start({
      dir: join(dir, 'cluster'),
      controllerManager: true,
      crdDirs: [
        join(repoRoot, 'config', 'crd', 'bases'),
        join(defaultBinDir, 'agent-sandbox-previous-crds'),
      ],
    });
    // As a cluster that came to 0.5.x from 0.4.x has them.
    for (const crd of CRDS) {
      await sh(
        `kubectl patch crd ${crd} --subresource=status --type=merge -p '{"status":{"storedVersions":["v1alpha1","v1beta1"]}}'`,
      );
    }
    // What 0.5.x's install leaves for its conversion webhook, and the ClusterRole v1.0 keeps.
    await sh(`kubectl create namespace agent-sandbox-system
      kubectl -n agent-sandbox-system create service clusterip agent-sandbox-webhook-service --tcp=443:9443
      kubectl -n agent-sandbox-system create secret generic agent-sandbox-webhook-certs --from-literal=tls.crt=x
      kubectl -n agent-sandbox-system create role agent-sandbox-controller --verb=get --resource=secrets
      kubectl -n agent-sandbox-system create rolebinding agent-sandbox-controller --role=agent-sandbox-controller --serviceaccount=agent-sandbox-system:agent-sandbox-controller
      kubectl create clusterrole agent-sandbox-controller --verb=get --resource=pods`);
    controllerPid = await startController('agent-sandbox-controller-previous', [
      '--enable-webhook=false',
      '--manage-webhook-certs=false',
    ]);
    stack = await startTurnStack({ cluster, agentSandbox: true, namespacePrefix: 'upgrade' });
    token = await stack.mintToken(OWNER);
    const { api, group, version, plural } = conversations(stack.admin);
    const created: unknown = await api.createNamespacedCustomObject({
      group,
      version,
      plural,
      namespace: stack.namespace,
      body: {
        apiVersion: `${group}/${version}`,
        kind: 'Conversation',
        metadata: { name: NAME },
        spec: { ...DEFAULT_CONVERSATION_SPEC, owner: OWNER, sandbox: { backend: 'agent-sandbox' } },
      },
    });
    uid = String(field(created, 'metadata', 'uid'));
    await stack.waitConversation(NAME, isReady, 120_000);
  }, 240_000);

  afterAll(async () => {
    await stack?.stop();
    if (controllerPid !== undefined) await stopPid(controllerPid);
    await cluster?.stop();
    if (dir !== undefined) await rm(dir, { recursive: true, force: true });
    process.stderr.write(`agent-sandbox upgrade test: ${Date.now() - started} ms in all\n`);
  });

  it('takes a turn on 0.5.6, upgrades by the doc, and takes another on the same Conversation and Sandbox', async () => {
    await stack.withDiagnostics(async () => {
      expect(steps).toHaveLength(5);
      await turn('before the upgrade', 'k-before');
      const before = await claim();
      const sandboxName = String(field(before, 'status', 'sandbox', 'name'));
      const podBefore = String(
        field(await stack.conversation(NAME), 'status', 'sandbox', 'podName'),
      );

      // The v1.0 CRDs are refused while v1alpha1 is in storedVersions: step 2 is needed.
      await expect(
        sh('kubectl apply --server-side --force-conflicts -k config/crd/agent-sandbox'),
      ).rejects.toThrow(/storedVersions/u);

      const [rewrite, prune, , cleanup, check] = steps as [string, string, string, string, string];
      const rewritten = await sh(rewrite);
      expect(rewritten.stdout).toContain(`${CRDS[1]}: ["v1alpha1","v1beta1"]`);
      await sh(prune);

      // Step 3 with the pinned module's CRDs and controller binary.
      if (controllerPid !== undefined) await stopPid(controllerPid);
      controllerPid = undefined;
      await sh('kubectl apply --server-side --force-conflicts -k config/crd/agent-sandbox');
      controllerPid = await startController('agent-sandbox-controller');

      await sh(cleanup);
      const left = await sh(
        'kubectl -n agent-sandbox-system get service,secret,role,rolebinding -o name; kubectl get clusterrole agent-sandbox-controller -o name',
      );
      expect(left.stdout.trim().split('\n')).toEqual([
        'clusterrole.rbac.authorization.k8s.io/agent-sandbox-controller',
      ]);

      // v1.0 rewrites the claim's Ready with the claim's own generation.
      await pollUntil(
        'the claim Ready for its generation under v1.0',
        async () => {
          const now = await claim();
          const ready = (field(now, 'status', 'conditions') as Record<string, unknown>[]).find(
            (c) => c['type'] === 'Ready',
          );
          return ready?.['status'] === 'True' &&
            ready['observedGeneration'] === field(now, 'metadata', 'generation')
            ? true
            : undefined;
        },
        { timeoutMs: 60_000, intervalMs: 250 },
      );
      await stack.waitConversation(NAME, isReady, 60_000);
      await turn('after the upgrade', 'k-after');

      const checked = await sh(check);
      for (const crd of CRDS) expect(checked.stdout).toContain(`${crd}: ["v1beta1"]`);
      expect(checked.stdout).toMatch(new RegExp(`/${NAME} generation (\\d+): True at \\1\\n`, 'u'));

      // The same claim, Sandbox and pod served both turns.
      const after = await claim();
      expect(field(after, 'metadata', 'uid')).toBe(field(before, 'metadata', 'uid'));
      expect(field(after, 'status', 'sandbox', 'name')).toBe(sandboxName);
      expect(field(await sandboxOf(sandboxName), 'metadata', 'name')).toBe(sandboxName);
      expect(field(await stack.conversation(NAME), 'status', 'sandbox', 'podName')).toBe(podBefore);
      const kinds = await stack.journalKinds(uid);
      expect(kinds.filter((k) => k === 'turn_complete')).toHaveLength(2);
      expect((await stack.verify(uid)).ok).toBe(true);
    });
  }, 240_000);
});
