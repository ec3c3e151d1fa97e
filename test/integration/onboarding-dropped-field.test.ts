/**
 * Namespace onboarding on an API server that drops a field of ours: the SandboxWarmPool CRD
 * served without `spec.updateStrategy`, as an agent-sandbox older than the field serves it
 * (the pinned versions, 0.5.6 and v1.0.3, both declare it). The server keeps the created
 * warm pool without the field and refuses a server-side apply that carries it, so onboarding
 * must neither write it again on every pass nor fail every pass: it compares and writes what
 * the server keeps (operator/onboarding/desired.ts, `keptBy`). Once the CRD declares the
 * field, the next pass writes it. On a local cluster of its own, since CRDs are
 * cluster-wide: the pinned CRDs (config/crd/agent-sandbox) with the field taken out.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { CoreV1Api, KubernetesObjectApi, type KubeConfig } from '@kubernetes/client-node';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { installCrds, readCrds } from '../../hack/lib/crds';
import { LocalCluster } from '../../hack/lib/local-cluster';
import { repoRoot } from '../../hack/lib/paths';
import { pollUntil } from '../../hack/lib/processes';
import { ONBOARDED_REFS } from '../../operator/onboarding/catalog';
import type { OnboardingController } from '../../operator/onboarding/controller';
import { NamespaceOnboarder } from '../../operator/onboarding/onboarder';
import { buildOnboarding } from '../../operator/onboarding/start';
import { Provisioner, type ProvisionLog } from '../../operator/provision/provisioner';
import { field } from './support/kube';

const CP = 'polychrome-system';
const TEAM = 'team-a';
const WARM_POOLS = 'sandboxwarmpools.extensions.agents.x-k8s.io';
/** Passes run this often here: a write on every pass would show many times in a window. */
const RESYNC_MS = 200;
const QUIET_MS = 3_000;
const quiet: ProvisionLog = { info: () => undefined, warn: () => undefined };

describe('onboarding on a server that drops a field of ours', () => {
  let dir: string;
  let cluster: LocalCluster;
  let kc: KubeConfig;
  let api: KubernetesObjectApi;
  let controller: OnboardingController;
  /** The operator's log lines, writes (info) and failed passes (warn). */
  const lines: string[] = [];
  const log: ProvisionLog = {
    info: (_fields, message) => lines.push(`info ${message}`),
    warn: (fields, message) => lines.push(`warn ${message} ${JSON.stringify(fields)}`),
  };
  const pinned = async () => readCrds([join(repoRoot, 'config', 'crd', 'agent-sandbox')]);
  const warmPool = async (): Promise<unknown> =>
    api.read({
      apiVersion: 'extensions.agents.x-k8s.io/v1beta1',
      kind: 'SandboxWarmPool',
      metadata: { name: 'polychrome-harness', namespace: TEAM },
    });
  /** The log lines and warm pool versions over `ms`: a pass that writes or fails shows here. */
  const watchQuietly = async (ms: number): Promise<{ lines: string[]; versions: string[] }> => {
    const from = lines.length;
    const versions = new Set<string>();
    const until = Date.now() + ms;
    while (Date.now() < until) {
      versions.add(String(field(await warmPool(), 'metadata', 'resourceVersion')));
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    return { lines: lines.slice(from), versions: [...versions] };
  };

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'polychrome-dropped-field-'));
    cluster = await LocalCluster.start({ dir: join(dir, 'cluster'), controllerManager: false });
    kc = cluster.kubeConfig();
    const withoutField = (await pinned()).map((crd) => {
      if (crd.metadata?.name !== WARM_POOLS) return crd;
      const copy = structuredClone(crd);
      for (const v of copy.spec.versions) {
        const spec = v.schema?.openAPIV3Schema?.properties?.['spec'];
        expect(spec?.properties).toHaveProperty('updateStrategy');
        delete spec?.properties?.['updateStrategy'];
      }
      return copy;
    });
    await installCrds(kc, withoutField);
    const core = kc.makeApiClient(CoreV1Api);
    await core.createNamespace({ body: { metadata: { name: CP } } });
    await core.createNamespace({
      body: { metadata: { name: TEAM, labels: { 'polychrome.dev/enabled': 'true' } } },
    });
    await new Provisioner({ core, namespace: CP, log: quiet }).run();
    api = KubernetesObjectApi.makeApiClient(kc);
    controller = buildOnboarding({
      kubeConfig: kc,
      controlPlaneNamespace: CP,
      harnessImage: undefined,
      resyncMs: RESYNC_MS,
      podName: 'dropped-field-test',
      log,
    });
    await controller.start();
  }, 120_000);

  afterAll(async () => {
    await controller?.close();
    await cluster?.stop();
    if (dir !== undefined) await rm(dir, { recursive: true, force: true });
  });

  it('is not written again on every pass, and is written once the CRD declares it', async () => {
    await pollUntil(
      'the namespace onboarded',
      async () => {
        for (const ref of ONBOARDED_REFS) {
          await api.read({
            apiVersion: ref.apiVersion,
            kind: ref.kind,
            metadata: { name: ref.name, namespace: TEAM },
          });
        }
        return true;
      },
      { timeoutMs: 30_000, intervalMs: 200 },
    ).catch((err: unknown) => {
      throw new Error(`${String(err)}\n${lines.join('\n')}`);
    });
    // The server kept the warm pool without the field: what this test is about.
    expect(field(await warmPool(), 'spec')).toEqual({
      replicas: 2,
      sandboxTemplateRef: { name: 'polychrome-harness' },
    });

    // Many passes: none writes, none fails.
    const dropped = await watchQuietly(QUIET_MS);
    expect(dropped.lines).toEqual([]);
    expect(dropped.versions).toHaveLength(1);
    // One pass of its own, with its result.
    const onboarder = new NamespaceOnboarder({
      kubeConfig: kc,
      placement: { controlPlaneNamespace: CP },
      log,
    });
    const core = kc.makeApiClient(CoreV1Api);
    const pass = await onboarder.sync(await core.readNamespace({ name: TEAM }));
    expect(pass).toEqual({ written: [], pending: [], raced: false });

    // The CRD gains the field (agent-sandbox upgraded): the next pass writes it, once.
    await installCrds(kc, await pinned());
    await pollUntil(
      'the update strategy on the warm pool',
      async () =>
        field(await warmPool(), 'spec', 'updateStrategy', 'type') === 'Recreate' ? true : undefined,
      { timeoutMs: 15_000, intervalMs: 100 },
    );
    const kept = await watchQuietly(QUIET_MS);
    expect(kept.lines).toEqual([]);
    expect(kept.versions).toHaveLength(1);
  }, 60_000);
});
