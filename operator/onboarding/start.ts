/**
 * Builds namespace onboarding for the provisioner's process (operator/provisioner-process.ts): the
 * onboarder over the API server, Events for conflicts, and the namespace watch.
 */
import { CoreV1Api, type KubeConfig } from '@kubernetes/client-node';

import { KubeConflictEvents } from './conflict-events';
import { OnboardingController } from './controller';
import { NamespaceOnboarder, type OnboardingLog } from './onboarder';

/** What {@link buildOnboarding} needs. */
export interface OnboardingOptions {
  readonly kubeConfig: KubeConfig;
  /** The provisioner's namespace: where the source Secrets and the control plane are. */
  readonly controlPlaneNamespace: string;
  readonly harnessImage: string | undefined;
  readonly resyncMs: number;
  /** Reporting instance of the Events. */
  readonly podName: string;
  readonly log: OnboardingLog;
}

/**
 * The onboarding controller, not started: `start()` lists and watches. A start the API
 * server refuses (the ClusterRole is missing) is logged and retried with backoff; it never
 * stops the provisioner.
 */
export function buildOnboarding(options: OnboardingOptions): OnboardingController {
  const { kubeConfig: kc, log } = options;
  const onboarder = new NamespaceOnboarder({
    kubeConfig: kc,
    placement: {
      controlPlaneNamespace: options.controlPlaneNamespace,
      ...(options.harnessImage === undefined ? {} : { harnessImage: options.harnessImage }),
    },
    log,
    events: new KubeConflictEvents({ kubeConfig: kc, reportingInstance: options.podName, log }),
  });
  const controller = new OnboardingController({
    kubeConfig: kc,
    core: kc.makeApiClient(CoreV1Api),
    onboarder,
    log,
    resyncMs: options.resyncMs,
  });
  return controller;
}
