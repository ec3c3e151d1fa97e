/**
 * The control plane's {@link AgentResourcesController} and model relay, from its
 * configuration (operator/main.ts).
 */
import type { KubeConfig } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import type { ControlPlaneConfig } from './config';
import type { ControlPlaneMetrics } from './control-plane-metrics';
import { AgentResourcesController } from './controller/agent-resources-controller';
import { ProviderModelRelay } from './models/provider-model-relay';
import { KubeSecretKeyReader } from './models/secret-key-reader';
import type { ModelRelay } from './turns/model-relay-port';

/** Builds the controller: every namespace or the watch namespace, Events counted in `metrics`. */
export function createAgentResourcesController(
  kubeConfig: KubeConfig,
  logger: Logger,
  config: ControlPlaneConfig,
  metrics: Pick<ControlPlaneMetrics, 'kubeEvents'>,
): AgentResourcesController {
  return new AgentResourcesController({
    kubeConfig,
    logger,
    account: config.serviceAccount,
    ...(config.watchNamespace === undefined ? {} : { namespace: config.watchNamespace }),
    events: {
      reportingInstance: config.identity,
      onWrite: (result) => metrics.kubeEvents.inc({ result }),
    },
  });
}

/**
 * The relay of agents' model calls (docs/turns.md, "Who calls the model"): keys read from
 * their Secrets with the control plane's identity, the ServiceAccount named in what to grant.
 */
export function createModelRelay(kubeConfig: KubeConfig, config: ControlPlaneConfig): ModelRelay {
  return new ProviderModelRelay({
    secrets: new KubeSecretKeyReader(kubeConfig),
    account: config.serviceAccount,
  });
}
