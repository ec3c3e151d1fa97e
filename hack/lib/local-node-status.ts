import { RestartPolicy } from './local-node-pod';

// Pure: what the local node knows about a pod's containers, turned into the pod status the
// kubelet would write. Timestamps are RFC 3339 strings (the wire form of metav1.Time), so
// the result can be sent as a JSON merge patch on the status subresource as it is.

/** The state of one container, as the node tracks it. */
export type ContainerState =
  | { kind: 'waiting'; reason: string; message?: string }
  | { kind: 'running'; startedAt: string; containerID: string }
  | TerminatedState;

/** A container that ran and stopped. */
export interface TerminatedState {
  kind: 'terminated';
  exitCode: number;
  signal?: number;
  reason: string;
  message?: string;
  startedAt: string;
  finishedAt: string;
  containerID: string;
}

/** One container of a pod, as the node tracks it. */
export interface ContainerSnapshot {
  name: string;
  image: string;
  imageID: string;
  state: ContainerState;
  /** The previous run, once the container has been restarted or is waiting to be. */
  lastState?: TerminatedState;
  restartCount: number;
  ready: boolean;
  started: boolean;
}

/** Everything the status of a pod is built from. */
export interface PodSnapshot {
  restartPolicy: RestartPolicy;
  containers: readonly ContainerSnapshot[];
  podIP?: string;
  hostIP: string;
  startTime: string;
}

/** Pod phases. */
export const PodPhase = {
  Pending: 'Pending',
  Running: 'Running',
  Succeeded: 'Succeeded',
  Failed: 'Failed',
} as const;
/** A pod phase. */
export type PodPhase = (typeof PodPhase)[keyof typeof PodPhase];

/** A pod condition in wire form. */
export interface PodConditionJson {
  type: string;
  status: 'True' | 'False';
  lastProbeTime: null;
  lastTransitionTime: string;
  reason?: string;
  message?: string;
}

/** A container state in wire form (exactly one member set). */
export interface ContainerStateJson {
  waiting?: { reason: string; message?: string };
  running?: { startedAt: string };
  terminated?: {
    exitCode: number;
    signal?: number;
    reason: string;
    message?: string;
    startedAt: string;
    finishedAt: string;
    containerID: string;
  };
}

/** A container status in wire form. */
export interface ContainerStatusJson {
  name: string;
  state: ContainerStateJson;
  lastState: ContainerStateJson;
  ready: boolean;
  started: boolean;
  restartCount: number;
  image: string;
  imageID: string;
  containerID?: string;
}

/** The pod status the node writes, in wire form. */
export interface PodStatusJson {
  phase: PodPhase;
  conditions: PodConditionJson[];
  hostIP: string;
  hostIPs: { ip: string }[];
  podIP?: string;
  podIPs?: { ip: string }[];
  startTime: string;
  containerStatuses: ContainerStatusJson[];
}

/** metav1.Time's wire form: RFC 3339 in UTC with whole seconds. */
export function rfc3339(date: Date): string {
  return date.toISOString().replace(/\.\d{3}Z$/, 'Z');
}

/**
 * The pod phase, by the kubelet's rule: a container that never ran keeps the pod
 * Pending; any running container makes it Running; when all have stopped, the restart
 * policy decides (a container waiting to be restarted counts as stopped).
 */
export function podPhase(snapshot: PodSnapshot): PodPhase {
  let waiting = 0;
  let running = 0;
  let stopped = 0;
  let succeeded = 0;
  for (const c of snapshot.containers) {
    switch (c.state.kind) {
      case 'running':
        running++;
        break;
      case 'terminated':
        stopped++;
        if (c.state.exitCode === 0) succeeded++;
        break;
      case 'waiting':
        if (c.lastState === undefined) waiting++;
        else {
          stopped++;
          if (c.lastState.exitCode === 0) succeeded++;
        }
        break;
      default:
        break;
    }
  }
  if (waiting > 0) return PodPhase.Pending;
  if (running > 0) return PodPhase.Running;
  if (stopped === 0) return PodPhase.Pending;
  switch (snapshot.restartPolicy) {
    case RestartPolicy.Always:
      return PodPhase.Running;
    case RestartPolicy.OnFailure:
      return stopped === succeeded ? PodPhase.Succeeded : PodPhase.Running;
    case RestartPolicy.Never:
      return stopped === succeeded ? PodPhase.Succeeded : PodPhase.Failed;
    default:
      return PodPhase.Pending;
  }
}

