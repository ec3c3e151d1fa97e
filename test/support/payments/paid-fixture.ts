import { privateKeyToAccount } from 'viem/accounts';
import type { Address, Hex } from 'viem';
import { startAnvil, type Anvil } from '../chain/anvil';
import { deployToken, fundedKey, type DeployedToken } from '../chain/token';
import { startX402Stack, type X402Stack } from './x402-stack';

/**
 * One chain, one token and one x402 stack for a test file: a payer wallet holding
 * `payerBalance` base units, a payee, and `GET /paid` costing `price`.
 */
export interface PaidFixture {
  readonly anvil: Anvil;
  readonly token: DeployedToken;
  readonly x402: X402Stack;
  /** The payer's private key (what a SecretStore holds for its wallet). */
  readonly payerKey: Hex;
  readonly payer: Address;
  readonly payee: Address;
  readonly price: string;
  close(): Promise<void>;
}

export async function startPaidFixture(
  price = '1250000',
  payerBalance = 10_000_000n,
): Promise<PaidFixture> {
  const anvil = await startAnvil();
  try {
    const token = await deployToken(anvil);
    const payerKey = await fundedKey(anvil);
    const payer = privateKeyToAccount(payerKey).address;
    const payee = privateKeyToAccount(await fundedKey(anvil)).address;
    await token.mint(payer, payerBalance);
    const x402 = await startX402Stack(anvil, await fundedKey(anvil), {
      token: token.address,
      payTo: payee,
      price,
    });
    return {
      anvil,
      token,
      x402,
      payerKey,
      payer,
      payee,
      price,
      close: async () => {
        await x402.close();
        await anvil.stop();
      },
    };
  } catch (error) {
    await anvil.stop();
    throw error;
  }
}
