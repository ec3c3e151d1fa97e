import { CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import { z } from 'zod';
import { envList, envOptionalString, parseConfig, type Env } from '../../common/config';
import { x402Protocol, type PaymentProtocol } from './payment-protocol';
import {
  directorySecretStore,
  kubernetesSecretReader,
  kubernetesSecretStore,
} from './secret-store';
import type { SecretStore } from './secret-store';

/**
 * The control plane's payment settings (docs/payments.md, "Turning payments on"), from its
 * environment. Off unless named: with no protocol every charge is refused, whatever wallet
 * an admin linked.
 *
 * | variable | meaning | default |
 * |---|---|---|
 * | `POLYCHROME_PAYMENT_PROTOCOLS` | the protocols the control plane pays, in the order it prefers them: `x402` | none: payments off |
 * | `POLYCHROME_WALLET_DIR` | a directory of `<wallet>.private-key` files (mode 600), for development | unset: the Secrets `polychrome-wallet-<wallet>` of the control plane's namespace |
 */

const schema = z.object({
  POLYCHROME_PAYMENT_PROTOCOLS: envList().superRefine((names, ctx) => {
    for (const name of names) {
      if (name === 'x402') continue;
      ctx.addIssue({
        code: 'custom',
        message:
          name === 'mpp'
            ? 'mpp is not paid by the control plane yet (its token table cannot be configured); name x402'
            : `"${name}" is not a payment protocol; name x402`,
      });
    }
  }),
  POLYCHROME_WALLET_DIR: envOptionalString(),
});

/** What the coordinator pays with (operator/turns/pay-charge.ts `PaymentSettings`). */
export interface PaymentConfig {
  readonly protocols: readonly PaymentProtocol[];
  readonly wallets: SecretStore;
}

/**
 * The settings, or undefined when payments are off.
 *
 * @throws ConfigError naming a protocol it does not pay.
 */
export function loadPaymentConfig(
  kubeConfig: KubeConfig,
  namespace: string,
  env?: Env,
): PaymentConfig | undefined {
  const c = parseConfig('control plane', schema, env);
  if (c.POLYCHROME_PAYMENT_PROTOCOLS.length === 0) return undefined;
  const wallets =
    c.POLYCHROME_WALLET_DIR === undefined
      ? kubernetesSecretStore(
          kubernetesSecretReader(kubeConfig.makeApiClient(CoreV1Api)),
          namespace,
        )
      : directorySecretStore(c.POLYCHROME_WALLET_DIR);
  return { protocols: c.POLYCHROME_PAYMENT_PROTOCOLS.map(() => x402Protocol()), wallets };
}
