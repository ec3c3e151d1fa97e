import { readFile } from 'node:fs/promises';
import type { CoreV1Api, V1PersistentVolume } from '@kubernetes/client-node';
import type { DevCerts } from './dev-certs';
import type { DoorCertificate } from './kube-door';
import { isApiError } from './local-node-pod-worker';

/**
 * What `make dev` puts beside hack/dev/base, which the base leaves to its installer
 * (config/control-plane/deployment.yaml and config/state/stateful-set.yaml say what each
 * holds): the Secrets, from this machine's dev certificates and keys, and the volume the
 * state plane's claim binds to.
 */

/** The namespace of the base (hack/dev/base sets it). */
export const DEV_BASE_NAMESPACE = 'polychrome-system';

/** The claim the state StatefulSet's volumeClaimTemplate `journal` makes for its pod 0. */
export const STATE_JOURNAL_CLAIM = 'journal-polychrome-state-0';

/** A Secret to write: its name and its data as text, by key. */
export interface DevSecret {
  name: string;
  data: Readonly<Record<string, string>>;
}

/** The files the Secrets are read from. */
export interface DevSecretSources {
  certs: DevCerts;
  door: DoorCertificate;
  /** The approval private key (PKCS#8 PEM file). */
  approvalKeyPath: string;
  /** The harness CA's certificate (PEM file): the control plane trusts the harnesses it signed. */
  harnessCaPath: string;
}

/** Every Secret the base's pods mount, by the names and keys config/ gives them. */
export async function devBaseSecrets(sources: DevSecretSources): Promise<DevSecret[]> {
  const text = (path: string): Promise<string> => readFile(path, 'utf8');
  const { certs, door } = sources;
  const ca = await text(certs.ca.certPath);
  return [
    {
      name: 'polychrome-state-tls',
      data: {
        'ca.crt': ca,
        'tls.crt': await text(certs.server.certPath),
        'tls.key': await text(certs.server.keyPath),
      },
    },
    { name: 'polychrome-state-signing-key', data: { 'signing-key': await text(certs.signingKey) } },
    { name: 'polychrome-state-records-key', data: { 'records-key': await text(certs.recordsKey) } },
    {
      name: 'polychrome-control-plane-tls',
      data: {
        'ca.crt': ca,
        'tls.crt': await text(certs.controlPlane.certPath),
        'tls.key': await text(certs.controlPlane.keyPath),
      },
    },
    { name: 'polychrome-harness-ca', data: { 'ca.crt': await text(sources.harnessCaPath) } },
    { name: 'polychrome-approval-key', data: { 'key.pem': await text(sources.approvalKeyPath) } },
    {
      name: 'polychrome-kube-api-tls',
      data: { 'tls.crt': await text(door.certPath), 'tls.key': await text(door.keyPath) },
    },
  ];
}

/** Creates each Secret, or replaces its data when it exists. */
export async function applySecrets(
  core: CoreV1Api,
  namespace: string,
  secrets: readonly DevSecret[],
): Promise<void> {
  for (const secret of secrets) {
    const body = {
      metadata: {
        name: secret.name,
        namespace,
        labels: {
          'app.kubernetes.io/part-of': 'polychrome',
          'app.kubernetes.io/managed-by': 'make-dev',
        },
      },
      stringData: { ...secret.data },
    };
    try {
      await core.createNamespacedSecret({ namespace, body });
    } catch (err: unknown) {
      if (!isApiError(err, 409)) throw err;
      await core.replaceNamespacedSecret({ name: secret.name, namespace, body });
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
      labels: {
        'app.kubernetes.io/part-of': 'polychrome',
        'app.kubernetes.io/managed-by': 'make-dev',
      },
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
