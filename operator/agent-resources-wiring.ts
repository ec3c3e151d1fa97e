/** The control plane's {@link AgentResourcesController}, from its configuration (operator/main.ts). */
import type { KubeConfig } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import type { ControlPlaneConfig } from './config';
import type { ControlPlaneMetrics } from './control-plane-metrics';
import { AgentResourcesController } from './controller/agent-resources-controller';

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
