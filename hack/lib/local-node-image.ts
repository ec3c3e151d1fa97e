import { posix } from 'node:path';
import type { V1Container, V1PodSecurityContext } from '@kubernetes/client-node';
import type { Mount } from './local-node-runtime';

/**
 * The local node's registry mode (hack/lib/local-node-image-store.ts pulls): a container
 * whose image is a registry reference pinned by digest runs that image's own files, under
 * `chroot` into an overlay of its unpacked root, as a container runtime would run it. What
 * is here is pure: which reference, which argv, environment, working directory and user
 * (the image config and the pod, in the kubelet's order), and the one host command that
 * sets the container's mount namespace up and starts it.
 */

/** A registry reference pinned by digest: `host[:port]/repository@sha256:<64 hex>`. */
export interface PinnedImage {
  /** The reference as the pod names it. */
  ref: string;
  /** `sha256:<hex>`: what crane verifies what it pulls against. */
  digest: string;
}

/** The parts of an OCI image config the runtime reads (`config` of the config blob). */
export interface ImageConfig {
  Entrypoint?: string[] | null;
  Cmd?: string[] | null;
  Env?: string[] | null;
  WorkingDir?: string;
  User?: string;
}

/** A reference pinned by digest, or why the image cannot be pulled here. */
export function pinnedImage(
  image: string,
): { ok: true; image: PinnedImage } | { ok: false; message: string } {
  const m = /^([a-z0-9.-]+(?::\d+)?)\/([a-z0-9._/-]+)@(sha256:[0-9a-f]{64})$/u.exec(image);
  if (m === null) {
    return {
      ok: false,
      message: `image "${image}" is not a registry reference pinned by digest (host[:port]/repository@sha256:<64 hex>): the local node pulls only pinned images`,
    };
  }
  return { ok: true, image: { ref: image, digest: m[3] ?? '' } };
}

/** The uid and gid a container runs as. */
export interface RunAs {
  uid: number;
  gid: number;
}

/** `/etc/passwd` or `/etc/group` lines: name to id (and, for passwd, primary gid). */
function idTable(text: string): Map<string, { id: number; gid?: number }> {
  const table = new Map<string, { id: number; gid?: number }>();
  for (const line of text.split('\n')) {
    const [name, , id, gid] = line.split(':');
    if (name === undefined || id === undefined || !/^\d+$/u.test(id)) continue;
    table.set(name, {
      id: Number(id),
      ...(gid !== undefined && /^\d+$/u.test(gid) ? { gid: Number(gid) } : {}),
    });
  }
  return table;
}

/**
 * Who the container runs as, as the kubelet and the runtime decide: the container's
 * `securityContext.runAsUser`/`runAsGroup`, else the pod's, else the image's `User`
 * (`uid`, `uid:gid`, `name` or `name:group`, names looked up in the image's own
 * /etc/passwd and /etc/group), else root. `runAsNonRoot` with uid 0 is refused, as the
 * kubelet refuses it (CreateContainerConfigError).
 */
export function runAsOf(
  container: V1Container,
  pod: V1PodSecurityContext | undefined,
  config: ImageConfig,
  files: { passwd: string; group: string },
): { ok: true; runAs: RunAs } | { ok: false; message: string } {
  const [userPart = '', groupPart] = (config.User ?? '').split(':');
  const passwd = idTable(files.passwd);
  const groups = idTable(files.group);
  let imageUid = 0;
  let imageGid: number | undefined;
  if (userPart !== '') {
    const entry = /^\d+$/u.test(userPart) ? undefined : passwd.get(userPart);
    if (!/^\d+$/u.test(userPart) && entry === undefined) {
      return { ok: false, message: `image user "${userPart}" is not in the image's /etc/passwd` };
    }
    imageUid = entry?.id ?? Number(userPart);
    imageGid = entry?.gid ?? passwd.get(userPart)?.gid;
  }
  if (groupPart !== undefined && groupPart !== '') {
    const group = /^\d+$/u.test(groupPart) ? Number(groupPart) : groups.get(groupPart)?.id;
    if (group === undefined) {
      return { ok: false, message: `image group "${groupPart}" is not in the image's /etc/group` };
    }
    imageGid = group;
  }
  if (imageGid === undefined) {
    imageGid = [...passwd.values()].find((e) => e.id === imageUid)?.gid ?? 0;
  }
  const own = container.securityContext;
  const uid = own?.runAsUser ?? pod?.runAsUser ?? imageUid;
  const gid = own?.runAsGroup ?? pod?.runAsGroup ?? imageGid;
  if ((own?.runAsNonRoot ?? pod?.runAsNonRoot) === true && uid === 0) {
    return { ok: false, message: 'container has runAsNonRoot and image will run as root' };
  }
  return { ok: true, runAs: { uid, gid } };
}

/**
 * The container's argv, as Kubernetes combines it with the image: `command` replaces the
 * Entrypoint (and drops the Cmd), `args` replace the Cmd.
 */
export function imageArgv(container: V1Container, config: ImageConfig): string[] {
  const entrypoint = container.command ?? config.Entrypoint ?? [];
  const args = container.args ?? (container.command !== undefined ? [] : (config.Cmd ?? []));
  return [...entrypoint, ...args];
}

/** The image's `Env` (`NAME=value` lines) under the pod's variables: the pod's win. */
export function imageEnv(
  config: ImageConfig,
  podEnv: Readonly<Record<string, string>>,
): Record<string, string> {
  const env: Record<string, string> = {};
  for (const line of config.Env ?? []) {
    const at = line.indexOf('=');
    if (at > 0) env[line.slice(0, at)] = line.slice(at + 1);
  }
  return { ...env, ...podEnv };
}

