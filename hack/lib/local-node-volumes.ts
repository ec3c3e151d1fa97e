import { createHash } from 'node:crypto';
import {
  chmodSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readlinkSync,
  renameSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { dirname, join, posix } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type {
  V1Container,
  V1DownwardAPIVolumeFile,
  V1KeyToPath,
  V1Volume,
} from '@kubernetes/client-node';
import { fieldValue, type PodFields } from './local-node-env';
import { applyFsGroup } from './local-node-fsgroup';
import { WaitingReason, type PodView } from './local-node-pod';
import type { Mount } from './local-node-runtime';

// Pod volumes on the local node, as the kubelet materialises them: every volume is a
// directory under the pod's directory (`volumes/<name>/`), except a PersistentVolumeClaim,
// whose directory is its PersistentVolume's hostPath or local path. What to write is
// decided by pure functions (volumeReferences, planVolumes, containerMounts) so it can
// be tested without a cluster; PodVolumes is the thin shell that reads the API and
// writes the files. Files are owned by the node's user: runAsUser, runAsGroup and
// fsGroup are not applied, modes are written as the pod gives them.

/** One file of a volume, at `path` relative to the volume's directory. */
export interface VolumeFile {
  path: string;
  data: Uint8Array;
  /** Permission bits (0o000 to 0o777), as given by `mode`/`defaultMode`. */
  mode: number;
}

/** What one volume becomes on disk. */
export type VolumePlan =
  /** Secret, ConfigMap, projected and downward API volumes: a set of files, replaced as a whole. */
  | { name: string; kind: 'files'; files: VolumeFile[] }
  /** A directory made once per pod and kept across container restarts. */
  | { name: string; kind: 'emptyDir' }
  /** A claim's PersistentVolume: a directory of this machine, never removed by the node. */
  | { name: string; kind: 'claim'; claimName: string; path: string; readOnly: boolean };

/** A Secret's or ConfigMap's content by key, decoded (ConfigMap data and binaryData merged). */
export type ObjectData = Readonly<Record<string, Uint8Array>>;

/** What the API says about a PersistentVolumeClaim and the volume it is bound to. */
export type ClaimState =
  | { kind: 'absent' }
  | { kind: 'unbound'; phase: string }
  | { kind: 'volume-absent'; volumeName: string }
  /** `path` is the PV's `spec.hostPath.path` or `spec.local.path`; undefined for other PV types. */
  | { kind: 'bound'; volumeName: string; path: string | undefined };

/** A projected serviceAccountToken source the node must request a token for. */
export interface TokenRef {
  /** Identifies the source within the pod: `<volume name>/<source index>`. */
  key: string;
  serviceAccountName: string;
  /** Undefined: the API server's own audiences. */
  audience: string | undefined;
  expirationSeconds: number;
}

/** Everything a pod's volumes name, for the shell to read from the API. */
export interface VolumeRefs {
  secrets: Set<string>;
  configMaps: Set<string>;
  claims: Set<string>;
  tokens: TokenRef[];
}

/** The fetched objects {@link planVolumes} builds from; a name that is absent does not exist. */
export interface VolumeSources {
  secrets: ReadonlyMap<string, ObjectData>;
  configMaps: ReadonlyMap<string, ObjectData>;
  claims: ReadonlyMap<string, ClaimState>;
  /** Tokens by {@link TokenRef.key}. */
  tokens: ReadonlyMap<string, string>;
}

/** Why a pod's volumes cannot be set up: the pod waits with this and is retried. */
export interface VolumeFailure {
  ok: false;
  reason: WaitingReason;
  message: string;
}

/** The plan of every volume of a pod, or why the pod has to wait. */
export type PlanResult = { ok: true; plans: VolumePlan[] } | VolumeFailure;

/** The API's default for `defaultMode` of secret, configMap, projected and downwardAPI. */
export const defaultFileMode = 0o644;

/** The TokenRequest lifetime when a serviceAccountToken source gives none (the API's default). */
export const defaultTokenExpirationSeconds = 3600;

/** A ServiceAccount token older than this is renewed whatever its lifetime (the kubelet's bound). */
const maxTokenAgeMs = 24 * 3600 * 1000;

/** The key of a projected token source in {@link VolumeSources.tokens}. */
export const tokenKey = (volume: string, source: number): string => `${volume}/${source}`;

/**
 * The type of a volume: its one source field (`secret`, `emptyDir`, `nfs`...). The pod
 * arrives as the API server's JSON, so the field names are the wire names.
 */
export function volumeType(volume: V1Volume): string | undefined {
  for (const [key, value] of Object.entries(volume)) {
    if (key !== 'name' && value !== undefined && value !== null) return key;
  }
  return undefined;
}

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

/**
 * The pod's `spec.volumes`. The node's pod view does not declare them, but it is the API
 * server's JSON, so they are there; entries without a name are left out (the API server
 * never sends such).
 */
export function podVolumes(pod: PodView): V1Volume[] {
  const spec: object = pod.spec;
  const volumes = 'volumes' in spec ? spec.volumes : undefined;
  if (!Array.isArray(volumes)) return [];
  return volumes.filter(
    (v): v is V1Volume => isRecord(v) && typeof v.name === 'string' && v.name !== '',
  );
}

/** The Secrets, ConfigMaps, claims and tokens `volumes` need. */
export function volumeReferences(
  volumes: readonly V1Volume[],
  serviceAccountName: string,
): VolumeRefs {
  const refs: VolumeRefs = {
    secrets: new Set(),
    configMaps: new Set(),
    claims: new Set(),
    tokens: [],
  };
  for (const volume of volumes) {
    if (volume.secret?.secretName !== undefined) refs.secrets.add(volume.secret.secretName);
    if (volume.configMap?.name !== undefined) refs.configMaps.add(volume.configMap.name);
    if (volume.persistentVolumeClaim !== undefined) {
      refs.claims.add(volume.persistentVolumeClaim.claimName);
    }
    (volume.projected?.sources ?? []).forEach((source, index) => {
      if (source.secret?.name !== undefined) refs.secrets.add(source.secret.name);
      if (source.configMap?.name !== undefined) refs.configMaps.add(source.configMap.name);
      const token = source.serviceAccountToken;
      if (token !== undefined) {
        refs.tokens.push({
          key: tokenKey(volume.name, index),
          serviceAccountName,
          audience:
            token.audience !== undefined && token.audience !== '' ? token.audience : undefined,
          expirationSeconds: token.expirationSeconds ?? defaultTokenExpirationSeconds,
        });
      }
    });
  }
  return refs;
}

/**
 * Why `path` may not be written inside a volume, or undefined when it may: it must be
 * relative, without `..` elements and must not start with `..` (the kubelet keeps its
 * own `..data` entries there), as written and once cleaned (`./..data`, `.`). The API
 * server validates less (it allows `./x`); this guards the host.
 */
export function invalidPath(path: string): string | undefined {
  if (path === '') return 'must not be empty';
  if (path.startsWith('/')) return 'must be a relative path';
  if (path.split('/').includes('..')) return "must not contain '..'";
  const clean = cleanPath(path);
  if (clean.startsWith('..')) return "must not start with '..'";
  if (clean === '.') return 'must name something inside the volume';
  return undefined;
}

/** `path` as the kubelet's atomic writer keys it (filepath.Clean): `./a//b/` is `a/b`. */
export function cleanPath(path: string): string {
  const clean = posix.normalize(path);
  return clean.length > 1 ? clean.replace(/\/+$/, '') : clean;
}

type Files = { ok: true; files: VolumeFile[] } | { ok: false; message: string };

const mode = (given: number | undefined, fallback: number): number => (given ?? fallback) & 0o777;

/**
 * The files of a Secret or ConfigMap source, as the kubelet's MakePayload: every key
 * (mode `defaultMode`), or only `items` (each with its own `mode`, else `defaultMode`).
 * A missing object or item key fails the volume unless the source is `optional`.
 */
export function keyedFiles(
  kind: 'secret' | 'configmap',
  name: string,
  data: ObjectData | undefined,
  items: readonly V1KeyToPath[] | undefined,
  defaultMode: number,
  optional: boolean,
): Files {
  if (data === undefined) {
    return optional
      ? { ok: true, files: [] }
      : { ok: false, message: `${kind} "${name}" not found` };
  }
  if (items === undefined || items.length === 0) {
    return {
      ok: true,
      files: Object.entries(data).map(([key, value]) => ({
        path: key,
        data: value,
        mode: defaultMode,
      })),
    };
  }
  const files: VolumeFile[] = [];
  for (const item of items) {
    const value = data[item.key];
    if (value === undefined) {
      if (optional) continue;
      return {
        ok: false,
        message:
          kind === 'secret'
            ? `references non-existent secret key: ${item.key}`
            : `configmap references non-existent config key: ${item.key}`,
      };
    }
    files.push({ path: item.path, data: value, mode: mode(item.mode, defaultMode) });
  }
  return { ok: true, files };
}

/**
 * A label or annotation map as the kubelet writes it to a file: `key="value"` lines in
 * key order, no trailing newline (Go's %q quoting; JSON's agrees for printable text).
 */
export function formatMap(map: Readonly<Record<string, string>> | undefined): string {
  return Object.keys(map ?? {})
    .sort()
    .map((key) => `${key}=${JSON.stringify(map?.[key] ?? '')}`)
    .join('\n');
}

/** The files of a downwardAPI volume or projection: one per item, from its fieldRef. */
export function downwardFiles(
  items: readonly V1DownwardAPIVolumeFile[] | undefined,
  defaultMode: number,
  fields: PodFields,
): Files {
  const files: VolumeFile[] = [];
  for (const item of items ?? []) {
    const path = item.fieldRef?.fieldPath;
    if (path === undefined) {
      return {
        ok: false,
        message: `downward API item ${item.path}: the local node supports fieldRef only (not resourceFieldRef)`,
      };
    }
    const value =
      path === 'metadata.labels'
        ? formatMap(fields.labels)
        : path === 'metadata.annotations'
          ? formatMap(fields.annotations)
          : fieldValue(fields, path);
    if (value === undefined) {
      return {
        ok: false,
        message: `downward API item ${item.path}: the local node does not support fieldPath "${path}"`,
      };
    }
    files.push({
      path: item.path,
      data: Buffer.from(value, 'utf8'),
      mode: mode(item.mode, defaultMode),
    });
  }
  return { ok: true, files };
}

/** The files of a projected volume, its sources in order (a later source wins a path). */
function projectedFiles(
  volume: V1Volume & { projected: NonNullable<V1Volume['projected']> },
  fields: PodFields,
  sources: VolumeSources,
): Files {
  const defaultMode = mode(volume.projected.defaultMode, defaultFileMode);
  const files: VolumeFile[] = [];
  const list = volume.projected.sources ?? [];
  for (const [index, source] of list.entries()) {
    let part: Files;
    if (source.secret !== undefined) {
      const name = source.secret.name ?? '';
      part = keyedFiles(
        'secret',
        name,
        sources.secrets.get(name),
        source.secret.items,
        defaultMode,
        source.secret.optional === true,
      );
    } else if (source.configMap !== undefined) {
      const name = source.configMap.name ?? '';
      part = keyedFiles(
        'configmap',
        name,
        sources.configMaps.get(name),
        source.configMap.items,
        defaultMode,
        source.configMap.optional === true,
      );
    } else if (source.downwardAPI !== undefined) {
      part = downwardFiles(source.downwardAPI.items, defaultMode, fields);
    } else if (source.serviceAccountToken !== undefined) {
      const token = sources.tokens.get(tokenKey(volume.name, index));
      part =
        token === undefined
          ? { ok: false, message: `no token was requested for source ${index}` }
          : {
              ok: true,
              files: [
                {
                  path: source.serviceAccountToken.path,
                  data: Buffer.from(token),
                  mode: defaultMode,
                },
              ],
            };
    } else {
      const kind = Object.keys(source)[0] ?? 'unknown';
      part = {
        ok: false,
        message: `the local node does not support projected source ${kind} (volume ${volume.name})`,
      };
    }
    if (!part.ok) return part;
    files.push(...part.files);
  }
  // A later source wins a path, as when the kubelet fills its payload map in order.
  const byPath = new Map(files.map((f) => [f.path, f]));
  return { ok: true, files: [...byPath.values()] };
}

/** The plan of one claim volume from what the API says about the claim. */
function claimPlan(
  name: string,
  claimName: string,
  readOnly: boolean,
  state: ClaimState | undefined,
): { ok: true; plan: VolumePlan } | { ok: false; message: string } {
  switch (state?.kind) {
    case 'bound':
      return state.path === undefined || state.path === ''
        ? {
            ok: false,
            message: `persistentvolumeclaim "${claimName}" is bound to persistentvolume "${state.volumeName}", which has neither hostPath nor local: the local node supports only those (volume ${name})`,
          }
        : { ok: true, plan: { name, kind: 'claim', claimName, path: state.path, readOnly } };
    case 'unbound':
      return {
        ok: false,
        message: `persistentvolumeclaim "${claimName}" is not bound yet (phase ${state.phase}) (volume ${name})`,
      };
    case 'volume-absent':
      return {
        ok: false,
        message: `persistentvolumeclaim "${claimName}" is bound to persistentvolume "${state.volumeName}", which does not exist (volume ${name})`,
      };
    default:
      return {
        ok: false,
        message: `persistentvolumeclaim "${claimName}" not found (volume ${name})`,
      };
  }
}

/** The files of a files-kind volume, or why there are none. */
function filesOf(volume: V1Volume, fields: PodFields, sources: VolumeSources): Files | undefined {
  if (volume.secret !== undefined) {
    const name = volume.secret.secretName ?? '';
    return keyedFiles(
      'secret',
      name,
      sources.secrets.get(name),
      volume.secret.items,
      mode(volume.secret.defaultMode, defaultFileMode),
      volume.secret.optional === true,
    );
  }
  if (volume.configMap !== undefined) {
    const name = volume.configMap.name ?? '';
    return keyedFiles(
      'configmap',
      name,
      sources.configMaps.get(name),
      volume.configMap.items,
      mode(volume.configMap.defaultMode, defaultFileMode),
      volume.configMap.optional === true,
    );
  }
  if (volume.downwardAPI !== undefined) {
    return downwardFiles(
      volume.downwardAPI.items,
      mode(volume.downwardAPI.defaultMode, defaultFileMode),
      fields,
    );
  }
  if (volume.projected !== undefined) {
    return projectedFiles({ ...volume, projected: volume.projected }, fields, sources);
  }
  return undefined;
}

/**
 * What each of a pod's volumes becomes, from the objects they name; or, for the first
 * volume that cannot be set up, the reason the pod waits (ContainerCreating, as the
 * kubelet's pods wait for their mounts; its FailedMount text is the message).
 */
export function planVolumes(
  volumes: readonly V1Volume[],
  fields: PodFields,
  sources: VolumeSources,
): PlanResult {
  const plans: VolumePlan[] = [];
  const waiting = (message: string): VolumeFailure => ({
    ok: false,
    reason: WaitingReason.ContainerCreating,
    message,
  });
  for (const volume of volumes) {
    const type = volumeType(volume);
    if (type === 'emptyDir') {
      plans.push({ name: volume.name, kind: 'emptyDir' });
      continue;
    }
    if (volume.persistentVolumeClaim !== undefined) {
      const { claimName } = volume.persistentVolumeClaim;
      const claim = claimPlan(
        volume.name,
        claimName,
        volume.persistentVolumeClaim.readOnly === true,
        sources.claims.get(claimName),
      );
      if (!claim.ok) return waiting(claim.message);
      plans.push(claim.plan);
      continue;
    }
    const files = filesOf(volume, fields, sources);
    if (files === undefined) {
      return waiting(
        `the local node does not support volume type ${type ?? 'none'} (volume ${volume.name})`,
      );
    }
    if (!files.ok) {
      return waiting(`MountVolume.SetUp failed for volume "${volume.name}" : ${files.message}`);
    }
    for (const file of files.files) {
      const bad = invalidPath(file.path);
      if (bad !== undefined) {
        return waiting(
          `MountVolume.SetUp failed for volume "${volume.name}" : invalid path "${file.path}": ${bad}`,
        );
      }
    }
    const cleaned = files.files.map((file) => ({ ...file, path: cleanPath(file.path) }));
    plans.push({ name: volume.name, kind: 'files', files: cleaned });
  }
  return { ok: true, plans };
}

/** A set-up volume: its directory here, and whether containers may only read it. */
export interface VolumeHost {
  path: string;
  kind: VolumePlan['kind'];
  /** Secret, ConfigMap, projected and downward API volumes are always read-only, as in a kubelet. */
  readOnly: boolean;
}

/** A container's mounts, or the kubelet's message for why the container cannot be created. */
export type MountsResult =
  | {
      ok: true;
      mounts: Mount[];
      /** subPath directories of emptyDir and claim volumes to create, as the kubelet does. */
      createDirs: string[];
    }
  | { ok: false; message: string };

/** The mounts of `container` on the set-up `hosts` (by volume name). */
export function containerMounts(
  container: V1Container,
  hosts: ReadonlyMap<string, VolumeHost>,
): MountsResult {
  const mounts: Mount[] = [];
  const createDirs: string[] = [];
  for (const entry of container.volumeMounts ?? []) {
    const host = hosts.get(entry.name);
    if (host === undefined) {
      return {
        ok: false,
        message: `cannot find volume "${entry.name}" to mount into container "${container.name}"`,
      };
    }
    if (entry.subPathExpr !== undefined && entry.subPathExpr !== '') {
      return {
        ok: false,
        message: `volume mount ${entry.name} of container "${container.name}": the local node does not support subPathExpr`,
      };
    }
    const subPath = entry.subPath ?? '';
    let hostPath = host.path;
    if (subPath !== '') {
      const bad = invalidPath(subPath);
      if (bad !== undefined) {
        return {
          ok: false,
          message: `volume mount ${entry.name} of container "${container.name}": subPath "${subPath}" ${bad}`,
        };
      }
      hostPath = join(host.path, subPath);
      if (host.kind !== 'files') createDirs.push(hostPath);
    }
    mounts.push({
      mountPath: entry.mountPath,
      hostPath,
      readOnly: entry.readOnly === true || host.readOnly,
    });
  }
  return { ok: true, mounts, createDirs };
}

/**
 * When a token issued at `issuedMs` that expires at `expiresMs` is renewed: once 80% of
 * its lifetime has passed, as the kubelet does, and at most a day after it was issued.
 * The lifetime is the one asked for when the API server returned a longer one (it
 * extends the 3607 s tokens of `kube-api-access-*` volumes to a year).
 */
export function tokenRenewAtMs(
  issuedMs: number,
  expiresMs: number,
  requestedSeconds: number,
): number {
  const lifetime = Math.min(expiresMs - issuedMs, requestedSeconds * 1000, maxTokenAgeMs);
  return issuedMs + Math.max(0, lifetime) * 0.8;
}

// ---- the shell: reading the API and writing files ----

/** The API calls volumes need; the node implements them with CoreV1Api. */
export interface VolumeApi {
  /** The Secret's data, decoded; undefined when it does not exist. */
  readSecret(namespace: string, name: string): Promise<ObjectData | undefined>;
  /** The ConfigMap's data and binaryData; undefined when it does not exist. */
  readConfigMap(namespace: string, name: string): Promise<ObjectData | undefined>;
  /** The claim and, when it is Bound, its PersistentVolume's path. */
  readClaim(namespace: string, name: string): Promise<ClaimState>;
  /** A TokenRequest for the ServiceAccount, bound to the pod. */
  requestToken(namespace: string, request: TokenRequestSpec): Promise<IssuedToken>;
}

/** A TokenRequest as the kubelet makes it for a projected serviceAccountToken. */
export interface TokenRequestSpec {
  serviceAccountName: string;
  audience: string | undefined;
  expirationSeconds: number;
  /** The token is bound to this pod: it stops working once the pod is gone. */
  pod: { name: string; uid: string };
}

/** A token the API server issued. */
export interface IssuedToken {
  token: string;
  expiresAt: Date;
}

/**
 * The result of {@link PodVolumes.setUp}: set up (with `stale` once the pod ran and a
 * volume could not be refreshed: it keeps its last content, and this says why), or why
 * the pod must wait.
 */
export type SetUpResult =
  { ok: true; hosts: ReadonlyMap<string, VolumeHost>; stale?: string } | VolumeFailure;

/** The entry a files volume's directory points through, as in the kubelet's AtomicWriter. */
const dataLink = '..data';

const readLink = (path: string): string | undefined => {
  try {
    return readlinkSync(path);
  } catch {
    return undefined;
  }
};

const isDirectory = (path: string): boolean => {
  try {
    return lstatSync(path).isDirectory();
  } catch {
    return false;
  }
};

const payloadDigest = (files: readonly VolumeFile[]): string => {
  const hash = createHash('sha256');
  for (const file of [...files].sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0))) {
    hash.update(`${file.path}\0${file.mode}\0${file.data.length}\0`).update(file.data);
  }
  return hash.digest('hex').slice(0, 16);
};

