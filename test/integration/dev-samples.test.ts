/**
 * `make dev SAMPLE=...`'s apply (hack/lib/dev-samples.ts) on the real API server, with CEL
 * and RBAC on, and the Agent and ModelConfig controller running as the control plane's own
 * ServiceAccount: the sample's objects apply and every Agent resolves, on the demo endpoint
 * without a key and on a key `make dev` writes to its Secret and grants the control plane,
 * and dropping the key deletes that Secret.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import {
  ApiException,
  CoreV1Api,
  CustomObjectsApi,
  type KubeConfig,
} from '@kubernetes/client-node';
import pino from 'pino';
import { waitReady } from '../../hack/lib/dev-wait';
import {
  applySample,
  devModel,
  DEV_MODEL_KEY_SECRET,
  DEV_SAMPLES,
  sampleObjects,
} from '../../hack/lib/dev-samples';
import { AgentResourcesController } from '../../operator/controller/agent-resources-controller';
import { field, freshNamespace, kubeConfig } from './support/kube';
import { CONTROL_PLANE_ACCOUNT, controlPlaneIdentity } from './support/control-plane-identity';

const KEY = 'sk-ant-dev-sample-never-logged';

describe('make dev SAMPLE=...: the sample applies and resolves', () => {
  let admin: KubeConfig;
  let ns: { name: string; dispose: () => Promise<void> };
  let controller: AgentResourcesController;
  const logs: string[] = [];

  beforeAll(async () => {
    admin = await kubeConfig();
    const { asControlPlane } = await controlPlaneIdentity();
    ns = await freshNamespace(admin, 'dev-samples');
    controller = new AgentResourcesController({
      kubeConfig: asControlPlane,
      logger: pino({ level: 'debug' }, { write: (line: string) => void logs.push(line) }),
      account: CONTROL_PLANE_ACCOUNT,
      namespace: ns.name,
      secretRecheckMs: 300,
      baseDelayMs: 50,
      maxDelayMs: 1_000,
      events: { reportingInstance: 'dev-samples-test' },
    });
    await controller.start();
  });

  afterAll(async () => {
    await controller.close();
    await ns.dispose();
  });

  const agentNames = (name: string): string[] =>
    sampleObjects(DEV_SAMPLES[name]!)
      .filter((o) => o.kind === 'Agent')
      .map((o) => o.metadata?.name ?? '');

  const modelSpec = async (): Promise<unknown> =>
    field(
      await admin.makeApiClient(CustomObjectsApi).getNamespacedCustomObject({
        group: 'polychrome.dev',
        version: 'v1alpha1',
        plural: 'modelconfigs',
        namespace: ns.name,
        name: 'claude',
      }),
      'spec',
    );

  it('panel on the demo endpoint: the ModelConfig and all four Agents Ready, the Conversation created', async () => {
    await applySample(admin, ns.name, DEV_SAMPLES.panel!, devModel({}), CONTROL_PLANE_ACCOUNT);
    await waitReady(admin, ns.name, 'modelconfigs', ['claude'], 30_000);
    await waitReady(admin, ns.name, 'agents', agentNames('panel'), 30_000);
    expect(agentNames('panel').sort()).toEqual(['editor', 'panel-lead', 'researcher', 'skeptic']);
    expect(await modelSpec()).toEqual(devModel({}).spec);
    const chat: unknown = await admin.makeApiClient(CustomObjectsApi).getNamespacedCustomObject({
      group: 'polychrome.dev',
      version: 'v1alpha1',
      plural: 'conversations',
      namespace: ns.name,
      name: 'panel',
    });
    expect(field(chat, 'spec', 'agentRef')).toEqual({ name: 'panel-lead' });
  });

  it('triage with a key: the Secret and its grant let the control plane resolve the ModelConfig; the key is only in the Secret', async () => {
    const model = devModel({ ANTHROPIC_API_KEY: KEY });
    await applySample(admin, ns.name, DEV_SAMPLES.triage!, model, CONTROL_PLANE_ACCOUNT);
    await waitReady(admin, ns.name, 'agents', agentNames('triage'), 30_000);
    // Ready only once the control plane read the key: the grant works.
    await waitReady(admin, ns.name, 'modelconfigs', ['claude'], 30_000);
    expect(field(await modelSpec(), 'secretKeyRef')).toEqual({
      name: DEV_MODEL_KEY_SECRET,
      key: 'api-key',
    });
    const secret = await admin
      .makeApiClient(CoreV1Api)
      .readNamespacedSecret({ namespace: ns.name, name: DEV_MODEL_KEY_SECRET });
    expect(Buffer.from(secret.data?.['api-key'] ?? '', 'base64').toString()).toBe(KEY);
    expect(JSON.stringify(await modelSpec())).not.toContain(KEY);
    expect(logs.join('\n')).not.toContain(KEY);
  });

  it('without the key again: the Secret make dev wrote is deleted, and the demo endpoint resolves', async () => {
    await applySample(admin, ns.name, DEV_SAMPLES.triage!, devModel({}), CONTROL_PLANE_ACCOUNT);
    const status = await admin
      .makeApiClient(CoreV1Api)
      .readNamespacedSecret({ namespace: ns.name, name: DEV_MODEL_KEY_SECRET })
      .then(
        () => 200,
        (err: unknown) => (err instanceof ApiException ? err.code : -1),
      );
    expect(status).toBe(404);
    expect(field(await modelSpec(), 'secretKeyRef')).toBeUndefined();
    await waitReady(admin, ns.name, 'modelconfigs', ['claude'], 30_000);
  });
});
