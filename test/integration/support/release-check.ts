/**
 * What release.test.ts checks of a release installed for real (support/release-install.ts),
 * whether from polychrome.yaml or from the Helm chart: every pod of the install runs the
 * image the release pinned, pulled from its registry; a labelled namespace onboards; a
 * Conversation answers one turn on a harness of the pinned image against the local Messages
 * API server; its journal verifies. And, for the chart, what `helm uninstall` leaves. And
 * the helpers that read what cosign and the manifests print.
 */
import { expect } from '@jest/globals';
import { CoreV1Api } from '@kubernetes/client-node';
import { partitionOf } from '../../../common/partition-name';
import { SECRET_NAMES } from '../../../operator/provision/catalog';
import { type InstalledRelease, kubectl, onboardNamespace, takeTurn } from './release-install';
import { helm } from './release-install-steps';

const SYSTEM = 'polychrome-system';

/**
 * Checks the installed release end to end (above) in the namespace `team`, with `dir` for
 * the state plane's client identities. Resolves with how long onboarding, the Conversation,
 * the turn and the verification took, in ms.
 */
export async function expectPinnedAndAnswering(
  release: InstalledRelease,
  pinned: Record<string, string>,
  team: string,
  dir: string,
): Promise<number> {
  const { kc } = release;
  // Every pod of the install runs the image the release pins, pulled from the registry.
  const pods = await kc.makeApiClient(CoreV1Api).listNamespacedPod({ namespace: SYSTEM });
  const images = pods.items.flatMap((p) => p.status?.containerStatuses ?? []);
  // The provisioner, the state plane and the control plane's two replicas.
  expect(images).toHaveLength(4);
  for (const c of images) {
    expect({ image: c.image, ready: c.ready, imageID: c.imageID }).toEqual({
      image: pinned[c.image.includes('/state@') ? 'state' : 'control-plane'],
      ready: true,
      imageID: c.image,
    });
  }
  await onboardNamespace(release, team);
  const lap = Date.now();
  const turn = await takeTurn(release, team, 'hello', dir);
  expect({ status: turn.status, body: turn.body }).toEqual({
    status: 200,
    body: expect.objectContaining({ status: 'complete' }),
  });
  // The harness that answered ran the pinned harness image, and asked the model server.
  const harnesses = await kc.makeApiClient(CoreV1Api).listNamespacedPod({ namespace: team });
  const harness = harnesses.items.flatMap((p) => p.status?.containerStatuses ?? []);
  expect(harness.length).toBeGreaterThan(0);
  for (const c of harness) expect(c.imageID).toBe(pinned['harness']);
  expect(JSON.stringify(release.model.bodies)).toContain('hello from the release');
  expect(turn.verify).toEqual({
    code: 0,
    stdout: expect.stringMatching(
      new RegExp(`^${partitionOf(turn.uid)}: OK: [1-9]\\d* events`, 'mu'),
    ),
    stderr: expect.any(String),
  });
  return Date.now() - lap;
}

/** An object of the cluster as `kubectl get -o json` lists it. */
interface Listed {
  kind: string;
  metadata: { name: string; namespace?: string; annotations?: Record<string, string> };
}

/**
 * Every object of the cluster that Helm marked as the release `name`'s
 * (`meta.helm.sh/release-name`), as `Kind namespace/name` (`Kind name` when cluster-wide),
 * with its `helm.sh/resource-policy` annotation (empty when none); sorted.
 */
export async function helmOwned(release: InstalledRelease, name: string): Promise<string[]> {
  const admin = release.cluster.kubeconfigPath;
  const resources = (await kubectl(admin, ['api-resources', '--verbs=list', '-o', 'name']))
    .split('\n')
    .filter(Boolean)
    // Events are never Helm's, and are many.
    .filter((r) => !r.startsWith('events'));
  const listed = JSON.parse(
    await kubectl(admin, ['get', resources.join(','), '--all-namespaces', '-o', 'json']),
  ) as { items: Listed[] };
  return listed.items
    .filter((o) => o.metadata.annotations?.['meta.helm.sh/release-name'] === name)
    .map((o) => {
      const where = o.metadata.namespace === undefined ? '' : `${o.metadata.namespace}/`;
      const policy = o.metadata.annotations?.['helm.sh/resource-policy'] ?? '';
      return `${o.kind} ${where}${o.metadata.name} ${policy}`.trimEnd();
    })
    .sort();
}