/**
 * Writes `files` into `dir` so a reader sees the old set or the new one, never a mix,
 * as the kubelet's AtomicWriter does: the files go into a fresh `..<digest>` directory,
 * the `..data` symlink is swapped to it by a rename, and each top-level name is a
 * symlink through `..data`. Names no longer in the set are removed. Returns false when
 * the content was already there (nothing written).
 */
export function writeVolumeFiles(dir: string, files: readonly VolumeFile[]): boolean {
  mkdirSync(dir, { recursive: true });
  const target = `..${payloadDigest(files)}`;
  const tops = new Set(files.map((f) => f.path.split('/')[0] ?? f.path));
  if (readLink(join(dir, dataLink)) === target && isDirectory(join(dir, target))) {
    // The content is there; a top-level link lost since (a crash between the swap and
    // the links, a container that removed one) is put back.
    linkTops(dir, tops);
    return false;
  }
  const staging = join(dir, target);
  rmSync(staging, { recursive: true, force: true });
  mkdirSync(staging, { mode: 0o755 });
  for (const file of files) {
    const path = join(staging, file.path);
    mkdirSync(dirname(path), { recursive: true });
    writeFileSync(path, file.data, { mode: file.mode });
    // The umask may have taken bits away: the mode is as the pod gave it.
    chmodSync(path, file.mode);
  }
  const temp = join(dir, `${dataLink}_tmp`);
  rmSync(temp, { force: true });
  symlinkSync(target, temp);
  renameSync(temp, join(dir, dataLink));
  linkTops(dir, tops);
  for (const entry of readdirSync(dir)) {
    if (entry === dataLink || entry === target) continue;
    if (entry.startsWith('..') || !tops.has(entry)) {
      rmSync(join(dir, entry), { recursive: true, force: true });
    }
  }
  return true;
}

