/**
 * The Kubernetes door (docs/kube-api.md) on a local cluster, where the control plane runs as
 * a process on loopback rather than as the Deployment's pods: its serving certificate, and
 * config/kube-api applied with the Service made an ExternalName `localhost` (kube-apiserver
 * runs with --enable-aggregator-routing=false, so it dials the Service's DNS name, and
 * EndpointSlices refuse loopback addresses) and the APIService pointed at the door's port
 * with the certificate's CA. Used by `make dev` and the benchmarks, so both reach the
 * control plane through the path users have.
 */
import {
  ApiregistrationV1Api,
  CoreV1Api,
  type KubeConfig,
  type V1APIService,
} from '@kubernetes/client-node';
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { parse, parseAllDocuments, stringify } from 'yaml';

import { defaultBinDir, repoRoot } from './paths';
import { DevCertificateAuthority, type CertFiles } from './pki';
import { pollUntil } from './processes';

/** The APIService config/kube-api registers. */
export const KUBE_DOOR_API_SERVICE = 'v1alpha1.api.polychrome.dev';
/** The Service config/kube-api names (and the serving certificate is issued for). */
export const KUBE_DOOR_SERVICE = 'polychrome-kube-api';
/** Where config/default installs the control plane and its ServiceAccount. */
export const KUBE_DOOR_NAMESPACE = 'polychrome-system';

/** The door's serving certificate and the CA the APIService trusts. */
export interface DoorCertificate extends CertFiles {
  /** PEM of the CA that signed it (the APIService's caBundle). */
  readonly caPem: string;
}

/**
 * The door's serving certificate in `dir`, valid for the Service's DNS name in `namespace`
 * and for localhost; made once and reused.
 */
export async function ensureDoorCertificate(
  dir: string,
  namespace: string = KUBE_DOOR_NAMESPACE,
): Promise<DoorCertificate> {
  const ca = existsSync(join(dir, 'door-ca.crt'))
    ? DevCertificateAuthority.open(dir, 'door-ca')
    : await DevCertificateAuthority.create(dir, 'door-ca', 'polychrome-kube-api-local-ca');
  const files = { certPath: join(dir, 'door.crt'), keyPath: join(dir, 'door.key') };
  const serving = existsSync(files.certPath)
    ? files
    : await ca.issue({
        name: 'door',
        commonName: KUBE_DOOR_SERVICE,
        dnsNames: [`${KUBE_DOOR_SERVICE}.${namespace}.svc`, 'localhost'],
        usage: 'server',
      });
  return { ...serving, caPem: await readFile(ca.certPath, 'utf8') };
}

/**
 * config/kube-api's RBAC as kustomize puts it in `namespace`: its ServiceAccount subjects
 * name no namespace, config/default's `namespace:` fills it in. YAML documents.
 */
export async function kubeDoorRbacYaml(namespace: string = KUBE_DOOR_NAMESPACE): Promise<string> {
  const read = async (file: string): Promise<string> =>
    await readFile(join(repoRoot, 'config', 'kube-api', file), 'utf8');
  const documents = [
    ...parseAllDocuments(await read('auth-delegation.yaml')),
    ...parseAllDocuments(await read('cluster-roles.yaml')),
  ];
  return documents
    .map((d) => d.toJS() as { subjects?: { kind: string; namespace?: string }[] })
    .map((o) =>
      stringify(
        o.subjects === undefined
          ? o
          : {
              ...o,
              subjects: o.subjects.map((s) =>
                s.kind === 'ServiceAccount' ? { ...s, namespace } : s,
              ),
            },
      ),
    )
    .join('---\n');
}

/**
 * Applies config/kube-api's RBAC (the control plane's auth-delegation, the ClusterRoles)
 * with the cluster admin's kubeconfig file. Before the control plane starts: its door reads
 * kube-system/extension-apiserver-authentication when it starts.
 */
export async function applyKubeDoorRbac(
  adminKubeconfig: string,
  namespace: string = KUBE_DOOR_NAMESPACE,
): Promise<void> {
  execFileSync(
    join(defaultBinDir, 'kubectl'),
    [`--kubeconfig=${adminKubeconfig}`, 'apply', '--server-side', '-f', '-'],
    { input: await kubeDoorRbacYaml(namespace), encoding: 'utf8' },
  );
}

/** Options of {@link registerKubeDoor}. */
export interface RegisterKubeDoorOptions {
  /** The door's port on 127.0.0.1. */
  readonly port: number;
  /** The CA that signed the door's serving certificate. */
  readonly caPem: string;
  /** The namespace of the control plane's ServiceAccount and of the Service. */
  readonly namespace?: string;
  /** Wait until the APIService is Available. @default 60000 */
  readonly timeoutMs?: number;
}

/**
 * Registers a door listening on 127.0.0.1:`port` as config/kube-api does for the pods: an
 * ExternalName Service and the APIService (an existing one replaced: it names one port).
 * Resolves once kube-apiserver reports the APIService Available, so the door must be
 * serving by then, with {@link applyKubeDoorRbac} applied before it started.
 */
export async function registerKubeDoor(
  admin: KubeConfig,
  options: RegisterKubeDoorOptions,
): Promise<void> {
  const namespace = options.namespace ?? KUBE_DOOR_NAMESPACE;
  const core = admin.makeApiClient(CoreV1Api);
  await core.createNamespace({ body: { metadata: { name: namespace } } }).catch(() => undefined);
  await core.deleteNamespacedService({ name: KUBE_DOOR_SERVICE, namespace }).catch(() => undefined);
  await core.createNamespacedService({
    namespace,
    body: {
      metadata: { name: KUBE_DOOR_SERVICE, labels: { 'app.kubernetes.io/part-of': 'polychrome' } },
      spec: {
        type: 'ExternalName',
        externalName: 'localhost',
        ports: [{ name: 'https-kube', port: options.port }],
      },
    },
  });
  const declared = parse(
    await readFile(join(repoRoot, 'config', 'kube-api', 'api-service.yaml'), 'utf8'),
  ) as V1APIService;
  const registration = admin.makeApiClient(ApiregistrationV1Api);
  await registration.deleteAPIService({ name: KUBE_DOOR_API_SERVICE }).catch(() => undefined);
  await registration.createAPIService({
    body: {
      ...declared,
      spec: {
        groupPriorityMinimum: 1000,
        versionPriority: 100,
        ...declared.spec,
        service: { name: KUBE_DOOR_SERVICE, namespace, port: options.port },
        caBundle: Buffer.from(options.caPem).toString('base64'),
      },
    },
  });
  await pollUntil(
    `the APIService ${KUBE_DOOR_API_SERVICE} to be Available (is the control plane's door listening on 127.0.0.1:${options.port}?)`,
    async () => {
      const current = await registration.readAPIService({ name: KUBE_DOOR_API_SERVICE });
      const available = current.status?.conditions?.some(
        (c) => c.type === 'Available' && c.status === 'True',
      );
      return available === true ? true : undefined;
    },
    { timeoutMs: options.timeoutMs ?? 60_000, intervalMs: 250 },
  );
}

/**
 * Deletes the APIService: one that is not Available makes discovery fail and keeps
 * namespaces from deleting, so a door that stops for good takes it along.
 */
export async function unregisterKubeDoor(admin: KubeConfig): Promise<void> {
  await admin
    .makeApiClient(ApiregistrationV1Api)
    .deleteAPIService({ name: KUBE_DOOR_API_SERVICE })
    .catch(() => undefined);
}
