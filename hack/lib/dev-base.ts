import { readFile } from 'node:fs/promises';
import type { CoreV1Api, V1PersistentVolume } from '@kubernetes/client-node';
import { PROVISIONED_LABEL, SecretName } from '../../operator/provision/catalog';
import type { DoorCertificate } from './kube-door';
import { isApiError } from './local-node-pod-worker';

/**
 * What `make dev` puts beside hack/dev/base that the base leaves to its installer and the
 * provisioner does not make: the Kubernetes door's serving certificate (cert-manager's part
 * in a cluster, config/components/kube-api-cert-manager; there is no cert-manager here) and
 * the volume the state plane's claim binds to (a storage class's part in a cluster). Every
 * other Secret the planes mount is the provisioner's (docs/operator.md, "Installing: what
 * the operator provisions").
 */

/** The namespace of the base (hack/dev/base sets it). */
export const DEV_BASE_NAMESPACE = 'polychrome-system';

/** The claim the state StatefulSet's volumeClaimTemplate `journal` makes for its pod 0. */
export const STATE_JOURNAL_CLAIM = 'journal-polychrome-state-0';

/** The Secret config/components/kube-api mounts: the door's `tls.crt` and `tls.key`. */
export const DOOR_TLS_SECRET = 'polychrome-kube-api-tls';

/** The label value of what `make dev` itself writes (the door's Secret, the volume). */
export const MAKE_DEV_MANAGER = 'make-dev';

const MAKE_DEV_LABELS = {
  'app.kubernetes.io/part-of': 'polychrome',
  [PROVISIONED_LABEL.key]: MAKE_DEV_MANAGER,
} as const;

/**
 * Creates the door's Secret in `namespace` from `door`'s files, or replaces its data, as
 * cert-manager writes it in a cluster. Labelled as `make dev`'s own.
 */
export async function applyDoorSecret(
  core: CoreV1Api,
  namespace: string,
  door: DoorCertificate,
): Promise<void> {
  const body = {
    metadata: { name: DOOR_TLS_SECRET, namespace, labels: MAKE_DEV_LABELS },
    type: 'kubernetes.io/tls',
    stringData: {
      'tls.crt': await readFile(door.certPath, 'utf8'),
      'tls.key': await readFile(door.keyPath, 'utf8'),
    },
  };
  try {
    await core.createNamespacedSecret({ namespace, body });
  } catch (err: unknown) {
    if (!isApiError(err, 409)) throw err;
    await core.replaceNamespacedSecret({ name: DOOR_TLS_SECRET, namespace, body });
  }
}

/**
 * Refuses a cluster an earlier `make dev` set up, which wrote the provisioner's Secrets
 * itself (labelled `make-dev`): the provisioner would check them as a user's and never
 * write them, and the conversations' namespace holds hand-applied sandbox objects that
 * onboarding refuses to adopt.
 *
 * @throws Error naming the Secret and `make dev-reset`, which starts over.
 */
export async function assertNoHandMadeSecrets(core: CoreV1Api, namespace: string): Promise<void> {
  for (const name of Object.values(SecretName)) {
    let manager: string | undefined;
    try {
      const secret = await core.readNamespacedSecret({ name, namespace });
      manager = secret.metadata?.labels?.[PROVISIONED_LABEL.key];
    } catch (err: unknown) {
      if (isApiError(err, 404)) continue;
      throw err;
    }
    if (manager === MAKE_DEV_MANAGER) {
      throw new Error(
        `dev: Secret ${namespace}/${name} was written by an earlier make dev, before the provisioner made the install's Secrets; run make dev-reset to start over (it deletes the local cluster, its conversations and journals)`,
      );
    }
  }
}

/**
 * The state plane's volume: a hostPath PersistentVolume on this machine, bound ahead to
 * the StatefulSet's claim, kept (Retain) when the claim goes, so journals and records
 * outlive `make dev-down` and a deleted StatefulSet alike.
 */
export function stateJournalVolume(path: string): V1PersistentVolume {
  return {
    apiVersion: 'v1',
    kind: 'PersistentVolume',
    metadata: {
      name: 'polychrome-dev-state-journal',
      labels: MAKE_DEV_LABELS,
    },
    spec: {
      capacity: { storage: '10Gi' },
      accessModes: ['ReadWriteOnce'],
      persistentVolumeReclaimPolicy: 'Retain',
      storageClassName: '',
      claimRef: { namespace: DEV_BASE_NAMESPACE, name: STATE_JOURNAL_CLAIM },
      hostPath: { path, type: 'DirectoryOrCreate' },
    },
  };
}

/**
 * Creates the volume unless it exists. One left Released by a deleted claim is offered to
 * the claim's name again (its claimRef loses the old claim's uid), as an admin reclaims a
 * Retain volume by hand; its data stays.
 */
export async function ensureVolume(core: CoreV1Api, volume: V1PersistentVolume): Promise<void> {
  const name = volume.metadata?.name ?? '';
  try {
    await core.createPersistentVolume({ body: volume });
    return;
  } catch (err: unknown) {
    if (!isApiError(err, 409)) throw err;
  }
  const current = await core.readPersistentVolume({ name });
  if (current.status?.phase !== 'Released') return;
  await core.replacePersistentVolume({
    name,
    body: { ...current, spec: { ...current.spec, claimRef: volume.spec?.claimRef } },
  });
}