/** Makes each top-level name in `dir` a symlink through `..data`, unless it already is. */
function linkTops(dir: string, tops: ReadonlySet<string>): void {
  for (const top of tops) {
    const link = join(dir, top);
    if (readLink(link) === `${dataLink}/${top}`) continue;
    rmSync(link, { recursive: true, force: true });
    symlinkSync(`${dataLink}/${top}`, link);
  }
}

/** Options for {@link PodVolumes}. */
export interface PodVolumesOptions {
  pod: PodView;
  /** The pod's directory; volumes go to `<dir>/volumes/<name>/`. */
  dir: string;
  /** The pod's downward API values (read when the volumes are set up). */
  fields: () => PodFields;
  api: VolumeApi;
  /** How often Secret, ConfigMap and downward API content is refreshed once set up. */
  refreshMs: number;
  log: (line: string) => void;
  /** The clock. @default Date.now */
  now?: () => number;
  /**
   * The pod's `fsGroup`, applied to every volume it writes (hack/lib/local-node-fsgroup.ts).
   * Only the registry mode passes it. @default none applied
   */
  fsGroup?: number;
}

interface HeldToken {
  token: string;
  renewAtMs: number;
}

/**
 * A pod's volumes on disk: set up (again) before each container run, so a restart sees
 * current Secrets and ConfigMaps, refreshed every `refreshMs` meanwhile, with projected
 * ServiceAccount tokens renewed once 80% of their lifetime has passed. Tearing down
 * removes the pod's `volumes/` directory (emptyDirs, Secret and ConfigMap copies) and
 * never a claim's PersistentVolume.
 */