function stateJson(state: ContainerState): ContainerStateJson {
  switch (state.kind) {
    case 'waiting':
      return {
        waiting: {
          reason: state.reason,
          ...(state.message !== undefined ? { message: state.message } : {}),
        },
      };
    case 'running':
      return { running: { startedAt: state.startedAt } };
    case 'terminated': {
      const { kind: _kind, ...terminated } = state;
      return { terminated };
    }
    default:
      return {};
  }
}

function containerStatusJson(c: ContainerSnapshot): ContainerStatusJson {
  const containerID = c.state.kind === 'waiting' ? undefined : c.state.containerID;
  return {
    name: c.name,
    state: stateJson(c.state),
    lastState: c.lastState !== undefined ? stateJson(c.lastState) : {},
    ready: c.ready,
    started: c.started,
    restartCount: c.restartCount,
    image: c.image,
    imageID: c.imageID,
    ...(containerID !== undefined ? { containerID } : {}),
  };
}

/**
 * The status to write: phase, conditions (Initialized, Ready, ContainersReady,
 * PodScheduled, as the kubelet orders them), addresses, start time and container
 * statuses. A condition whose status did not change keeps its `lastTransitionTime` from
 * `previous`, so rewriting an unchanged pod yields the same status.
 */
export function buildPodStatus(
  snapshot: PodSnapshot,
  previous: readonly { type: string; status: string; lastTransitionTime?: string }[] | undefined,
  now: string,
): PodStatusJson {
  const phase = podPhase(snapshot);
  const terminal = phase === PodPhase.Succeeded || phase === PodPhase.Failed;
  const unready = snapshot.containers.filter((c) => !c.ready).map((c) => c.name);
  const allReady = !terminal && unready.length === 0;
  const condition = (
    type: string,
    isTrue: boolean,
    reason?: string,
    message?: string,
  ): PodConditionJson => {
    const status = isTrue ? 'True' : 'False';
    const before = previous?.find((p) => p.type === type);
    return {
      type,
      status,
      lastProbeTime: null,
      lastTransitionTime:
        before?.status === status && before.lastTransitionTime !== undefined
          ? before.lastTransitionTime
          : now,
      ...(reason !== undefined ? { reason } : {}),
      ...(message !== undefined ? { message } : {}),
    };
  };
  const [notReadyReason, notReadyMessage] = terminal
    ? ['PodCompleted', undefined]
    : ['ContainersNotReady', `containers with unready status: [${unready.join(' ')}]`];
  const readiness = (type: string): PodConditionJson =>
    allReady ? condition(type, true) : condition(type, false, notReadyReason, notReadyMessage);
  return {
    phase,
    conditions: [
      condition('Initialized', true),
      readiness('Ready'),
      readiness('ContainersReady'),
      condition('PodScheduled', true),
    ],
    hostIP: snapshot.hostIP,
    hostIPs: [{ ip: snapshot.hostIP }],
    ...(snapshot.podIP !== undefined
      ? { podIP: snapshot.podIP, podIPs: [{ ip: snapshot.podIP }] }
      : {}),
    startTime: snapshot.startTime,
    containerStatuses: snapshot.containers.map(containerStatusJson),
  };
}

/** The kubelet's reason for a container that stopped with `exitCode`. */
export function terminatedReason(exitCode: number): 'Completed' | 'Error' {
  return exitCode === 0 ? 'Completed' : 'Error';
}