/** Host tools the container's start runs (absolute paths on this machine). */
export interface HostTools {
  sh: string;
  unshare: string;
  mount: string;
  mkdir: string;
  touch: string;
}

/** A file of this machine bound into the container's root (read-only). */
export interface BoundFile {
  /** The path inside the container. */
  path: string;
  hostPath: string;
  /** A directory (`mount --bind` of a directory) or one file. */
  directory: boolean;
}

/** Everything one start of an image container needs. */
export interface ChrootLaunch {
  /** The unpacked image root (the overlay's read-only lower layer). */
  lower: string;
  /** The container's writable layer and overlay work directory, emptied per start. */
  upper: string;
  work: string;
  /** Where the overlay is mounted: the container's root. */
  root: string;
  /** The container's volume mounts (hack/lib/local-node-volumes.ts lays them out). */
  mounts: readonly Mount[];
  /** Files of this machine the container sees, read-only (/etc/hosts, the node runtime). */
  files: readonly BoundFile[];
  /** `mounts` that are a single file (a subPath of a file) rather than a directory. */
  fileMounts: ReadonlySet<string>;
  readOnlyRoot: boolean;
  workingDir: string;
  runAs: RunAs;
  argv: readonly string[];
}

/** `value` as one word of a POSIX shell script. */
export function shellWord(value: string): string {
  return `'${value.replace(/'/gu, `'\\''`)}'`;
}

/**
 * The host argv that runs a container from its image: `unshare --mount` gives it a mount
 * namespace of its own (its mounts vanish with it), where a shell mounts an overlay of the
 * image root, binds each volume (read-only ones remounted read-only) and each bound file
 * at its path, makes the root read-only when the container asks, and then `exec`s
 * `unshare --root --wd --setgid --setuid`, which chroots, changes directory, drops to the
 * container's user (no supplementary groups) and execs the container's argv. Every step
 * is an `exec`, so the process the node started is the container's own process.
 */
export function chrootArgv(launch: ChrootLaunch, tools: HostTools): string[] {
  const w = shellWord;
  const inRoot = (path: string): string => posix.join(launch.root, path);
  const lines = [
    'set -eu',
    `${w(tools.mount)} -t overlay overlay -o ${w(`lowerdir=${launch.lower},upperdir=${launch.upper},workdir=${launch.work}`)} ${w(launch.root)}`,
  ];
  const bind = (hostPath: string, path: string, directory: boolean, readOnly: boolean): void => {
    const target = inRoot(path);
    lines.push(
      directory
        ? `${w(tools.mkdir)} -p ${w(target)}`
        : `${w(tools.mkdir)} -p ${w(posix.dirname(target))} && ${w(tools.touch)} ${w(target)}`,
      `${w(tools.mount)} --bind ${w(hostPath)} ${w(target)}`,
    );
    if (readOnly) lines.push(`${w(tools.mount)} -o remount,bind,ro ${w(target)}`);
  };
  for (const file of launch.files) bind(file.hostPath, file.path, file.directory, true);
  for (const m of launch.mounts) {
    bind(m.hostPath, m.mountPath, !launch.fileMounts.has(m.mountPath), m.readOnly);
  }
  if (launch.readOnlyRoot) lines.push(`${w(tools.mount)} -o remount,bind,ro ${w(launch.root)}`);
  lines.push(
    [
      'exec',
      w(tools.unshare),
      `--root=${w(launch.root)}`,
      `--wd=${w(launch.workingDir)}`,
      `--setgid=${launch.runAs.gid}`,
      `--setuid=${launch.runAs.uid}`,
      '--',
      ...launch.argv.map(w),
    ].join(' '),
  );
  return [
    tools.unshare,
    '--mount',
    '--propagation',
    'private',
    '--',
    tools.sh,
    '-c',
    lines.join('\n'),
  ];
}

/**
 * `path` (a path inside a container) resolved inside its root as a container runtime resolves
 * a mount's destination (runc's securejoin): every symlink on the way is followed within
 * the root (an absolute target from the root, a relative one from its directory) and `..`
 * never climbs above the root, so neither a mount path nor a link the image ships can name
 * a path of this machine. Returns the container path (absolute, no symlinks, no `..`).
 * `readlink` answers a link's target, or undefined for anything that is not a link.
 * @throws Error after 40 links, as the kernel's ELOOP.
 */
export function containedPath(
  path: string,
  readlink: (containerPath: string) => string | undefined,
): string {
  const done: string[] = [];
  const todo = path.split('/').filter((p) => p !== '' && p !== '.');
  let links = 0;
  while (todo.length > 0) {
    const part = todo.shift() ?? '';
    if (part === '..') {
      done.pop();
      continue;
    }
    const target = readlink(`/${[...done, part].join('/')}`);
    if (target === undefined) {
      done.push(part);
      continue;
    }
    if (++links > 40) throw new Error(`too many levels of symbolic links resolving ${path}`);
    if (target.startsWith('/')) done.length = 0;
    todo.unshift(...target.split('/').filter((p) => p !== '' && p !== '.'));
  }
  return `/${done.join('/')}`;
}

/** Where the node's pod runtime (its preload and the DNS records) is inside a container. */
export const RUNTIME_DIR_IN_ROOT = '/.polychrome-local-node';
