/**
 * The provisioner's environment (config/control-plane/provisioner.yaml sets it):
 *
 * | variable | meaning | default |
 * |---|---|---|
 * | `POD_NAMESPACE` | the namespace whose Secrets it keeps (downward API) | required |
 * | `POLYCHROME_PROVISION_EXTERNAL` | comma-separated Secrets another issuer writes (cert-manager): checked, never written | empty |
 * | `POLYCHROME_PROVISION_INTERVAL_MS` | how often it checks again, to renew | 3600000 (1 h) |
 * | `POLYCHROME_HEALTH_PORT` | `/healthz`, `/readyz`, `/metrics` | 9090 |
 * | `POLYCHROME_LOG_LEVEL` | debug, info, warn, error, silent | info |
 * | `POLYCHROME_KUBECONFIG` | kubeconfig file (outside a cluster) | unset: in-cluster service account |
 * | `POLYCHROME_ONBOARDING` | onboard namespaces labelled `polychrome.dev/enabled=true` (operator/onboarding) | true |
 * | `POLYCHROME_ONBOARDING_RESYNC_MS` | how often every onboarded namespace is synced again (rotation, drift) | 120000 (2 min) |
 * | `POLYCHROME_HARNESS_IMAGE` | the harness image of the onboarded SandboxTemplate | unset: config/sandbox's |
 * | `POD_NAME` | this pod, as its Events' reporting instance (downward API) | `polychrome-provisioner` |
 */
import { z } from 'zod';

import {
  envBool,
  envEnum,
  envInt,
  envList,
  envOptionalString,
  envPort,
  envString,
  parseConfig,
  type Env,
} from '../../common/config';
import { LogLevel } from '../../common/log';
import { SECRET_NAMES } from './catalog';

const known: ReadonlySet<string> = new Set(SECRET_NAMES);

const schema = z.object({
  POD_NAMESPACE: envString(),
  POLYCHROME_PROVISION_EXTERNAL: envList().superRefine((names, ctx) => {
    for (const name of names.filter((n) => !known.has(n))) {
      ctx.addIssue({
        code: 'custom',
        message: `names ${name}, which is not a Secret the provisioner keeps (${SECRET_NAMES.join(', ')})`,
      });
    }
  }),
  POLYCHROME_PROVISION_INTERVAL_MS: envInt({ default: 3_600_000, min: 1_000, max: 86_400_000 }),
  POLYCHROME_HEALTH_PORT: envPort(9090),
  POLYCHROME_KUBECONFIG: envOptionalString(),
  POLYCHROME_ONBOARDING: envBool(true),
  POLYCHROME_ONBOARDING_RESYNC_MS: envInt({ default: 120_000, min: 1_000, max: 86_400_000 }),
  POLYCHROME_HARNESS_IMAGE: envOptionalString(),
  POD_NAME: envString({ default: 'polychrome-provisioner' }),
  POLYCHROME_LOG_LEVEL: envEnum(
    [LogLevel.Debug, LogLevel.Info, LogLevel.Warn, LogLevel.Error, LogLevel.Silent],
    LogLevel.Info,
  ),
});

/** The provisioner's settings. */
export interface ProvisionConfig {
  readonly namespace: string;
  readonly external: ReadonlySet<string>;
  readonly intervalMs: number;
  readonly healthPort: number;
  readonly logLevel: LogLevel;
  /** Unset: the pod's ServiceAccount (in-cluster). */
  readonly kubeconfigPath: string | undefined;
  /** Namespace onboarding (operator/onboarding); undefined when turned off. */
  readonly onboarding:
    | {
        readonly resyncMs: number;
        readonly harnessImage: string | undefined;
        readonly podName: string;
      }
    | undefined;
}

/**
 * Reads the environment.
 *
 * @throws ConfigError naming every bad variable.
 */
export function loadProvisionConfig(env: Env = process.env): ProvisionConfig {
  const c = parseConfig('provisioner', schema, env);
  return {
    namespace: c.POD_NAMESPACE,
    external: new Set(c.POLYCHROME_PROVISION_EXTERNAL),
    intervalMs: c.POLYCHROME_PROVISION_INTERVAL_MS,
    healthPort: c.POLYCHROME_HEALTH_PORT,
    logLevel: c.POLYCHROME_LOG_LEVEL,
    kubeconfigPath: c.POLYCHROME_KUBECONFIG,
    onboarding: c.POLYCHROME_ONBOARDING
      ? {
          resyncMs: c.POLYCHROME_ONBOARDING_RESYNC_MS,
          harnessImage: c.POLYCHROME_HARNESS_IMAGE,
          podName: c.POD_NAME,
        }
      : undefined,
  };
}
