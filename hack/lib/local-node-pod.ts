import type { V1Container, V1PodSecurityContext } from '@kubernetes/client-node';

/**
 * The parts of a pod the local node reads, in wire form (timestamps are strings). Watch
 * events carry the JSON as the API server sent it, not the client's model classes (whose
 * timestamps are `Date`), so the node parses them into this shape with {@link isPodView}.
 * Containers have no timestamps, so the client's `V1Container` describes them as sent.
 */
export interface PodView {
  metadata: {
    name: string;
    namespace: string;
    uid: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
    deletionTimestamp?: string;
    deletionGracePeriodSeconds?: number;
  };
  spec: {
    nodeName?: string;
    containers: V1Container[];
    initContainers?: V1Container[];
    restartPolicy?: string;
    terminationGracePeriodSeconds?: number;
    nodeSelector?: Record<string, string>;
    serviceAccountName?: string;
    /** Read by the registry mode: runAsUser, runAsGroup, runAsNonRoot, fsGroup. */
    securityContext?: V1PodSecurityContext;
  };
  status?: {
    phase?: string;
    podIP?: string;
    startTime?: string;
    conditions?: { type: string; status: string; lastTransitionTime?: string }[];
  };
}

/** Pod restart policies (`spec.restartPolicy`). */
export const RestartPolicy = { Always: 'Always', OnFailure: 'OnFailure', Never: 'Never' } as const;
/** A pod restart policy. */
export type RestartPolicy = (typeof RestartPolicy)[keyof typeof RestartPolicy];

/** The pod's restart policy; the API server defaults it to Always, and so does this. */
export function restartPolicyOf(pod: PodView): RestartPolicy {
  switch (pod.spec.restartPolicy) {
    case RestartPolicy.OnFailure:
      return RestartPolicy.OnFailure;
    case RestartPolicy.Never:
      return RestartPolicy.Never;
    default:
      return RestartPolicy.Always;
  }
}

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

const isStringMap = (value: unknown): value is Record<string, string> =>
  isRecord(value) && Object.values(value).every((v) => typeof v === 'string');

const isOptional = <T>(value: unknown, guard: (v: unknown) => v is T): boolean =>
  value === undefined || guard(value);

const isString = (value: unknown): value is string => typeof value === 'string';
const isNumber = (value: unknown): value is number => typeof value === 'number';

function isContainer(value: unknown): value is V1Container {
  return (
    isRecord(value) &&
    typeof value.name === 'string' &&
    isOptional(value.image, isString) &&
    isOptional(value.args, (v): v is string[] => Array.isArray(v) && v.every(isString)) &&
    isOptional(value.env, Array.isArray) &&
    isOptional(value.envFrom, Array.isArray)
  );
}

/**
 * True when `value` (a pod as the API server sent it) has what the local node needs:
 * name, namespace and uid, and containers with names.
 */
export function isPodView(value: unknown): value is PodView {
  if (!isRecord(value) || !isRecord(value.metadata) || !isRecord(value.spec)) return false;
  const { metadata, spec, status } = value;
  return (
    typeof metadata.name === 'string' &&
    typeof metadata.namespace === 'string' &&
    typeof metadata.uid === 'string' &&
    isOptional(metadata.labels, isStringMap) &&
    isOptional(metadata.annotations, isStringMap) &&
    isOptional(metadata.deletionTimestamp, isString) &&
    isOptional(metadata.deletionGracePeriodSeconds, isNumber) &&
    Array.isArray(spec.containers) &&
    spec.containers.every(isContainer) &&
    isOptional(spec.nodeName, isString) &&
    isOptional(spec.restartPolicy, isString) &&
    isOptional(spec.terminationGracePeriodSeconds, isNumber) &&
    isOptional(spec.nodeSelector, isStringMap) &&
    isOptional(status, isRecord) &&
    (status === undefined ||
      (isRecord(status) &&
        isOptional(status.phase, isString) &&
        isOptional(status.podIP, isString) &&
        isOptional(status.startTime, isString) &&
        isOptional(
          status.conditions,
          (v): v is unknown[] =>
            Array.isArray(v) &&
            v.every(
              (c) =>
                isRecord(c) &&
                typeof c.type === 'string' &&
                typeof c.status === 'string' &&
                isOptional(c.lastTransitionTime, isString),
            ),
        )))
  );
}

