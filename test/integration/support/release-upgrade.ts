/**
 * An installed release (support/release-install.ts) upgraded in place, as docs/operations.md
 * ("Upgrading") tells a platform team: the new release's polychrome.yaml applied
 * server-side over the running install, every workload rolled to the new pinned digests.
 * And what the upgrade test reads of a conversation's journal to compare before and after:
 * the export, and its offline verification against the signing key and the checkpoint the
 * Conversation's status keeps.
 */
import { createPrivateKey, createPublicKey } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { CoreV1Api, CustomObjectsApi } from '@kubernetes/client-node';
import { partitionOf } from '../../../common/partition-name';
import { pollUntil } from '../../../hack/lib/processes';
import { SecretName } from '../../../operator/provision/catalog';
import { conversations } from './kube';
import { type InstalledRelease, kubectl, type StateAccess, stateCli } from './release-install';

const SYSTEM = 'polychrome-system';
const WORKLOADS = [
  'deployment/polychrome-provisioner',
  'statefulset/polychrome-state',
  'deployment/polychrome-control-plane',
] as const;

/** The plane whose image a container of the install runs (the provisioner runs the control plane's). */
const planeOf = (image: string): 'state' | 'control-plane' =>
  image.includes('/state@') ? 'state' : 'control-plane';

/**
 * Resolves once every pod of the install's namespace that is not being deleted runs the
 * image `pinned` names for its plane, ready, and there are `containers` of them.
 */
export async function waitOnImages(
  release: InstalledRelease,
  pinned: Record<string, string>,
  containers: number,
  timeoutMs = 300_000,
): Promise<void> {
  let seen = '';
  await pollUntil(
    `every pod of ${SYSTEM} ready on its pinned image`,
    async () => {
      const pods = await release.kc
        .makeApiClient(CoreV1Api)
        .listNamespacedPod({ namespace: SYSTEM });
      const statuses = pods.items
        .filter((p) => p.metadata?.deletionTimestamp === undefined)
        .flatMap((p) => p.status?.containerStatuses ?? []);
      seen = JSON.stringify(statuses.map((c) => ({ image: c.imageID, ready: c.ready })));
      const done =
        statuses.length === containers &&
        statuses.every((c) => c.ready && c.imageID === pinned[planeOf(c.image)]);
      if (!done) throw new Error(`the pods run ${seen}`);
      return true;
    },
    { timeoutMs, intervalMs: 1000 },
  );
}

/**
 * `kubectl apply --server-side -f manifest` over the running install, then each workload's
 * rollout and every pod on the new pinned images.
 */
export async function applyUpgrade(
  release: InstalledRelease,
  manifest: string,
  pinned: Record<string, string>,
): Promise<void> {
  const admin = release.cluster.kubeconfigPath;
  await kubectl(admin, ['apply', '--server-side', '-f', manifest]);
  for (const workload of WORKLOADS)
    await kubectl(admin, ['rollout', 'status', '-n', SYSTEM, workload, '--timeout=300s']);
  // The provisioner, the state plane and the control plane's two replicas.
  await waitOnImages(release, pinned, 4);
}

/** The journal signing key's raw ed25519 public key, 64 hex digits, from its Secret. */
export async function signingPublicKey(release: InstalledRelease): Promise<string> {
  const secret = await release.kc
    .makeApiClient(CoreV1Api)
    .readNamespacedSecret({ name: SecretName.SigningKey, namespace: SYSTEM });
  const pem = Buffer.from(secret.data?.['signing-key'] ?? '', 'base64').toString('utf8');
  const jwk = createPublicKey(createPrivateKey(pem)).export({ format: 'jwk' });
  return Buffer.from(jwk.x ?? '', 'base64url').toString('hex');
}

/**
 * The checkpoint the Conversation's status keeps outside the journal, as --checkpoint takes
 * it, once its head is at least `atLeast` (the status is written after the turn answers).
 */
