/**
 * Tells the namespace's users and the administrator about an object onboarding refuses to
 * touch: a Kubernetes Event (events.k8s.io/v1, type Warning, reason `OnboardingConflict`)
 * regarding that object, in its namespace, so `kubectl describe` of the object and
 * `kubectl get events -n <namespace>` show which object it is and what to do. One Event per
 * object and message while the process runs; a failed write is logged, never retried into a
 * pile, and never fails the sync.
 */
import { EventsV1Api, V1MicroTime, type KubeConfig } from '@kubernetes/client-node';
import { randomBytes } from 'node:crypto';

import type { OnboardingAction } from './plan';

/** `reportingController` of onboarding's Events. */
export const ONBOARDING_REPORTING_CONTROLLER = 'polychrome.dev/onboarding';

/** The reason of the Event about an object of our name that is not ours. */
export const CONFLICT_REASON = 'OnboardingConflict';

/** Where conflicts are reported. */
export interface ConflictEvents {
  conflict(namespace: string, action: Extract<OnboardingAction, { op: 'conflict' }>): Promise<void>;
}

/** Options of {@link KubeConflictEvents}. */
export interface KubeConflictEventsOptions {
  readonly kubeConfig: KubeConfig;
  /** `reportingInstance`: this pod's name. */
  readonly reportingInstance: string;
  readonly log: { warn(fields: Record<string, unknown>, message: string): void };
}

const MAX_REMEMBERED = 10_000;

/** Conflicts as Kubernetes Events. */
export class KubeConflictEvents implements ConflictEvents {
  private readonly api: EventsV1Api;
  private readonly reported = new Set<string>();

  constructor(private readonly options: KubeConflictEventsOptions) {
    this.api = options.kubeConfig.makeApiClient(EventsV1Api);
  }

  async conflict(
    namespace: string,
    action: Extract<OnboardingAction, { op: 'conflict' }>,
  ): Promise<void> {
    const key = `${namespace}\u0000${action.uid}\u0000${action.message}`;
    if (this.reported.has(key)) return;
    if (this.reported.size >= MAX_REMEMBERED) this.reported.clear();
    this.reported.add(key);
    try {
      await this.api.createNamespacedEvent({
        namespace,
        body: {
          // Named as client-go names Events: the object's name, a dot, a unique suffix.
          metadata: { name: `${action.ref.name}.${randomBytes(8).toString('hex')}` },
          eventTime: new V1MicroTime(),
          reportingController: ONBOARDING_REPORTING_CONTROLLER,
          reportingInstance: this.options.reportingInstance,
          action: 'Onboard',
          reason: CONFLICT_REASON,
          type: 'Warning',
          note: action.message.slice(0, 1024),
          regarding: {
            apiVersion: action.ref.apiVersion,
            kind: action.ref.kind,
            name: action.ref.name,
            namespace,
            uid: action.uid,
          },
        },
      });
    } catch (err) {
      this.reported.delete(key);
      this.options.log.warn(
        {
          namespace,
          object: action.ref.name,
          err: err instanceof Error ? err.message : String(err),
        },
        'could not write the onboarding conflict Event',
      );
    }
  }
}
