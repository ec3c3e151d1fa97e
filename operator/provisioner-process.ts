/**
 * The provisioner process (Deployment polychrome-provisioner: the control plane's image with
 * the argument `provision`, which operator/main.ts hands here):
 * makes the Secrets the state plane and the control plane mount when they are absent, checks
 * the ones it does not own, and renews its own before they expire, once at start and then
 * every POLYCHROME_PROVISION_INTERVAL_MS. Ready while the last run left nothing outstanding
 * (docs/operator.md, "Installing: what the operator provisions").
 *
 * It also onboards conversation namespaces (operator/onboarding; docs/operator.md,
 * "Conversation namespaces"): here, because the harness CA's key each namespace's
 * certificate is issued from is readable by this process only, and the control plane, which
 * serves tenants, then holds no right on Secrets. After a pass that renewed something, every
 * onboarded namespace is synced again so its copies follow.
 */
import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { Registry } from 'prom-client';

import { HealthServer } from '../common/health-server';
import { componentLogger, createRootLogger, LogComponent } from '../common/log';
import { buildOnboarding } from './onboarding/start';
import { loadProvisionConfig } from './provision/config';
import { Provisioner } from './provision/provisioner';

/**
 * Runs the provisioner until SIGTERM.
 *
 * @throws ConfigError naming every bad variable, before anything starts.
 */
export async function runProvisioner(): Promise<void> {
  const config = loadProvisionConfig();
  const log = componentLogger(
    createRootLogger({ service: 'provisioner', level: config.logLevel }),
    LogComponent.Main,
  );
  const kc = new KubeConfig();
  if (config.kubeconfigPath === undefined) kc.loadFromCluster();
  else kc.loadFromFile(config.kubeconfigPath);
  const provisioner = new Provisioner({
    core: kc.makeApiClient(CoreV1Api),
    namespace: config.namespace,
    external: config.external,
    log,
  });
  let ready = false;
  const health = new HealthServer({
    port: config.healthPort,
    isReady: () => ready,
    registry: new Registry(),
  });
  await health.start();
  let timer: NodeJS.Timeout | undefined;
  let stopping = false;
  const onboarding =
    config.onboarding === undefined
      ? undefined
      : buildOnboarding({
          kubeConfig: kc,
          controlPlaneNamespace: config.namespace,
          ...config.onboarding,
          log,
        });
  const pass = async (): Promise<void> => {
    try {
      const report = await provisioner.run();
      ready = report.outstanding.length === 0;
      if (report.written.length > 0) onboarding?.resync();
      log.info(
        { written: report.written.length, outstanding: report.outstanding.length },
        'provisioning pass done',
      );
    } catch (error) {
      ready = false;
      log.error({ err: error }, 'provisioning pass failed; trying again');
    }
    // Something outstanding (a user's Secret to fix, cert-manager not done) is checked
    // again sooner than a renewal comes due.
    if (!stopping) {
      timer = setTimeout(
        () => void pass(),
        ready ? config.intervalMs : Math.min(config.intervalMs, 15_000),
      );
    }
  };
  const stop = (): void => {
    stopping = true;
    clearTimeout(timer);
    void Promise.all([health.close(), onboarding?.close()]).then(() => process.exit(0));
  };
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
  await pass();
  // After the first pass, so the Secrets the credentials come from exist on a new install.
  await onboarding?.start();
}
