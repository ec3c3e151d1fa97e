import type { V1Container } from '@kubernetes/client-node';

/** The pod's own values that `fieldRef` can name (the downward API). */
export interface PodFields {
  name: string;
  namespace: string;
  uid: string;
  nodeName: string;
  podIP: string;
  hostIP: string;
  serviceAccountName?: string;
  labels?: Readonly<Record<string, string>>;
  annotations?: Readonly<Record<string, string>>;
}

/**
 * Secrets and ConfigMaps of the pod's namespace, by name, with their data as text
 * (Secret values already base64-decoded). A name that is absent does not exist.
 */
export interface EnvSources {
  secrets: ReadonlyMap<string, Readonly<Record<string, string>>>;
  configMaps: ReadonlyMap<string, Readonly<Record<string, string>>>;
}

/** The Secrets and ConfigMaps a container's `env` and `envFrom` name. */
export function referencedObjects(container: V1Container): {
  secrets: Set<string>;
  configMaps: Set<string>;
} {
  const secrets = new Set<string>();
  const configMaps = new Set<string>();
  for (const source of container.envFrom ?? []) {
    if (source.secretRef?.name !== undefined) secrets.add(source.secretRef.name);
    if (source.configMapRef?.name !== undefined) configMaps.add(source.configMapRef.name);
  }
  for (const variable of container.env ?? []) {
    const from = variable.valueFrom;
    if (from?.secretKeyRef?.name !== undefined) secrets.add(from.secretKeyRef.name);
    if (from?.configMapKeyRef?.name !== undefined) configMaps.add(from.configMapKeyRef.name);
  }
  return { secrets, configMaps };
}

/**
 * The kubelet's expansion of a variable's `value`: `$(NAME)` becomes the value of NAME when
 * it is defined earlier (by envFrom or an earlier env entry), and stays as written when it
 * is not; `$$` is a literal `$`, so `$$(NAME)` stays `$(NAME)`.
 */
export function expandReferences(value: string, defined: Readonly<Record<string, string>>): string {
  return value.replace(
    /\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)/g,
    (match, name: string | undefined) => {
      if (name === undefined) return '$';
      return Object.hasOwn(defined, name) ? (defined[name] ?? '') : match;
    },
  );
}

/** A container's environment, or the kubelet's message for why it cannot be built. */
export type EnvResult = { ok: true; env: Record<string, string> } | { ok: false; message: string };

const labelPath = /^metadata\.(labels|annotations)\['(.+)'\]$/;

/** The value of a downward-API field path, or undefined when the path is not supported. */
export function fieldValue(fields: PodFields, path: string): string | undefined {
  switch (path) {
    case 'metadata.name':
      return fields.name;
    case 'metadata.namespace':
      return fields.namespace;
    case 'metadata.uid':
      return fields.uid;
    case 'spec.nodeName':
      return fields.nodeName;
    case 'spec.serviceAccountName':
      return fields.serviceAccountName ?? 'default';
    case 'status.podIP':
    case 'status.podIPs':
      return fields.podIP;
    case 'status.hostIP':
    case 'status.hostIPs':
      return fields.hostIP;
    default: {
      const match = labelPath.exec(path);
      if (match === null) return undefined;
      const map = match[1] === 'labels' ? fields.labels : fields.annotations;
      // A missing label resolves to the empty string, as with the kubelet.
      return map?.[match[2] ?? ''] ?? '';
    }
  }
}

/**
 * Builds a container's environment the way the kubelet does: `envFrom` sources in
 * order (later ones win, each key with the source's prefix), then `env` entries in
 * order (they win over `envFrom`). A missing object or key that is not `optional` fails
 * the whole container with the kubelet's message, so the caller reports
 * CreateContainerConfigError. `$(VAR)` references in `value` are expanded as the kubelet
 * expands them (see {@link expandReferences}).
 */
export function resolveEnv(
  container: V1Container,
  fields: PodFields,
  sources: EnvSources,
): EnvResult {
  const env: Record<string, string> = {};
  const ns = fields.namespace;
  for (const source of container.envFrom ?? []) {
    const prefix = source.prefix ?? '';
    const ref = source.secretRef ?? source.configMapRef;
    if (ref?.name === undefined) continue;
    const isSecret = source.secretRef !== undefined;
    const data = (isSecret ? sources.secrets : sources.configMaps).get(ref.name);
    if (data === undefined) {
      if (ref.optional === true) continue;
      return { ok: false, message: `${isSecret ? 'secret' : 'configmap'} "${ref.name}" not found` };
    }
    for (const [key, value] of Object.entries(data)) env[prefix + key] = value;
  }
  for (const variable of container.env ?? []) {
    const from = variable.valueFrom;
    if (from === undefined) {
      env[variable.name] = expandReferences(variable.value ?? '', env);
      continue;
    }
    const keyRef = from.secretKeyRef ?? from.configMapKeyRef;
    if (keyRef !== undefined) {
      const isSecret = from.secretKeyRef !== undefined;
      const objectName = keyRef.name ?? '';
      const data = (isSecret ? sources.secrets : sources.configMaps).get(objectName);
      const value = data?.[keyRef.key];
      if (value !== undefined) {
        env[variable.name] = value;
      } else if (keyRef.optional !== true) {
        const kind = isSecret ? 'secret' : 'configmap';
        return {
          ok: false,
          message:
            data === undefined
              ? `${kind} "${objectName}" not found`
              : `couldn't find key ${keyRef.key} in ${isSecret ? 'Secret' : 'ConfigMap'} ${ns}/${objectName}`,
        };
      }
      continue;
    }
    if (from.fieldRef !== undefined) {
      const value = fieldValue(fields, from.fieldRef.fieldPath);
      if (value === undefined) {
        return {
          ok: false,
          message: `env ${variable.name}: the local node does not support fieldPath "${from.fieldRef.fieldPath}"`,
        };
      }
      env[variable.name] = value;
      continue;
    }
    return {
      ok: false,
      message: `env ${variable.name}: the local node supports value, secretKeyRef, configMapKeyRef and fieldRef only`,
    };
  }
  return { ok: true, env };
}