/**
 * The chart's CRDs and its release's Namespace, each marked `helm.sh/resource-policy: keep`,
 * are what the install's chart holds to keep (docs/release.md, "Installing"); `helm
 * uninstall` deletes every other object of the chart and the release itself, and leaves
 * them; the Conversation of `team` outlives it (its CRD was kept), and so do the Secrets the
 * provisioner wrote and the state plane's claim. `home` is helm's.
 */
export async function expectUninstallKeeps(
  release: InstalledRelease,
  home: string,
  team: string,
): Promise<void> {
  const owned = await helmOwned(release, 'polychrome');
  const keep = owned.filter((o) => o.endsWith(' keep'));
  expect(keep).toEqual([
    'CustomResourceDefinition agents.polychrome.dev keep',
    'CustomResourceDefinition conversations.polychrome.dev keep',
    'CustomResourceDefinition modelconfigs.polychrome.dev keep',
    `Namespace ${SYSTEM} keep`,
  ]);
  expect(owned).toContain(`Deployment ${SYSTEM}/polychrome-control-plane`);
  expect(owned).toContain(`StatefulSet ${SYSTEM}/polychrome-state`);
  const kubeconfig = release.cluster.kubeconfigPath;
  await helm(kubeconfig, home, ['uninstall', 'polychrome', '--namespace', SYSTEM]);
  expect(await helmOwned(release, 'polychrome')).toEqual(keep);
  expect(await helm(kubeconfig, home, ['list', '--all-namespaces', '-q'])).toBe('');
  expect(await kubectl(kubeconfig, ['get', 'conversations', '-n', team, '-o', 'name'])).toBe(
    'conversation.polychrome.dev/hello\n',
  );
  // What the workloads made stays: the provisioner's Secrets and the state plane's claim
  // (the journals), beside what Kubernetes puts in every namespace. Pods are left out: the
  // garbage collector deletes them after their workloads, in the background.
  const left = await kubectl(kubeconfig, [
    'get',
    'deployments,statefulsets,services,secrets,configmaps,pvc,serviceaccounts,roles,rolebindings,networkpolicies,poddisruptionbudgets',
    '-n',
    SYSTEM,
    '-o',
    'name',
  ]);
  expect(left.split('\n').filter(Boolean).sort()).toEqual(
    [
      ...SECRET_NAMES.map((name) => `secret/${name}`),
      'persistentvolumeclaim/journal-polychrome-state-0',
      'configmap/kube-root-ca.crt',
      'serviceaccount/default',
    ].sort(),
  );
}

/** An in-toto statement, as a DSSE envelope carries it. */
export interface Statement {
  predicateType: string;
  subject: unknown;
  predicate: unknown;
}

/** The in-toto statements `cosign verify-attestation` printed (DSSE envelopes), decoded. */
export function statements(stdout: string): Statement[] {
  return stdout
    .split('\n')
    .filter((l) => l.trim().startsWith('{'))
    .map((l) => {
      const { payload } = JSON.parse(l) as { payload: string };
      return JSON.parse(Buffer.from(payload, 'base64').toString('utf8')) as Statement;
    });
}

/**
 * Every image a manifest (YAML, or kubectl's JSON) names: each `image` field, and each
 * environment value that names the registry or `registry.invalid` (POLYCHROME_HARNESS_IMAGE).
 */
export function imageRefs(text: string, host: string): string[] {
  const image = /"?\bimage"?: "?([^\s"]+)/gu;
  const names = `(?:registry\\.invalid|${host.replace(/\./gu, '\\.')})`;
  const value = new RegExp(`"?\\bvalue"?: "?(${names}[^\\s"]*)`, 'gu');
  return [...text.matchAll(image), ...text.matchAll(value)].map((m) => m[1] ?? '');
}
