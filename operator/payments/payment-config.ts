import { CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import { z } from 'zod';
import { isAppError } from '../../common/errors';
import { envJson, envList, envOptionalString, parseConfig, type Env } from '../../common/config';
import { PaymentProtocolName } from './charge';
import { mppTokenDomains, parseMppTokens, type MppToken } from './mpp-tokens';
import { mppProtocol, x402Protocol, type PaymentProtocol } from './payment-protocol';
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
 * | `POLYCHROME_PAYMENT_PROTOCOLS` | the protocols the control plane pays, in the order it prefers them when a 402 offers several: `x402`, `mpp`, or both (`x402,mpp`) | none: payments off |
 * | `POLYCHROME_MPP_TOKENS` | MPP's token table, JSON: `[{"network": "eip155:<chain id>", "asset": "0x...", "name": "<EIP-712 domain name>", "version": "<EIP-712 domain version>"}]`; required when `mpp` is named, refused otherwise | none |
 * | `POLYCHROME_WALLET_DIR` | a directory of `<wallet>.private-key` files (mode 600), for development | unset: the Secrets `polychrome-wallet-<wallet>` of the control plane's namespace |
 */

const PROTOCOLS: readonly string[] = Object.values(PaymentProtocolName);
const NAME_THEM = `name ${PROTOCOLS.join(' or ')}, or both separated by a comma`;

const schema = z
  .object({
    POLYCHROME_PAYMENT_PROTOCOLS: envList().transform((names, ctx) => {
      names.forEach((name, index) => {
        if (!PROTOCOLS.includes(name)) {
          ctx.addIssue({
            code: 'custom',
            message: `"${name}" is not a payment protocol; ${NAME_THEM}`,
          });
        } else if (names.indexOf(name) !== index) {
          ctx.addIssue({ code: 'custom', message: `names ${name} twice; name it once` });
        }
      });
      return names as PaymentProtocolName[];
    }),
    POLYCHROME_MPP_TOKENS: envJson(z.unknown(), []).transform((value, ctx): readonly MppToken[] => {
      try {
        return parseMppTokens(value);
      } catch (error) {
        if (!isAppError(error)) throw error;
        ctx.addIssue({ code: 'custom', message: error.message });
        return z.NEVER;
      }
    }),
    POLYCHROME_WALLET_DIR: envOptionalString(),
  })
  .superRefine((env, ctx) => {
    const mpp = env.POLYCHROME_PAYMENT_PROTOCOLS.includes(PaymentProtocolName.Mpp);
    if (mpp && env.POLYCHROME_MPP_TOKENS.length === 0) {
      ctx.addIssue({
        code: 'custom',
        path: ['POLYCHROME_MPP_TOKENS'],
        message:
          'is required when POLYCHROME_PAYMENT_PROTOCOLS names mpp: a JSON list of the tokens MPP is paid in, each {"network", "asset", "name", "version"} with its EIP-712 domain name and version (docs/payments.md, "Turning payments on")',
      });
    }
    if (!mpp && env.POLYCHROME_MPP_TOKENS.length > 0) {
      ctx.addIssue({
        code: 'custom',
        path: ['POLYCHROME_MPP_TOKENS'],
        message:
          'is set but POLYCHROME_PAYMENT_PROTOCOLS does not name mpp; name mpp there, or unset this',
      });
    }
  });

/** What the coordinator pays with (operator/turns/pay-charge.ts `PaymentSettings`). */
export interface PaymentConfig {
  readonly protocols: readonly PaymentProtocol[];
  readonly wallets: SecretStore;
}

/**
 * The settings, or undefined when payments are off.
 *
 * @throws ConfigError naming a protocol it does not pay, or a bad row of the MPP token table.
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
  const protocols = c.POLYCHROME_PAYMENT_PROTOCOLS.map((name) =>
    name === PaymentProtocolName.Mpp
      ? mppProtocol(mppTokenDomains(c.POLYCHROME_MPP_TOKENS))
      : x402Protocol(),
  );
  return { protocols, wallets };
}
