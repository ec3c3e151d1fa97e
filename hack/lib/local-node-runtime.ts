import { isAbsolute, join } from 'node:path';
import { repoRoot } from './paths';

/**
 * A container's view of its pod here: hack's local node runs a container as a process on
 * the machine's own network and file system, so what a container runtime gives it with
 * namespaces (its own address, cluster DNS, volumes at their mount paths) comes from the
 * environment built here and from the module it preloads, hack/lib/local-pod-runtime.mjs.
 */

/** A volume mounted into a container: what the container names, where it is here. */
export interface Mount {
  /** The container's path (`volumeMounts[].mountPath`). */
  mountPath: string;
  /** The directory (or, with subPath, file) on this machine. */
  hostPath: string;
  readOnly: boolean;
}

/** Where the pod's processes find the Kubernetes API (the kubelet's service variables). */
export interface ApiServerAddress {
  host: string;
  port: string;
}

/** What {@link podProcessEnv} needs besides the container's own environment. */
export interface PodRuntime {
  podIP: string;
  namespace: string;
  mounts: readonly Mount[];
  /** The node's cluster DNS records (hack/lib/local-node-dns.ts); none: no cluster DNS. */
  dnsFile?: string;
  /** KUBERNETES_SERVICE_HOST and _PORT; none: not set. */
  apiServer?: ApiServerAddress;
  /**
   * Directories of this machine no mount shadows (the working directory, the node's own
   * directory): host and pod paths share one file system here.
   * @default none
   */
  hostRoots?: readonly string[];
  /**
   * The path of the preload module as the process sees it (a container run from its image
   * sees it bound into its root). @default {@link podRuntimeModule}
   */
  preload?: string;
}

/** The module every pod process preloads. */
export const podRuntimeModule = join(repoRoot, 'hack', 'lib', 'local-pod-runtime.mjs');

/** Where `path` (a path in the container) is on this machine, or `path` when no mount holds it. */
export function hostPathOf(path: string, mounts: readonly Mount[]): string {
  if (!isAbsolute(path)) return path;
  let best: Mount | undefined;
  for (const mount of mounts) {
    const from = mount.mountPath.replace(/\/+$/, '');
    const inside = path === from || path.startsWith(`${from}/`);
    if (inside && (best === undefined || from.length > best.mountPath.length)) best = mount;
  }
  if (best === undefined) return path;
  return best.hostPath + path.slice(best.mountPath.replace(/\/+$/, '').length);
}

/**
 * The environment with every path under a mount rewritten to where it is here, for code
 * the preload cannot reach (native modules such as LevelDB open their paths themselves).
 * A value is rewritten when it is an absolute path, or a list of them separated by `,` or
 * `:` (as in STATE_PREVIOUS_SIGNING_KEY_FILES or PATH); any other value is left as it is.
 */
export function rewriteEnvPaths(
  env: Readonly<Record<string, string>>,
  mounts: readonly Mount[],
): Record<string, string> {
  if (mounts.length === 0) return { ...env };
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(env)) {
    const separator = value.includes(',') ? ',' : ':';
    const parts = value.split(separator);
    out[name] = parts.every((part) => part === '' || isAbsolute(part.trim()))
      ? parts.map((part) => (part === '' ? part : hostPathOf(part.trim(), mounts))).join(separator)
      : value;
  }
  return out;
}

/**
 * Where the images keep their files: the WORKDIR of harness/, operator/ and state/'s
 * Dockerfiles. An image the node maps to a local command is this checkout, so a path the
 * pod names under it (config/sandbox's `HARNESS_MODEL_SCRIPT`,
 * /app/harness/model/demo-script.yaml) is the same path under the node's working directory.
 */
export const IMAGE_WORKDIR = '/app';

/**
 * A container's mounts with the image's files added: {@link IMAGE_WORKDIR} at `cwd` when
 * its command comes from the node's image table (not from a pod's own command annotation,
 * which names no image) and no volume of its own is mounted there. Writable, as `cwd` holds
 * what other mounts write to (a hostPath volume under .local/); the pod's own
 * readOnlyRootFilesystem is not imitated here.
 */
export function launchMounts(
  mounts: readonly Mount[],
  source: 'annotation' | 'image',
  cwd: string,
): Mount[] {
  const own = mounts.some((m) => m.mountPath.replace(/\/+$/, '') === IMAGE_WORKDIR);
  if (source !== 'image' || own) return [...mounts];
  return [...mounts, { mountPath: IMAGE_WORKDIR, hostPath: cwd, readOnly: false }];
}

/** A NODE_OPTIONS word: quoted when it holds a space or a quote (Node's own rule). */
export function nodeOptionWord(word: string): string {
  return /[\s"\\]/.test(word) ? `"${word.replace(/(["\\])/g, '\\$1')}"` : word;
}

/**
 * The environment a container's process starts with: the kubelet's service variables
 * (the container's own `env` wins over them, as with the kubelet), TMPDIR when a volume is
 * mounted at /tmp, the container's
 * environment with mounted paths rewritten, and the preload of
 * hack/lib/local-pod-runtime.mjs added to NODE_OPTIONS with what it needs.
 */
export function podProcessEnv(
  env: Readonly<Record<string, string>>,
  runtime: PodRuntime,
): Record<string, string> {
  const rewritten = rewriteEnvPaths(env, runtime.mounts);
  const own = rewritten.NODE_OPTIONS;
  // A volume at /tmp is the container's temp directory for native code too (esbuild, under
  // tsx, writes there and Node reads it back).
  const tmp = runtime.mounts.find((m) => m.mountPath.replace(/\/+$/, '') === '/tmp');
  return {
    ...(tmp !== undefined ? { TMPDIR: tmp.hostPath } : {}),
    ...(runtime.apiServer !== undefined
      ? {
          KUBERNETES_SERVICE_HOST: runtime.apiServer.host,
          KUBERNETES_SERVICE_PORT: runtime.apiServer.port,
          KUBERNETES_SERVICE_PORT_HTTPS: runtime.apiServer.port,
        }
      : {}),
    ...rewritten,
    NODE_OPTIONS: [`--import ${nodeOptionWord(runtime.preload ?? podRuntimeModule)}`, own]
      .filter((part) => part !== undefined && part !== '')
      .join(' '),
    POLYCHROME_LOCAL_POD: JSON.stringify({
      podIP: runtime.podIP,
      namespace: runtime.namespace,
      ...(runtime.dnsFile !== undefined ? { dnsFile: runtime.dnsFile } : {}),
      mounts: runtime.mounts.map(({ mountPath, hostPath, readOnly }) => ({
        mountPath,
        hostPath,
        ...(readOnly ? { readOnly: true } : {}),
      })),
      ...(runtime.hostRoots !== undefined ? { hostRoots: runtime.hostRoots } : {}),
    }),
  };
}