export class PodVolumes {
  private readonly volumes: readonly V1Volume[];
  private readonly tokens = new Map<string, HeldToken>();
  private readonly abort = new AbortController();
  private inflight: Promise<SetUpResult> | undefined;
  private refreshing: Promise<void> | undefined;
  private lastProblem = '';
  /** Every volume's directory, once all were set up (the containers may have started). */
  private hosts: Map<string, VolumeHost> | undefined;

  constructor(private readonly opts: PodVolumesOptions) {
    this.volumes = podVolumes(opts.pod);
  }

  /** The directory every volume but a claim lives under. */
  get root(): string {
    return join(this.opts.dir, 'volumes');
  }

  private get now(): number {
    return (this.opts.now ?? Date.now)();
  }

  /**
   * Reads what the volumes name and writes them; concurrent calls (one per container)
   * share one pass. After the first success a refresh loop keeps them current.
   */
  setUp(): Promise<SetUpResult> {
    this.inflight ??= this.sync().finally(() => {
      this.inflight = undefined;
    });
    return this.inflight;
  }

  /** Stops refreshing and renewing; the files stay (the node is closing, the pod is not gone). */
  async stop(): Promise<void> {
    this.abort.abort();
    await this.refreshing;
    await this.inflight?.catch(() => undefined);
  }

