import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { CoreV1Api, CustomObjectsApi, EventsV1Api, type KubeConfig } from '@kubernetes/client-node';
import pino from 'pino';
import { pollUntil } from '../../hack/lib/processes';
import { AgentResourcesController } from '../../operator/controller/agent-resources-controller';
import { resolveRoster } from '../../operator/turns/agent-roster';
import { field, freshNamespace, kubeConfig, sharedCluster } from './support/kube';
import {
  CONTROL_PLANE_ACCOUNT,
  CONTROL_PLANE_USER,
  controlPlaneIdentity,
} from './support/control-plane-identity';

// The Agent and ModelConfig controller runs here as the control plane's own ServiceAccount
// (the identity config/cluster grants, as in control-plane-rbac.test.ts), against the real
// API server with RBAC on. It may not read Secrets until the namespace grants one by name,
// with exactly the commands its SecretForbidden condition prints.
const account = CONTROL_PLANE_ACCOUNT;
const serviceAccountUser = CONTROL_PLANE_USER;
const poll = { timeoutMs: 30_000, intervalMs: 200 };
const KEY_VALUE = 'sk-ant-test-0123456789-never-anywhere';

describe('Agents and ModelConfigs, reconciled as the control plane', () => {
  let admin: KubeConfig;
  let kubectl: (args: readonly string[]) => string;
  let ns: { name: string; dispose: () => Promise<void> };
  let controller: AgentResourcesController;
  const logs: string[] = [];

  const objects = (): CustomObjectsApi => admin.makeApiClient(CustomObjectsApi);
  const plural = { Agent: 'agents', ModelConfig: 'modelconfigs' } as const;
  const create = (kind: keyof typeof plural, name: string, spec: object): Promise<unknown> =>
    objects().createNamespacedCustomObject({
      group: 'polychrome.dev',
      version: 'v1alpha1',
      plural: plural[kind],
      namespace: ns.name,
      body: { apiVersion: 'polychrome.dev/v1alpha1', kind, metadata: { name }, spec },
    });
  const ready = async (kind: keyof typeof plural, name: string): Promise<unknown> => {
    const obj: unknown = await objects().getNamespacedCustomObject({
      group: 'polychrome.dev',
      version: 'v1alpha1',
      plural: plural[kind],
      namespace: ns.name,
      name,
    });
    const conditions = field(obj, 'status', 'conditions');
    return Array.isArray(conditions)
      ? conditions.find((c: unknown) => field(c, 'type') === 'Ready')
      : undefined;
  };
  const waitReason = (kind: keyof typeof plural, name: string, reason: string) =>
    pollUntil(
      `${kind} ${name} Ready reason ${reason}`,
      async () => {
        const condition = await ready(kind, name);
        return field(condition, 'reason') === reason ? condition : undefined;
      },
      poll,
    );

  beforeAll(async () => {
    admin = await kubeConfig();
    const identity = await controlPlaneIdentity();
    kubectl = identity.kubectl;
    const asControlPlane = identity.asControlPlane;
    ns = await freshNamespace(admin, 'agents');
    await admin.makeApiClient(CoreV1Api).createNamespacedSecret({
      namespace: ns.name,
      body: { metadata: { name: 'anthropic-key' }, stringData: { 'api-key': KEY_VALUE } },
    });
    controller = new AgentResourcesController({
      kubeConfig: asControlPlane,
      logger: pino({ level: 'debug' }, { write: (line: string) => void logs.push(line) }),
      account,
      namespace: ns.name,
      secretRecheckMs: 300,
      baseDelayMs: 50,
      maxDelayMs: 1_000,
      events: { reportingInstance: 'agents-test' },
    });
    await controller.start();
  });

  afterAll(async () => {
    await controller.close();
    await ns.dispose();
  });

  it('says SecretForbidden with the two commands, and Resolved once they are run', async () => {
    await create('ModelConfig', 'claude', {
      provider: 'anthropic',
      model: 'claude-sonnet-5-5',
      secretKeyRef: { name: 'anthropic-key', key: 'api-key' },
    });
    const forbidden = await waitReason('ModelConfig', 'claude', 'SecretForbidden');
    expect(field(forbidden, 'status')).toBe('False');
    const message = String(field(forbidden, 'message'));
    const commands = message.slice(message.indexOf('kubectl ')).split(' && ');
    expect(commands).toEqual([
      `kubectl -n ${ns.name} create role polychrome-read-anthropic-key --verb=get --resource=secrets --resource-name=anthropic-key`,
      `kubectl -n ${ns.name} create rolebinding polychrome-read-anthropic-key --role=polychrome-read-anthropic-key --serviceaccount=${account.namespace}:${account.name}`,
    ]);
    // Run exactly what the condition says, as the namespace's admin.
    for (const command of commands) kubectl(command.split(' ').slice(1));
    const resolved = await waitReason('ModelConfig', 'claude', 'Resolved');
    expect(field(resolved, 'status')).toBe('True');
    // The grant is that one Secret: any other stays out of reach.
    const core = (
      await kubeConfig(await (await sharedCluster()).mintUser(serviceAccountUser))
    ).makeApiClient(CoreV1Api);
    await expect(core.listNamespacedSecret({ namespace: ns.name })).rejects.toMatchObject({
      code: 403,
    });
  });

  it('says SecretKeyMissing and SecretNotFound for a granted Secret without the key, or none', async () => {
    await create('ModelConfig', 'wrong-key', {
      provider: 'anthropic',
      model: 'claude-sonnet-5-5',
      secretKeyRef: { name: 'anthropic-key', key: 'other' },
    });
    expect(field(await waitReason('ModelConfig', 'wrong-key', 'SecretKeyMissing'), 'message')).toBe(
      `Secret ${ns.name}/anthropic-key has no key other, or it is empty: put the API key there, or fix spec.secretKeyRef.key of ModelConfig wrong-key`,
    );
    kubectl([
      '-n',
      ns.name,
      'create',
      'role',
      'read-gone',
      '--verb=get',
      '--resource=secrets',
      '--resource-name=gone',
    ]);
    kubectl([
      '-n',
      ns.name,
      'create',
      'rolebinding',
      'read-gone',
      '--role=read-gone',
      `--serviceaccount=${account.namespace}:${account.name}`,
    ]);
    await create('ModelConfig', 'gone', {
      provider: 'openai',
      model: 'gpt-5',
      secretKeyRef: { name: 'gone', key: 'api-key' },
    });
    await waitReason('ModelConfig', 'gone', 'SecretNotFound');
  });

  it('Agent: TargetNotFound until the handoff target exists, then Resolved', async () => {
    await create('Agent', 'triage', {
      modelRef: { name: 'claude' },
      handoffs: ['billing'],
      delegates: ['search'],
    });
    const missing = await waitReason('Agent', 'triage', 'TargetNotFound');
    expect(field(missing, 'message')).toBe(
      'no Agent billing (handoffs), search (delegates) in this namespace: create them or remove them from the list',
    );
    await create('Agent', 'billing', { modelRef: { name: 'claude' } });
    await pollUntil(
      'triage to name only search',
      async () =>
        String(field(await ready('Agent', 'triage'), 'message')).startsWith('no Agent search')
          ? true
          : undefined,
      poll,
    );
    await create('Agent', 'search', { modelRef: { name: 'claude' } });
    expect(field(await waitReason('Agent', 'triage', 'Resolved'), 'status')).toBe('True');
  });

  it('gives the turns the watched Agents: triage resolves to a roster of triage, billing and search', async () => {
    // After the test above: triage hands off to billing and delegates to search, all on claude.
    const directory = controller.directory(ns.name);
    const { roster } = await pollUntil(
      'triage, billing and search in the watches',
      () => {
        try {
          return Promise.resolve(resolveRoster('triage', directory, ns.name));
        } catch {
          return Promise.resolve(undefined);
        }
      },
      poll,
    );
    // Every Agent triage reaches: billing by a handoff, search as its delegate.
    expect(
      roster.agents.map((a) => [a.name, a.handoffs, a.delegates ?? [], a.model.modelConfig]),
    ).toEqual([
      ['billing', [], [], 'claude'],
      ['search', [], [], 'claude'],
      ['triage', ['billing'], ['search'], 'claude'],
    ]);
    expect(roster.agents[0]?.model.secretKeyRef).toEqual({ name: 'anthropic-key', key: 'api-key' });
    // Another namespace's Agents are not this one's.
    expect(controller.directory('default').agent('triage')).toBeUndefined();
  });

  it('Agent: ModelConfigNotFound until its ModelConfig exists, then Resolved', async () => {
    await create('Agent', 'local', { modelRef: { name: 'gateway' } });
    await waitReason('Agent', 'local', 'ModelConfigNotFound');
    await create('ModelConfig', 'gateway', {
      provider: 'openai',
      model: 'llama-4-scout',
      baseUrl: 'http://litellm.models.svc:4000/v1',
    });
    await waitReason('Agent', 'local', 'Resolved');
  });

  it('prints PROVIDER, MODEL and READY, and MODEL and READY', () => {
    const out = kubectl(['-n', ns.name, 'get', 'agents,modelconfigs']);
    const tables = out.trim().split(/\n\s*\n/);
    const agents = tables.find((t) => t.includes('agent.polychrome.dev/'))?.split('\n') ?? [];
    const models = tables.find((t) => t.includes('modelconfig.polychrome.dev/'))?.split('\n') ?? [];
    expect(agents[0]?.split(/\s+/)).toEqual(['NAME', 'MODEL', 'READY', 'AGE']);
    expect(
      agents
        .find((r) => r.startsWith('agent.polychrome.dev/triage '))
        ?.split(/\s+/)
        .slice(0, 3),
    ).toEqual(['agent.polychrome.dev/triage', 'claude', 'True']);
    expect(models[0]?.split(/\s+/)).toEqual(['NAME', 'PROVIDER', 'MODEL', 'READY', 'AGE']);
    expect(
      models
        .find((r) => r.startsWith('modelconfig.polychrome.dev/gone '))
        ?.split(/\s+/)
        .slice(0, 4),
    ).toEqual(['modelconfig.polychrome.dev/gone', 'openai', 'gpt-5', 'False']);
  });

  it('lets view read Agents and ModelConfigs, and edit write them (aggregated roles)', async () => {
    const cluster = await sharedCluster();
    const as = async (user: string, role: 'view' | 'edit'): Promise<CustomObjectsApi> => {
      kubectl([
        '-n',
        ns.name,
        'create',
        'rolebinding',
        `${user}-${role}`,
        `--clusterrole=${role}`,
        `--user=${user}`,
      ]);
      return (await kubeConfig(await cluster.mintUser(user))).makeApiClient(CustomObjectsApi);
    };
    const viewer = await as('agent-viewer', 'view');
    const editor = await as('agent-editor', 'edit');
    const agents = {
      group: 'polychrome.dev',
      version: 'v1alpha1',
      plural: 'agents',
      namespace: ns.name,
    };
    // kube-controller-manager aggregates the labelled roles into view and edit.
    await pollUntil(
      'view to list Agents and ModelConfigs',
      async () => {
        try {
          await viewer.listNamespacedCustomObject(agents);
          await viewer.listNamespacedCustomObject({ ...agents, plural: 'modelconfigs' });
          return true;
        } catch {
          return undefined;
        }
      },
      poll,
    );
    const body = {
      apiVersion: 'polychrome.dev/v1alpha1',
      kind: 'Agent',
      metadata: { name: 'by-editor' },
      spec: { modelRef: { name: 'claude' } },
    };
    await expect(viewer.createNamespacedCustomObject({ ...agents, body })).rejects.toMatchObject({
      code: 403,
    });
    await pollUntil(
      'edit to create an Agent',
      async () => {
        try {
          await editor.createNamespacedCustomObject({ ...agents, body });
          return true;
        } catch {
          return undefined;
        }
      },
      poll,
    );
    await editor.deleteNamespacedCustomObject({ ...agents, name: 'by-editor' });
  });

  it('records Ready transitions as Events, and the key is nowhere: status, Events, logs', async () => {
    await controller.eventsSettled();
    const events = (
      await admin.makeApiClient(EventsV1Api).listNamespacedEvent({ namespace: ns.name })
    ).items;
    const triage = events
      .filter((e) => e.regarding?.kind === 'Agent' && e.regarding.name === 'triage')
      .map((e) => [e.type, e.reason, e.reportingInstance]);
    expect(triage).toEqual(
      expect.arrayContaining([
        ['Warning', 'TargetNotFound', 'agents-test'],
        ['Normal', 'Resolved', 'agents-test'],
      ]),
    );
    const claude = events.filter((e) => e.regarding?.name === 'claude').map((e) => e.reason);
    expect(claude).toEqual(expect.arrayContaining(['SecretForbidden', 'Resolved']));

    const stored = JSON.stringify(
      await objects().listNamespacedCustomObject({
        group: 'polychrome.dev',
        version: 'v1alpha1',
        plural: 'modelconfigs',
        namespace: ns.name,
      }),
    );
    const base64 = Buffer.from(KEY_VALUE).toString('base64');
    for (const [what, text] of [
      ['ModelConfigs', stored],
      ['Events', JSON.stringify(events)],
      ['logs', logs.join('')],
    ] as const) {
      expect({ what, hasKey: text.includes(KEY_VALUE) || text.includes(base64) }).toEqual({
        what,
        hasKey: false,
      });
    }
    // The logs were captured: a transition was logged.
    expect(logs.join('')).toContain('Ready changed');
  });
});
