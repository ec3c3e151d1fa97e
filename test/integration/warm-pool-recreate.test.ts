/**
 * The onboarded warm pool's update strategy (config/sandbox, `Recreate`) on the shared API
 * server with the real agent-sandbox controller: an upgrade changes the SandboxTemplate's
 * harness image, and the warm sandboxes made from the old template are deleted and warmed
 * again from the new one without anyone deleting them, so a Conversation made afterwards
 * gets a harness of the new template. The old ones are Ready (the test plays the kubelet,
 * as conversation-controller.test.ts does), so a pool that kept them (agent-sandbox's
 * default, OnReplenish) would hand one out: the test would see the old image.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import {
  CoreV1Api,
  CustomObjectsApi,
  PatchStrategy,
  setHeaderOptions,
  type KubeConfig,
} from '@kubernetes/client-node';
import pino from 'pino';

import { pollUntil } from '../../hack/lib/processes';
import { validMinimalConversationSpec } from '../../operator/api/v1alpha1/conversation-cases';
import { ConversationController } from '../../operator/controller/conversation-controller';
import { NamespaceOnboarder } from '../../operator/onboarding/onboarder';
import type { ProvisionLog } from '../../operator/provision/provisioner';
import {
  createConversationObject,
  dropConversationFinalizers,
  field,
  freshNamespace,
  kubeConfig,
} from './support/kube';
import { ensureRuntimeClass, sandboxCore, sandboxExtensions as ext } from './support/sandbox';

const OLD = 'registry.invalid/polychrome/harness:old';
const NEW = 'registry.invalid/polychrome/harness:new';
const POOL = 'polychrome-harness';
const REPLICAS = 2;
const poll = { timeoutMs: 30_000, intervalMs: 100 };
const quiet: ProvisionLog = { info: () => undefined, warn: () => undefined };

interface Warm {
  readonly name: string;
  readonly uid: string;
  readonly image: unknown;
  readonly pod: string;
}

describe('an upgrade changes the harness image: the onboarded warm pool is warmed again', () => {
  let kc: KubeConfig;
  let ns: { name: string; dispose: () => Promise<void> };
  let objects: CustomObjectsApi;
  let core: CoreV1Api;
  let controller: ConversationController | undefined;
  let ip = 20;

  /** Onboards the namespace as the provisioner does, with `image` as the harness image. */
  const onboard = async (image: string): Promise<void> => {
    const onboarder = new NamespaceOnboarder({
      kubeConfig: kc,
      placement: { controlPlaneNamespace: 'polychrome-system', harnessImage: image },
      log: quiet,
    });
    // No provisioner Secrets here: the credentials wait; config/sandbox's objects are written.
    await onboarder.sync(await core.readNamespace({ name: ns.name }), {
      harnessCa: undefined,
      approvalKey: undefined,
    });
  };

  /** The pool's own sandboxes (unclaimed), not being deleted. */
  const warm = async (): Promise<Warm[]> => {
    const list = (await objects.listNamespacedCustomObject({
      ...sandboxCore,
      namespace: ns.name,
      plural: 'sandboxes',
    })) as { items: unknown[] };
    return list.items
      .filter((s) => field(s, 'metadata', 'deletionTimestamp') === undefined)
      .filter((s) => {
        const owners = field(s, 'metadata', 'ownerReferences');
        return Array.isArray(owners) && owners.some((o) => field(o, 'kind') === 'SandboxWarmPool');
      })
      .map((s) => {
        const containers = field(s, 'spec', 'podTemplate', 'spec', 'containers');
        const harness: unknown = Array.isArray(containers)
          ? (containers as unknown[]).find((c) => field(c, 'name') === 'harness')
          : undefined;
        const name = String(field(s, 'metadata', 'name'));
        const annotated = field(s, 'metadata', 'annotations', 'agents.x-k8s.io/pod-name');
        return {
          name,
          uid: String(field(s, 'metadata', 'uid')),
          image: field(harness, 'image'),
          pod: typeof annotated === 'string' && annotated !== '' ? annotated : name,
        };
      });
  };

  /** Plays the kubelet for a warm sandbox's pod: Running, Ready, with an IP. */
  const markReady = async (podName: string): Promise<void> => {
    const pod = await pollUntil(`pod ${podName}`, () =>
      core.readNamespacedPod({ namespace: ns.name, name: podName }).catch(() => undefined),
    );
    ip += 1;
    pod.status = {
      phase: 'Running',
      podIP: `10.244.1.${ip}`,
      podIPs: [{ ip: `10.244.1.${ip}` }],
      conditions: [{ type: 'Ready', status: 'True', lastTransitionTime: new Date() }],
    };
    await core.replaceNamespacedPodStatus({ namespace: ns.name, name: podName, body: pod });
  };

  /** Waits for `REPLICAS` warm sandboxes of `image`, makes them Ready, and returns them. */
  const warmed = async (image: string): Promise<Warm[]> => {
    const found = await pollUntil(
      `${REPLICAS} warm sandboxes of ${image}`,
      async () => {
        const now = await warm();
        return now.length === REPLICAS && now.every((w) => w.image === image) ? now : undefined;
      },
      poll,
    );
    for (const w of found) await markReady(w.pod);
    await pollUntil(
      'the warm sandboxes Ready with their IPs',
      async () => {
        const list = (await objects.listNamespacedCustomObject({
          ...sandboxCore,
          namespace: ns.name,
          plural: 'sandboxes',
        })) as { items: unknown[] };
        const ready = list.items.filter((s) => {
          const ips = field(s, 'status', 'podIPs');
          return found.some((w) => w.uid === field(s, 'metadata', 'uid')) && Array.isArray(ips);
        });
        return ready.length === found.length ? true : undefined;
      },
      poll,
    );
    return found;
  };

  beforeAll(async () => {
    kc = await kubeConfig();
    ns = await freshNamespace(kc, 'recreate');
    objects = kc.makeApiClient(CustomObjectsApi);
    core = kc.makeApiClient(CoreV1Api);
    await ensureRuntimeClass(kc);
    await core.patchNamespace(
      { name: ns.name, body: { metadata: { labels: { 'polychrome.dev/enabled': 'true' } } } },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
  });

  afterAll(async () => {
    await controller?.close();
    if (ns !== undefined) {
      await dropConversationFinalizers(kc, ns.name);
      await ns.dispose();
    }
  });

  it('replaces the unclaimed warm sandboxes of the old template, and a new Conversation gets the new one', async () => {
    await onboard(OLD);
    const pool: unknown = await objects.getNamespacedCustomObject({
      ...ext,
      namespace: ns.name,
      plural: 'sandboxwarmpools',
      name: POOL,
    });
    expect(field(pool, 'spec', 'updateStrategy')).toEqual({ type: 'Recreate' });
    const before = await warmed(OLD);

    // The upgrade: the provisioner of the new release renders the template with its image.
    const changedAt = Date.now();
    await onboard(NEW);
    const after = await warmed(NEW);
    const rolledMs = Date.now() - changedAt;
    const oldUids = new Set(before.map((w) => w.uid));
    expect(after.filter((w) => oldUids.has(w.uid))).toEqual([]);
    process.stderr.write(`warm pool rolled to the new template in ${rolledMs} ms\n`);

    controller = new ConversationController({
      kubeConfig: kc,
      logger: pino({ level: process.env['POLYCHROME_TEST_LOG'] ?? 'silent' }),
      namespace: ns.name,
      baseDelayMs: 50,
      maxDelayMs: 2_000,
    });
    await controller.start();
    await createConversationObject(kc, ns.name, 'after-upgrade', validMinimalConversationSpec);
    const sandboxName = await pollUntil(
      'the claim of the new Conversation to name its Sandbox',
      async () => {
        const claim: unknown = await objects
          .getNamespacedCustomObject({
            ...ext,
            namespace: ns.name,
            plural: 'sandboxclaims',
            name: 'after-upgrade',
          })
          .catch(() => undefined);
        const name = field(claim, 'status', 'sandbox', 'name');
        return typeof name === 'string' && name !== '' ? name : undefined;
      },
      poll,
    );
    const sandbox: unknown = await objects.getNamespacedCustomObject({
      ...sandboxCore,
      namespace: ns.name,
      plural: 'sandboxes',
      name: sandboxName,
    });
    // A warm one of the new template (adopted, not started cold), not one of the old.
    expect(after.map((w) => w.name)).toContain(sandboxName);
    expect(oldUids.has(String(field(sandbox, 'metadata', 'uid')))).toBe(false);
    const containers = field(sandbox, 'spec', 'podTemplate', 'spec', 'containers');
    expect(
      Array.isArray(containers) && (containers as unknown[]).map((c) => field(c, 'image')),
    ).toEqual([NEW]);
  }, 90_000);
});