  /** Stops, then removes the pod's volume directories (never a claim's data). */
  async tearDown(): Promise<void> {
    await this.stop();
    rmSync(this.root, { recursive: true, force: true });
  }

  private async sync(): Promise<SetUpResult> {
    const { pod, api } = this.opts;
    const namespace = pod.metadata.namespace;
    if (this.abort.signal.aborted) {
      return { ok: false, reason: WaitingReason.ContainerCreating, message: 'the pod is stopping' };
    }
    const refs = volumeReferences(this.volumes, pod.spec.serviceAccountName ?? 'default');
    let sources: VolumeSources;
    try {
      const read = async <T>(
        names: Set<string>,
        get: (name: string) => Promise<T | undefined>,
      ): Promise<Map<string, T>> => {
        const found = new Map<string, T>();
        await Promise.all(
          [...names].map(async (name) => {
            const value = await get(name);
            if (value !== undefined) found.set(name, value);
          }),
        );
        return found;
      };
      const [secrets, configMaps, claims, tokens] = await Promise.all([
        read(refs.secrets, (name) => api.readSecret(namespace, name)),
        read(refs.configMaps, (name) => api.readConfigMap(namespace, name)),
        read(refs.claims, (name) => api.readClaim(namespace, name)),
        this.currentTokens(refs.tokens),
      ]);
      sources = { secrets, configMaps, claims, tokens };
    } catch (err: unknown) {
      return {
        ok: false,
        reason: WaitingReason.ContainerCreating,
        message: `could not read what the pod's volumes name: ${err instanceof Error ? err.message : String(err)}`,
      };
    }
    // Volume by volume, as the kubelet: before the first start one that cannot be set up
    // holds the pod; once it runs, that one keeps its last content while the others (a
    // token due for renewal) are still written.
    const fields = this.opts.fields();
    const plans: VolumePlan[] = [];
    let failure: VolumeFailure | undefined;
    for (const volume of this.volumes) {
      const one = planVolumes([volume], fields, sources);
      if (one.ok) plans.push(...one.plans);
      else failure ??= one;
    }
    if (failure !== undefined && this.hosts === undefined) return failure;
    const hosts = new Map<string, VolumeHost>(this.hosts);
    try {
      for (const volume of plans) {
        if (volume.kind === 'claim') {
          mkdirSync(volume.path, { recursive: true });
          this.applyFsGroup(volume.path, volume.readOnly, true);
          hosts.set(volume.name, { path: volume.path, kind: 'claim', readOnly: volume.readOnly });
          continue;
        }
        const path = join(this.root, volume.name);
        if (volume.kind === 'emptyDir') mkdirSync(path, { recursive: true });
        else writeVolumeFiles(path, volume.files);
        this.applyFsGroup(path, volume.kind === 'files', volume.kind !== 'files');
        hosts.set(volume.name, { path, kind: volume.kind, readOnly: volume.kind === 'files' });
      }
    } catch (err: unknown) {
      return {
        ok: false,
        reason: WaitingReason.ContainerCreating,
        message: `could not write the pod's volumes: ${err instanceof Error ? err.message : String(err)}`,
      };
    }
    this.hosts = hosts;
    // Only file volumes change under a running pod; most pods (harness pods) have none.
    if (plans.some((v) => v.kind === 'files')) this.refreshing ??= this.refreshLoop();
    return failure === undefined
      ? { ok: true, hosts }
      : { ok: true, hosts, stale: failure.message };
  }

