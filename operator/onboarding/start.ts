/**
 * Builds and starts namespace onboarding for the provisioner's process (operator/provision/
 * run.ts): the onboarder over the API server, Events for conflicts, and the namespace watch.
 */
import { CoreV1Api, type KubeConfig } from '@kubernetes/client-node';

import { KubeConflictEvents } from './conflict-events';
import { OnboardingController } from './controller';
import { NamespaceOnboarder, type OnboardingLog } from './onboarder';

/** What {@link startOnboarding} needs. */
export interface StartOnboardingOptions {
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
 * Starts the namespace watch. A start that fails (the API server refuses the first lists:
 * the ClusterRole is missing) is logged and retried with the watch's own backoff; it never
 * stops the provisioner.
 */
export async function startOnboarding(
  options: StartOnboardingOptions,
): Promise<OnboardingController> {
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
  await controller.start();
  return controller;
}