export async function statusCheckpoint(
  release: InstalledRelease,
  namespace: string,
  name: string,
  atLeast = 1,
): Promise<string> {
  const { api, group, version, plural } = conversations(release.kc);
  return pollUntil(
    `Conversation ${namespace}/${name}'s status.journal checkpoint at head ${String(atLeast)} or later`,
    async () => {
      const obj = (await api.getNamespacedCustomObject({
        group,
        version,
        plural,
        namespace,
        name,
      })) as {
        status?: { journal?: { head?: number; lastSignedRoot?: string; keyId?: string } };
      };
      const journal = obj.status?.journal;
      if (journal?.head === undefined || journal.lastSignedRoot === undefined) return undefined;
      if (journal.head < atLeast) return undefined;
      const keyId = journal.keyId === undefined ? '' : `:${journal.keyId}`;
      return `${String(journal.head)}:${journal.lastSignedRoot}${keyId}`;
    },
    { timeoutMs: 60_000, intervalMs: 500 },
  );
}

/** One conversation's journal as `polychrome state export` wrote it, and its check. */
export interface JournalExport {
  /** The event lines, without the header (whose checkpoint moves with the journal). */
  events: string[];
  /** `polychrome journal verify` of the file, offline, with the key and checkpoint pinned. */
  offline: { code: number; stdout: string; stderr: string };
}

/** Exports the journal of `uid` to `file` and verifies it offline. */
export async function exportAndVerify(
  access: StateAccess,
  uid: string,
  file: string,
  pins: { publicKey: string; checkpoint: string },
): Promise<JournalExport> {
  const exported = await stateCli(access, ['state', 'export', partitionOf(uid), '-o', file]);
  if (exported.code !== 0)
    throw new Error(
      `polychrome state export failed (${String(exported.code)}): ${exported.stderr}`,
    );
  const offline = await stateCli(access, [
    'journal',
    'verify',
    file,
    '--public-key',
    pins.publicKey,
    '--checkpoint',
    pins.checkpoint,
  ]);
  const events = readFileSync(file, 'utf8').split('\n').filter(Boolean).slice(1);
  return { events, offline };
}

/** The decoded payloads of export lines, as one string to search for a turn's text. */
export function payloadText(events: readonly string[]): string {
  return events
    .map((line) => JSON.parse(line) as { payload?: string })
    .map((e) => Buffer.from(e.payload ?? '', 'base64').toString('utf8'))
    .join('\n');
}

/**
 * Resolves once the namespace's onboarded sandbox bundle is this release's: its harness
 * template names `harnessImage` and its warm pool replaces stale harnesses (`Recreate`),
 * as the new provisioner writes them (docs/operations.md, "Upgrading", step 5). A
 * Conversation made after that gets a harness of the new template.
 */
export async function waitSandboxBundle(
  release: InstalledRelease,
  namespace: string,
  harnessImage: string,
  timeoutMs = 120_000,
): Promise<void> {
  const api = release.kc.makeApiClient(CustomObjectsApi);
  const read = (group: string, plural: string, name: string) =>
    api.getNamespacedCustomObject({
      group,
      version: 'v1beta1',
      namespace,
      plural,
      name,
    }) as Promise<{
      spec?: Record<string, unknown>;
    }>;
  await pollUntil(
    `the sandbox bundle of ${namespace} on this release`,
    async () => {
      const template = await read(
        'extensions.agents.x-k8s.io',
        'sandboxtemplates',
        'polychrome-harness',
      );
      const pool = await read(
        'extensions.agents.x-k8s.io',
        'sandboxwarmpools',
        'polychrome-harness',
      );
      const images = JSON.stringify(template.spec?.['podTemplate'] ?? {});
      const strategy = (pool.spec?.['updateStrategy'] as { type?: string } | undefined)?.type;
      if (!images.includes(`"${harnessImage}"`) || strategy !== 'Recreate') {
        throw new Error(
          `the template names ${images.slice(0, 300)}; the pool's strategy is ${String(strategy)}`,
        );
      }
      return true;
    },
    { timeoutMs, intervalMs: 500 },
  );
}

/** The image (by digest) the harness of Conversation `name` runs, from its status's pod. */
export async function harnessImageOf(
  release: InstalledRelease,
  namespace: string,
  name: string,
): Promise<string> {
  const { api, ...kind } = conversations(release.kc);
  const conversation = (await api.getNamespacedCustomObject({ ...kind, namespace, name })) as {
    status?: { sandbox?: { podName?: string } };
  };
  const podName = conversation.status?.sandbox?.podName ?? '';
  if (podName === '') throw new Error(`Conversation ${name} names no harness pod`);
  const pod = await release.kc
    .makeApiClient(CoreV1Api)
    .readNamespacedPod({ namespace, name: podName });
  return pod.status?.containerStatuses?.[0]?.imageID ?? '';
}