  private applyFsGroup(path: string, readOnly: boolean, onRootMismatch: boolean): void {
    const gid = this.opts.fsGroup;
    if (gid !== undefined) applyFsGroup(path, gid, readOnly, onRootMismatch);
  }

  /** The tokens to write: held ones until they are due, new TokenRequests otherwise. */
  private async currentTokens(refs: readonly TokenRef[]): Promise<Map<string, string>> {
    const { pod, api } = this.opts;
    const tokens = new Map<string, string>();
    await Promise.all(
      refs.map(async (ref) => {
        const held = this.tokens.get(ref.key);
        if (held !== undefined && this.now < held.renewAtMs) {
          tokens.set(ref.key, held.token);
          return;
        }
        const issuedMs = this.now;
        const issued = await api.requestToken(pod.metadata.namespace, {
          serviceAccountName: ref.serviceAccountName,
          audience: ref.audience,
          expirationSeconds: ref.expirationSeconds,
          pod: { name: pod.metadata.name, uid: pod.metadata.uid },
        });
        this.tokens.set(ref.key, {
          token: issued.token,
          renewAtMs: tokenRenewAtMs(issuedMs, issued.expiresAt.getTime(), ref.expirationSeconds),
        });
        tokens.set(ref.key, issued.token);
      }),
    );
    return tokens;
  }

  /** Every `refreshMs`, or when a token is due if sooner, sets the volumes up again. */
  private async refreshLoop(): Promise<void> {
    const { signal } = this.abort;
    while (!signal.aborted) {
      const dueMs = Math.min(...[...this.tokens.values()].map((t) => t.renewAtMs - this.now));
      const waitMs = Math.max(
        1000,
        Math.min(this.opts.refreshMs, Number.isFinite(dueMs) ? dueMs : Infinity),
      );
      try {
        await sleep(waitMs, undefined, { signal });
      } catch {
        return;
      }
      const result = await this.setUp();
      const problem = result.ok ? (result.stale ?? '') : result.message;
      if (problem !== '' && problem !== this.lastProblem) {
        // The files stay as they were, as the kubelet keeps a volume's last content.
        this.opts.log(
          `pod ${pod(this.opts.pod)}: refreshing volumes failed, keeping their content: ${problem}`,
        );
      }
      this.lastProblem = problem;
    }
  }
}

const pod = (view: PodView): string => `${view.metadata.namespace}/${view.metadata.name}`;