/**
 * Per-pod override of what runs: a JSON array of strings (the argv of every container)
 * or a JSON object from container name to such an array. It replaces the image, the
 * container's `command` and its `args`.
 */
export const localCommandAnnotation = 'polychrome.dev/local-command';

/**
 * Image patterns to local argv, e.g. `{ 'polychrome/harness:*': ['node', 'dist/harness/main.js'] }`.
 * `*` matches any run of characters. The container's `args` are appended (they play
 * the part of the image's CMD); its `command` names a path inside the image and is ignored.
 * The image's files at /app are the node's working directory (local-node-runtime.ts,
 * `IMAGE_WORKDIR`).
 */
export type ImageCommands = Readonly<Record<string, readonly string[]>>;

/** Whether `image` matches `pattern`, where `*` stands for any run of characters. */
export function imageMatches(pattern: string, image: string): boolean {
  const source = pattern
    .split('*')
    .map((part) => part.replace(/[.+?^${}()|[\]\\]/g, '\\$&'))
    .join('.*');
  return new RegExp(`^${source}$`).test(image);
}

/** Reasons a container cannot start, as the kubelet names them. */
export const WaitingReason = {
  ContainerCreating: 'ContainerCreating',
  CreateContainerConfigError: 'CreateContainerConfigError',
  ErrImagePull: 'ErrImagePull',
  ImagePullBackOff: 'ImagePullBackOff',
  CrashLoopBackOff: 'CrashLoopBackOff',
} as const;
/** A waiting reason. */
export type WaitingReason = (typeof WaitingReason)[keyof typeof WaitingReason];

/** What to run for a container, or why nothing can run. */
export type CommandResolution =
  | { ok: true; argv: string[]; source: 'annotation' | 'image' }
  | { ok: false; reason: WaitingReason; message: string };

const isArgv = (value: unknown): value is string[] =>
  Array.isArray(value) && value.length > 0 && value.every(isString);

/**
 * The local argv for `container`: the pod's {@link localCommandAnnotation} first, else
 * the first matching entry of `images` (in insertion order) plus the container's `args`.
 * A malformed annotation is a CreateContainerConfigError; an image nothing maps is an
 * ErrImagePull (the kubelet's reason when an image cannot be had).
 */
export function resolveCommand(
  pod: PodView,
  container: V1Container,
  images: ImageCommands,
): CommandResolution {
  const raw = pod.metadata.annotations?.[localCommandAnnotation];
  if (raw !== undefined) {
    const bad: CommandResolution = {
      ok: false,
      reason: WaitingReason.CreateContainerConfigError,
      message: `annotation ${localCommandAnnotation} must be a non-empty JSON array of strings, or an object from container name to one`,
    };
    let parsed: unknown;
    try {
      parsed = JSON.parse(raw);
    } catch {
      return bad;
    }
    if (isArgv(parsed)) return { ok: true, argv: [...parsed], source: 'annotation' };
    if (!isRecord(parsed)) return bad;
    const own = parsed[container.name];
    if (own !== undefined) {
      return isArgv(own) ? { ok: true, argv: [...own], source: 'annotation' } : bad;
    }
    // An object that does not name this container leaves it to the image table.
  }
  const image = container.image ?? '';
  for (const [pattern, argv] of Object.entries(images)) {
    if (imageMatches(pattern, image)) {
      return { ok: true, argv: [...argv, ...(container.args ?? [])], source: 'image' };
    }
  }
  return {
    ok: false,
    reason: WaitingReason.ErrImagePull,
    message: `the local node has no command for image "${image}": map it in the node's images or set the pod annotation ${localCommandAnnotation}`,
  };
}
