import { chmod, mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { privateKeyToAccount } from 'viem/accounts';
import type { Address, Hex } from 'viem';
import { ANVIL_NETWORK, startAnvil, type Anvil } from '../chain/anvil';
import {
  deployToken,
  fundedKey,
  TOKEN_NAME,
  TOKEN_VERSION,
  type DeployedToken,
} from '../chain/token';
import { startMppServer, type MppServer } from './mpp-server';
import { startX402Stack, type X402Stack } from './x402-stack';

/**
 * One chain, one token and one x402 stack for a test file: a payer wallet holding
 * `payerBalance` base units, a payee, and `GET /paid` costing `price`; with `mppAmount`,
 * also an MPP server whose `GET /paid` costs that (display units) through the same
 * facilitator.
 */
export interface PaidFixture {
  readonly anvil: Anvil;
  readonly token: DeployedToken;
  readonly x402: X402Stack;
  /** Present when started with `mppAmount`. */
  readonly mpp: MppServer | undefined;
  /** The payer's private key (what a SecretStore holds for its wallet). */
  readonly payerKey: Hex;
  readonly payer: Address;
  readonly payee: Address;
  readonly price: string;
  close(): Promise<void>;
}

/** What the fixture's routes cost. */
export interface PaidFixtureOptions {
  /** The x402 price in base units. @default "1250000" */
  readonly price?: string;
  /** @default 10_000_000n */
  readonly payerBalance?: bigint;
  /** The MPP price in display units; no MPP server without it. */
  readonly mppAmount?: string;
}

export async function startPaidFixture(options: PaidFixtureOptions = {}): Promise<PaidFixture> {
  const price = options.price ?? '1250000';
  const anvil = await startAnvil();
  // What is running, stopped newest first on close or when starting fails half-way.
  const running: (() => Promise<void>)[] = [() => anvil.stop()];
  const close = async (): Promise<void> => {
    for (const stop of [...running].reverse()) await stop();
  };
  try {
    const token = await deployToken(anvil);
    const payerKey = await fundedKey(anvil);
    const payer = privateKeyToAccount(payerKey).address;
    const payee = privateKeyToAccount(await fundedKey(anvil)).address;
    await token.mint(payer, options.payerBalance ?? 10_000_000n);
    const x402 = await startX402Stack(anvil, await fundedKey(anvil), {
      token: token.address,
      payTo: payee,
      price,
    });
    running.push(() => x402.close());
    let mpp: MppServer | undefined;
    if (options.mppAmount !== undefined) {
      const server = await startMppServer({
        token: token.address,
        payTo: payee,
        amount: options.mppAmount,
        facilitatorUrl: x402.facilitatorUrl,
      });
      running.push(() => server.close());
      mpp = server;
    }
    return { anvil, token, x402, mpp, payerKey, payer, payee, price, close };
  } catch (error) {
    await close();
    throw error;
  }
}

/** GETs `url`, expects a 402, and returns its `header` (the challenge) exactly as received. */
export async function fetchChallenge(url: string, header: string): Promise<string> {
  const response = await fetch(url);
  await response.arrayBuffer();
  const value = response.headers.get(header);
  if (response.status !== 402 || value === null) {
    throw new Error(`GET ${url} answered ${response.status} without ${header}`);
  }
  return value;
}

/**
 * Spend limits that allow `maxPerPayment` base units of the fixture's token to its payee,
 * and `maxPerPeriod` an hour (default four payments): what an admin links the wallet with.
 */
export function fixtureSpendLimits(
  fixture: Pick<PaidFixture, 'token' | 'payee'>,
  maxPerPayment: string,
  maxPerPeriod: string = (BigInt(maxPerPayment) * 4n).toString(),
) {
  return {
    networks: [ANVIL_NETWORK],
    assets: [{ network: ANVIL_NETWORK, asset: fixture.token.address, maxPerPayment, maxPerPeriod }],
    payees: [fixture.payee],
    periodSeconds: 3600,
  };
}

/** `POLYCHROME_MPP_TOKENS` listing the fixture's token with its EIP-712 domain. */
export function fixtureMppTokens(fixture: Pick<PaidFixture, 'token'>): string {
  const asset = fixture.token.address;
  return JSON.stringify([
    { network: ANVIL_NETWORK, asset, name: TOKEN_NAME, version: TOKEN_VERSION },
  ]);
}

/**
 * A new wallet directory (`POLYCHROME_WALLET_DIR`) holding the payer's key as wallet
 * `wallet`, mode 600 as the directory store demands; the caller removes it.
 */
export async function fixtureWalletDir(
  fixture: Pick<PaidFixture, 'payerKey'>,
  wallet: string,
): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'polychrome-wallets-'));
  const keyFile = join(dir, `${wallet}.private-key`);
  await writeFile(keyFile, fixture.payerKey);
  await chmod(keyFile, 0o600);
  return dir;
}
