import { spawnSync } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readlinkSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import type { V1Container, V1PodSecurityContext } from '@kubernetes/client-node';
import type { LaunchPlan } from './local-node-container';
import {
  chrootArgv,
  containedPath,
  imageArgv,
  imageEnv,
  pinnedImage,
  runAsOf,
  RUNTIME_DIR_IN_ROOT,
  type BoundFile,
  type HostTools,
} from './local-node-image';
import type { ImagePuller } from './local-node-image-store';
import { WaitingReason } from './local-node-pod';
import { hostPathOf, podRuntimeModule, type Mount } from './local-node-runtime';

/** The node's registry mode: what pulls, and the host tools a start runs. */
export interface RegistryImages {
  puller: ImagePuller;
  tools: HostTools;
}

/** Finds `name` on this process's PATH (the host's, not the image's). */
export function hostTool(name: string): string {
  for (const dir of (process.env.PATH ?? '/usr/sbin:/usr/bin:/sbin:/bin').split(':')) {
    const path = join(dir, name);
    if (dir !== '' && existsSync(path)) return path;
  }
  throw new Error(`the local node's registry mode needs ${name} on PATH`);
}

/** A symlink's target, or undefined for anything else (a file, a directory, nothing). */
function linkTarget(path: string): string | undefined {
  try {
    return readlinkSync(path);
  } catch {
    return undefined;
  }
}

/**
 * The host tools, found on PATH, once a mount namespace of its own (what every container
 * start needs) was made and an overlay mounted in it.
 * @throws when a tool is missing, or this process may not make mount namespaces or mount
 *   an overlay (not root, or a container without CAP_SYS_ADMIN), with the tool's reason.
 */
