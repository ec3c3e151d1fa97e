import {
  ApiException,
  loadAllYaml,
  ApiextensionsV1Api,
  CustomObjectsApi,
  type KubeConfig,
  type V1CustomResourceDefinition,
} from '@kubernetes/client-node';
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { pollUntil } from './processes';

/** Reads every CustomResourceDefinition in the YAML files of `dirs` (sorted by file name). */
export async function readCrds(dirs: readonly string[]): Promise<V1CustomResourceDefinition[]> {
  const crds: V1CustomResourceDefinition[] = [];
  for (const dir of dirs) {
    let files: string[];
    try {
      files = (await readdir(dir)).filter((f) => /\.ya?ml$/.test(f) && f !== 'kustomization.yaml');
    } catch (err: unknown) {
      // Like envtest's ErrorIfCRDPathMissing: a missing folder is a broken checkout, not "no CRDs".
      throw new Error(`CRD folder ${dir} is missing: run 'make generate'`, { cause: err });
    }
    for (const file of files.sort()) {
      // loadAllYaml maps `x-kubernetes-*` keys to the client's model names; a plain YAML
      // parse would let the client's serializer drop them (and with them the CEL rules).
      const docs: unknown[] = loadAllYaml(await readFile(join(dir, file), 'utf8'));
      for (const obj of docs) {
        if (isCrd(obj)) crds.push(obj);
      }
    }
  }
  if (crds.length === 0) throw new Error(`no CustomResourceDefinition found in ${dirs.join(', ')}`);
  return crds;
}

function isCrd(value: unknown): value is V1CustomResourceDefinition {
  return (
    typeof value === 'object' &&
    value !== null &&
    'kind' in value &&
    value.kind === 'CustomResourceDefinition' &&
    'spec' in value
  );
}

function isStatus(err: unknown, code: number): boolean {
  return err instanceof ApiException && err.code === code;
}

/**
 * Creates each CRD, or replaces it when it exists (never client-side apply: the
 * agent-sandbox CRDs are too large for the last-applied annotation), then waits until
 * every one is Established and its resource answers a list request.
 */
export async function installCrds(
  kc: KubeConfig,
  crds: readonly V1CustomResourceDefinition[],
): Promise<void> {
  const api = kc.makeApiClient(ApiextensionsV1Api);
  const objects = kc.makeApiClient(CustomObjectsApi);
  for (const crd of crds) {
    const name = crd.metadata?.name;
    if (name === undefined) throw new Error('a CRD without metadata.name');
    try {
      await api.createCustomResourceDefinition({ body: crd });
    } catch (err: unknown) {
      if (!isStatus(err, 409)) throw err;
      const current = await api.readCustomResourceDefinition({ name });
      await api.replaceCustomResourceDefinition({
        name,
        body: {
          ...crd,
          metadata: { ...crd.metadata, resourceVersion: current.metadata?.resourceVersion },
        },
      });
    }
  }
  for (const crd of crds) {
    const name = crd.metadata?.name ?? '';
    const { group, names } = crd.spec;
    const version =
      crd.spec.versions.find((v) => v.storage)?.name ?? crd.spec.versions[0]?.name ?? '';
    await pollUntil(`CRD ${name} to be established and served`, async () => {
      const current = await api.readCustomResourceDefinition({ name });
      const established = current.status?.conditions?.some(
        (c) => c.type === 'Established' && c.status === 'True',
      );
      if (established !== true) return undefined;
      await objects.listClusterCustomObject({ group, version, plural: names.plural, limit: 1 });
      return true;
    });
  }
}
