import { describe, expect, it } from '@jest/globals';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ConfigError } from '../../common/config';
import { loadPaymentConfig } from './payment-config';
import { offlineKubeConfig } from '../../test/support/offline-kube-config';

// The control plane's payment settings: off unless a protocol is named, in the order named;
// MPP only with a token table, each row checked and a bad one named; a clear error for a
// protocol it does not pay. A directory store refuses a wallet it has no file for, naming it.

const kc = offlineKubeConfig();

const USDC = '0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913';
const usdc = { network: 'eip155:8453', asset: USDC, name: 'USD Coin', version: '2' };
const tokens = (rows: unknown): string => JSON.stringify(rows);
const load = (env: Record<string, string>) => loadPaymentConfig(kc, 'polychrome-system', env);

/** The one problem a configuration has, as `variable: message`. */
function problem(env: Record<string, string>): string {
  try {
    load(env);
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    expect(error.issues).toHaveLength(1);
    return `${error.issues[0]!.variable}: ${error.issues[0]!.message}`;
  }
  throw new Error('the configuration was accepted');
}

describe('payment settings', () => {
  it('are off when no protocol is named', () => {
    expect(load({})).toBeUndefined();
    expect(load({ POLYCHROME_WALLET_DIR: '/w' })).toBeUndefined();
  });

  it('pay x402 from a directory store when one is named', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'polychrome-wallets-'));
    try {
      const config = load({ POLYCHROME_PAYMENT_PROTOCOLS: 'x402', POLYCHROME_WALLET_DIR: dir });
      expect(config?.protocols.map((p) => p.name)).toEqual(['x402']);
      await expect(config?.wallets.wallet('ops')).rejects.toThrow('ops');
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it.each([
    ['mpp', ['mpp']],
    ['x402,mpp', ['x402', 'mpp']],
    [' mpp , x402 ', ['mpp', 'x402']],
  ])('pay %j in the order named, MPP with its token table', (protocols, names) => {
    const config = load({
      POLYCHROME_PAYMENT_PROTOCOLS: protocols,
      POLYCHROME_MPP_TOKENS: tokens([usdc]),
    });
    expect(config?.protocols.map((p) => p.name)).toEqual(names);
  });

  it('give MPP exactly the tokens of its table, by network and address in any case', () => {
    const config = load({
      POLYCHROME_PAYMENT_PROTOCOLS: 'mpp',
      POLYCHROME_MPP_TOKENS: tokens([usdc, { ...usdc, network: 'eip155:1', name: 'Other' }]),
    });
    const mpp = config?.protocols[0];
    const request = (currency: string, chainId: number) =>
      Buffer.from(
        JSON.stringify({ amount: '5', currency, recipient: USDC, methodDetails: { chainId } }),
      ).toString('base64url');
    const challenge = (currency: string, chainId: number) =>
      `Payment id="i", realm="r", method="evm", intent="charge", request="${request(currency, chainId)}"`;
    const at = new Date('2026-12-07T00:00:00Z');
    const url = 'https://api.example.com/paid';
    expect(
      mpp?.parse(challenge(USDC.toUpperCase().replace('0X', '0x'), 8453), url, at),
    ).toMatchObject({ asset: USDC.toLowerCase(), network: 'eip155:8453' });
    expect(mpp?.parse(challenge(USDC, 1), url, at).network).toBe('eip155:1');
    expect(() => mpp?.parse(challenge(USDC, 10), url, at)).toThrow(
      "a token the control plane's MPP token table does not list",
    );
    expect(() =>
      mpp?.parse(challenge('0x0000000000000000000000000000000000000001', 8453), url, at),
    ).toThrow('request.currency');
  });

  it.each([
    [
      'lightning',
      undefined,
      'POLYCHROME_PAYMENT_PROTOCOLS: "lightning" is not a payment protocol; name x402 or mpp, or both separated by a comma',
    ],
    ['x402,X402', undefined, 'POLYCHROME_PAYMENT_PROTOCOLS: "X402" is not a payment protocol'],
    ['x402,x402', undefined, 'POLYCHROME_PAYMENT_PROTOCOLS: names x402 twice; name it once'],
    [
      'mpp',
      undefined,
      'POLYCHROME_MPP_TOKENS: is required when POLYCHROME_PAYMENT_PROTOCOLS names mpp',
    ],
    ['mpp', '[]', 'POLYCHROME_MPP_TOKENS: is required when POLYCHROME_PAYMENT_PROTOCOLS names mpp'],
    [
      'x402',
      tokens([usdc]),
      'POLYCHROME_MPP_TOKENS: is set but POLYCHROME_PAYMENT_PROTOCOLS does not name mpp',
    ],
    ['mpp', '[{"network":', 'POLYCHROME_MPP_TOKENS: is not valid JSON'],
    [
      'mpp',
      tokens(usdc),
      'POLYCHROME_MPP_TOKENS: the table is not a JSON list; each token is {"network": "eip155:<chain id>"',
    ],
    ['mpp', tokens([usdc, 'USDC']), 'POLYCHROME_MPP_TOKENS: [1] is not a JSON object'],
    [
      'mpp',
      tokens([{ ...usdc, chainId: 8453 }]),
      'POLYCHROME_MPP_TOKENS: [0].chainId is not a field of a token',
    ],
    [
      'mpp',
      tokens([{ ...usdc, name: undefined }]),
      'POLYCHROME_MPP_TOKENS: [0].name is missing or not a non-empty string',
    ],
    ['mpp', tokens([{ ...usdc, version: ' ' }]), 'POLYCHROME_MPP_TOKENS: [0].version is missing'],
    [
      'mpp',
      tokens([{ ...usdc, name: 'USD Coin ' }]),
      'POLYCHROME_MPP_TOKENS: [0].name ("USD Coin ") has white space around it',
    ],
    [
      'mpp',
      tokens([{ ...usdc, version: 2 }]),
      'POLYCHROME_MPP_TOKENS: [0].version is missing or not a non-empty string',
    ],
    [
      'mpp',
      tokens([{ ...usdc, network: '8453' }]),
      'POLYCHROME_MPP_TOKENS: [0].network ("8453") is not a CAIP-2 EVM network',
    ],
    [
      'mpp',
      tokens([{ ...usdc, network: 'solana:mainnet' }]),
      '[0].network ("solana:mainnet") is not a CAIP-2 EVM network',
    ],
    [
      'mpp',
      tokens([{ ...usdc, asset: '0x1234' }]),
      'POLYCHROME_MPP_TOKENS: [0].asset ("0x1234") is not a token contract address',
    ],
    [
      'mpp',
      tokens([usdc, { ...usdc, asset: USDC.toLowerCase(), name: 'Fake' }]),
      `POLYCHROME_MPP_TOKENS: [1] lists ${USDC.toLowerCase()} on eip155:8453 a second time`,
    ],
  ])(
    'refuses bad setting #%# (protocols %s), naming what is wrong',
    (protocols, table, message) => {
      const env: Record<string, string> = { POLYCHROME_PAYMENT_PROTOCOLS: protocols };
      if (table !== undefined) env.POLYCHROME_MPP_TOKENS = table;
      expect(problem(env)).toContain(message);
    },
  );
});