export function hostTools(): HostTools {
  const tools = {
    sh: hostTool('sh'),
    unshare: hostTool('unshare'),
    mount: hostTool('mount'),
    mkdir: hostTool('mkdir'),
    touch: hostTool('touch'),
  };
  const dir = mkdtempSync(join(tmpdir(), 'polychrome-overlay-check-'));
  try {
    for (const d of ['lower', 'upper', 'work', 'root']) mkdirSync(join(dir, d));
    const overlay = `lowerdir=${dir}/lower,upperdir=${dir}/upper,workdir=${dir}/work`;
    const check = spawnSync(
      tools.unshare,
      [
        '--mount',
        '--propagation',
        'private',
        '--',
        tools.mount,
        '-t',
        'overlay',
        'overlay',
        '-o',
        overlay,
        join(dir, 'root'),
      ],
      { encoding: 'utf8' },
    );
    if (check.status !== 0) {
      throw new Error(
        `the local node's registry mode runs each container in a mount namespace of its own, over an overlay, and this process cannot make one (it needs root with CAP_SYS_ADMIN): ${(check.stderr || String(check.error ?? check.status)).trim()}`,
      );
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  return tools;
}

/** What one start of a registry container needs from its pod. */
export interface ImageLaunchInput {
  registry: RegistryImages;
  container: V1Container;
  podSecurity: V1PodSecurityContext | undefined;
  /** The container's own directory (its overlay's layers) under the pod's directory. */
  dir: string;
  /** The pod's name and address, for its /etc/hosts. */
  hostname: string;
  podIP: string;
  /** The pod's resolved variables (the kubelet's and the container's). */
  env: Readonly<Record<string, string>>;
  mounts: readonly Mount[];
  /** The node's cluster DNS records file, when it keeps them. */
  dnsFile?: string;
}

/**
 * Pulls the container's image and plans its start (hack/lib/local-node-image.ts): an
 * image that is not pinned, or that cannot be pulled, is the kubelet's ErrImagePull with
 * the reason; a user the image cannot name, or root under runAsNonRoot, is a
 * CreateContainerConfigError. The container's writable layer is emptied, as a new
 * container starts from its image. It sees its pod's /etc/hosts (the kubelet's managed
 * file) and, read-only under {@link RUNTIME_DIR_IN_ROOT}, the node's pod runtime module
 * and cluster DNS records, which its environment names.
 */
export async function prepareImageLaunch(input: ImageLaunchInput): Promise<LaunchPlan> {
  const { container } = input;
  const image = container.image ?? '';
  const pinned = pinnedImage(image);
  if (!pinned.ok) return { ok: false, reason: WaitingReason.ErrImagePull, message: pinned.message };
  let pulled;
  try {
    pulled = await input.registry.puller.pull(pinned.image);
  } catch (err: unknown) {
    const why = err instanceof Error ? err.message : String(err);
    return {
      ok: false,
      reason: WaitingReason.ErrImagePull,
      message: `failed to pull image "${image}": ${why}`,
    };
  }
  const runAs = runAsOf(container, input.podSecurity, pulled.config, pulled);
  if (!runAs.ok) {
    return { ok: false, reason: WaitingReason.CreateContainerConfigError, message: runAs.message };
  }
  const layers = { upper: join(input.dir, 'upper'), work: join(input.dir, 'work') };
  const root = join(input.dir, 'root');
  rmSync(layers.upper, { recursive: true, force: true });
  rmSync(layers.work, { recursive: true, force: true });
  for (const d of [layers.upper, layers.work, root]) mkdirSync(d, { recursive: true });
  const hosts = join(input.dir, 'hosts');
  writeFileSync(
    hosts,
    `127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n${input.podIP}\t${input.hostname}\n`,
    { mode: 0o644 },
  );
  const files: BoundFile[] = [
    { path: '/etc/hosts', hostPath: hosts, directory: false },
    {
      path: `${RUNTIME_DIR_IN_ROOT}/${basename(podRuntimeModule)}`,
      hostPath: podRuntimeModule,
      directory: false,
    },
    ...(input.dnsFile !== undefined
      ? [{ path: `${RUNTIME_DIR_IN_ROOT}/dns`, hostPath: dirname(input.dnsFile), directory: true }]
      : []),
  ];
  // Mount destinations resolved in the container's view, never outside its root: a link
  // the image ships, or one a container left in a volume, is followed within the root.
  const view = (path: string): string => {
    const holder = input.mounts.find((m) =>
      path.startsWith(`${m.mountPath.replace(/\/+$/u, '')}/`),
    );
    return holder === undefined ? join(pulled.root, path) : hostPathOf(path, input.mounts);
  };
  const inImage = (path: string): string => containedPath(path, (p) => linkTarget(view(p)));
  const mounts = input.mounts.map((m) => ({ ...m, mountPath: inImage(m.mountPath) }));
  const bound = files.map((f) => ({ ...f, path: inImage(f.path) }));
  const fileMounts = new Set(
    mounts
      .filter((m) => existsSync(m.hostPath) && !statSync(m.hostPath).isDirectory())
      .map((m) => m.mountPath),
  );
  const argv = chrootArgv(
    {
      lower: pulled.root,
      ...layers,
      root,
      mounts,
      files: bound,
      fileMounts,
      readOnlyRoot: container.securityContext?.readOnlyRootFilesystem === true,
      workingDir: container.workingDir ?? (pulled.config.WorkingDir || '/'),
      runAs: runAs.runAs,
      argv: imageArgv(container, pulled.config),
    },
    input.registry.tools,
  );
  return {
    ok: true,
    launch: {
      argv,
      env: imageEnv(pulled.config, input.env),
      imageID: `${image.split('@')[0] ?? image}@${pinned.image.digest}`,
      chroot: {
        preload: `${RUNTIME_DIR_IN_ROOT}/${basename(podRuntimeModule)}`,
        ...(input.dnsFile !== undefined
          ? { dnsFile: `${RUNTIME_DIR_IN_ROOT}/dns/${basename(input.dnsFile)}` }
          : {}),
      },
    },
  };
}
