import { describe, expect, it } from '@jest/globals';
import { RestartPolicy } from './local-node-pod';
import {
  buildPodStatus,
  podPhase,
  rfc3339,
  type ContainerSnapshot,
  type ContainerState,
  type PodSnapshot,
  type TerminatedState,
} from './local-node-status';

const t0 = '2026-01-01T00:00:00Z';
const t1 = '2026-01-01T00:00:05Z';

const exited = (exitCode: number): TerminatedState => ({
  kind: 'terminated',
  exitCode,
  reason: exitCode === 0 ? 'Completed' : 'Error',
  startedAt: t0,
  finishedAt: t1,
  containerID: 'local://42',
});
const running: ContainerState = { kind: 'running', startedAt: t0, containerID: 'local://42' };
const creating: ContainerState = { kind: 'waiting', reason: 'ContainerCreating' };
const backingOff: ContainerState = { kind: 'waiting', reason: 'CrashLoopBackOff', message: 'm' };

const container = (
  state: ContainerState,
  extra: Partial<ContainerSnapshot> = {},
): ContainerSnapshot => ({
  name: 'main',
  image: 'polychrome/harness:dev',
  imageID: 'local://sha256:ab',
  state,
  restartCount: 0,
  ready: state.kind === 'running',
  started: state.kind === 'running',
  ...extra,
});

const pod = (
  containers: ContainerSnapshot[],
  restartPolicy: RestartPolicy = RestartPolicy.Always,
): PodSnapshot => ({
  restartPolicy,
  containers,
  podIP: '127.0.1.1',
  hostIP: '127.0.0.1',
  startTime: t0,
});

describe('podPhase', () => {
  it.each<[string, ContainerSnapshot[], RestartPolicy, string]>([
    ['a container that never ran', [container(creating)], 'Always', 'Pending'],
    ['one never ran, one runs', [container(creating), container(running)], 'Always', 'Pending'],
    ['a running container', [container(running)], 'Never', 'Running'],
    [
      'a crash waiting for restart',
      [container(backingOff, { lastState: exited(1) })],
      'Always',
      'Running',
    ],
    ['a failure under Always', [container(exited(1))], 'Always', 'Running'],
    ['a failure under OnFailure', [container(exited(1))], 'OnFailure', 'Running'],
    ['a success under OnFailure', [container(exited(0))], 'OnFailure', 'Succeeded'],
    ['a failure under Never', [container(exited(1))], 'Never', 'Failed'],
    ['a success under Never', [container(exited(0))], 'Never', 'Succeeded'],
    [
      'one success and one failure under Never',
      [container(exited(0)), container(exited(2))],
      'Never',
      'Failed',
    ],
  ])('%s ⇒ %s/%s', (_what, containers, policy, phase) => {
    expect(podPhase(pod(containers, policy))).toBe(phase);
  });
});

describe('buildPodStatus', () => {
  it('describes a running, ready pod', () => {
    expect(buildPodStatus(pod([container(running)]), undefined, t1)).toEqual({
      phase: 'Running',
      conditions: [
        { type: 'Initialized', status: 'True', lastProbeTime: null, lastTransitionTime: t1 },
        { type: 'Ready', status: 'True', lastProbeTime: null, lastTransitionTime: t1 },
        { type: 'ContainersReady', status: 'True', lastProbeTime: null, lastTransitionTime: t1 },
        { type: 'PodScheduled', status: 'True', lastProbeTime: null, lastTransitionTime: t1 },
      ],
      hostIP: '127.0.0.1',
      hostIPs: [{ ip: '127.0.0.1' }],
      podIP: '127.0.1.1',
      podIPs: [{ ip: '127.0.1.1' }],
      startTime: t0,
      containerStatuses: [
        {
          name: 'main',
          state: { running: { startedAt: t0 } },
          lastState: {},
          ready: true,
          started: true,
          restartCount: 0,
          image: 'polychrome/harness:dev',
          imageID: 'local://sha256:ab',
          containerID: 'local://42',
        },
      ],
    });
  });

  it('names unready containers and keeps transition times of unchanged conditions', () => {
    const first = buildPodStatus(
      pod([container(running, { name: 'a', ready: false }), container(running, { name: 'b' })]),
      undefined,
      t0,
    );
    const ready = first.conditions.find((c) => c.type === 'Ready');
    expect(ready).toMatchObject({
      status: 'False',
      reason: 'ContainersNotReady',
      message: 'containers with unready status: [a]',
    });
    const later = buildPodStatus(
      pod([container(running, { name: 'a' }), container(running, { name: 'b' })]),
      first.conditions,
      t1,
    );
    const byType = Object.fromEntries(later.conditions.map((c) => [c.type, c]));
    expect(byType.Initialized?.lastTransitionTime).toBe(t0);
    expect(byType.Ready).toMatchObject({ status: 'True', lastTransitionTime: t1 });
    expect(byType.Ready?.reason).toBeUndefined();
  });

  it('is the same when rewritten without a change', () => {
    const snapshot = pod([container(running)]);
    const first = buildPodStatus(snapshot, undefined, t0);
    expect(buildPodStatus(snapshot, first.conditions, t1)).toEqual(first);
  });

  it('marks a finished pod PodCompleted and reports the terminated and last states', () => {
    const status = buildPodStatus(
      pod([container(exited(3), { restartCount: 1, lastState: exited(1) })], 'Never'),
      undefined,
      t1,
    );
    expect(status.phase).toBe('Failed');
    expect(status.conditions.find((c) => c.type === 'Ready')).toMatchObject({
      status: 'False',
      reason: 'PodCompleted',
    });
    expect(status.containerStatuses[0]).toMatchObject({
      state: { terminated: { exitCode: 3, reason: 'Error', finishedAt: t1 } },
      lastState: { terminated: { exitCode: 1 } },
      restartCount: 1,
      containerID: 'local://42',
    });
  });

  it('reports a waiting reason and message and no container id', () => {
    const status = buildPodStatus(
      pod([container({ kind: 'waiting', reason: 'CreateContainerConfigError', message: 'nope' })]),
      undefined,
      t1,
    );
    expect(status.phase).toBe('Pending');
    expect(status.containerStatuses[0]?.state).toEqual({
      waiting: { reason: 'CreateContainerConfigError', message: 'nope' },
    });
    expect(status.containerStatuses[0]?.containerID).toBeUndefined();
  });
});

describe('rfc3339', () => {
  it('drops the milliseconds metav1.Time does not carry', () => {
    expect(rfc3339(new Date('2026-03-04T05:06:07.891Z'))).toBe('2026-03-04T05:06:07Z');
  });
});
