/**
 * What test/integration/dev-stack.test.ts reads of the install `make dev` made: who made each
 * Secret, what onboarding installed in a namespace, who owns a field of a Secret, and the
 * environment a pod's process runs with.
 */
import {
  CoreV1Api,
  KubernetesObjectApi,
  type KubeConfig,
  type V1Secret,
} from '@kubernetes/client-node';
import { readdirSync, readFileSync } from 'node:fs';

import { ONBOARDED_LABEL, ONBOARDED_REFS } from '../../../operator/onboarding/catalog';

const MANAGED_BY = 'app.kubernetes.io/managed-by';

/** Every Secret of `namespace`, by name, with its `app.kubernetes.io/managed-by` label. */
export async function secretManagers(
  kc: KubeConfig,
  namespace: string,
): Promise<Record<string, string>> {
  const secrets = await kc.makeApiClient(CoreV1Api).listNamespacedSecret({ namespace });
  return Object.fromEntries(
    secrets.items.map((s) => [s.metadata?.name ?? '', s.metadata?.labels?.[MANAGED_BY] ?? '']),
  );
}

/** The objects of onboarding's names found in `namespace`, as `Kind name: managed-by`. */
export async function onboardedObjects(kc: KubeConfig, namespace: string): Promise<string[]> {
  const objects = KubernetesObjectApi.makeApiClient(kc);
  const found: string[] = [];
  for (const ref of ONBOARDED_REFS) {
    const obj = await objects
      .read({ apiVersion: ref.apiVersion, kind: ref.kind, metadata: { name: ref.name, namespace } })
      .catch(() => undefined);
    if (obj !== undefined) {
      found.push(`${ref.kind} ${ref.name}: ${obj.metadata?.labels?.[MANAGED_BY] ?? ''}`);
    }
  }
  return found;
}

/** `ONBOARDED_REFS` as {@link onboardedObjects} finds them when onboarding installed them. */
export const ALL_ONBOARDED = ONBOARDED_REFS.map(
  (ref) => `${ref.kind} ${ref.name}: ${ONBOARDED_LABEL.value}`,
);

/** The field managers that own `data.<key>` of `secret`. */
export function dataKeyOwners(secret: V1Secret, key: string): string[] {
  return (secret.metadata?.managedFields ?? [])
    .filter((entry) => {
      const fields = entry.fieldsV1 as { 'f:data'?: Record<string, unknown> } | undefined;
      return fields?.['f:data']?.[`f:${key}`] !== undefined;
    })
    .map((entry) => entry.manager ?? '');
}

/** The local node's process for the pod at `podIP` running `entry`: its pid and environment. */
export function podProcess(
  podIP: string,
  entry: string,
): { pid: number; env: Record<string, string> } {
  for (const pid of readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    try {
      const cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
      const environ = readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0');
      const view = environ.find((v) => v.startsWith('POLYCHROME_LOCAL_POD='));
      if (cmdline.includes(entry) && view?.includes(`"podIP":"${podIP}"`) === true) {
        const env = environ
          .filter((v) => v.includes('='))
          .map((v): [string, string] => [v.slice(0, v.indexOf('=')), v.slice(v.indexOf('=') + 1)]);
        return { pid: Number(pid), env: Object.fromEntries(env) };
      }
    } catch {
      // Gone meanwhile, or not ours to read.
    }
  }
  throw new Error(`no process runs ${entry} for the pod at ${podIP}`);
}
