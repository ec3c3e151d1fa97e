import { describe, expect, it } from '@jest/globals';
import { KubeConfig } from '@kubernetes/client-node';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadPaymentConfig } from './payment-config';

// The control plane's payment settings: off unless a protocol is named, and a clear error
// for one it does not pay. A directory store refuses a wallet it has no file for, naming it.

const kc = new KubeConfig();
kc.loadFromOptions({
  clusters: [{ name: 'c', server: 'https://127.0.0.1:1' }],
  users: [{ name: 'u' }],
  contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
  currentContext: 'x',
});

describe('payment settings', () => {
  it('are off when no protocol is named', () => {
    expect(loadPaymentConfig(kc, 'polychrome-system', {})).toBeUndefined();
    expect(
      loadPaymentConfig(kc, 'polychrome-system', { POLYCHROME_WALLET_DIR: '/w' }),
    ).toBeUndefined();
  });

  it('pay x402 from a directory store when one is named', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'polychrome-wallets-'));
    try {
      const config = loadPaymentConfig(kc, 'polychrome-system', {
        POLYCHROME_PAYMENT_PROTOCOLS: 'x402',
        POLYCHROME_WALLET_DIR: dir,
      });
      expect(config?.protocols.map((p) => p.name)).toEqual(['x402']);
      await expect(config?.wallets.wallet('ops')).rejects.toThrow('ops');
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it.each([
    ['mpp', 'mpp is not paid by the control plane yet'],
    ['x402,lightning', '"lightning" is not a payment protocol; name x402'],
  ])('refuses %s, naming it', (protocols, message) => {
    expect(() =>
      loadPaymentConfig(kc, 'polychrome-system', { POLYCHROME_PAYMENT_PROTOCOLS: protocols }),
    ).toThrow(message);
  });
});
