import { KubeConfig } from '@kubernetes/client-node';

/**
 * A KubeConfig whose cluster nothing listens on (127.0.0.1:1), for loaders that build an API
 * client but that a test never lets call it, such as the control plane's payment settings
 * (operator/payments/payment-config.ts) read without a wallet read.
 */
export function offlineKubeConfig(): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'c', server: 'https://127.0.0.1:1' }],
    users: [{ name: 'u' }],
    contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
    currentContext: 'x',
  });
  return kc;
}
