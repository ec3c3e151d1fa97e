import {
  createPublicClient,
  createTestClient,
  createWalletClient,
  defineChain,
  http,
  parseEther,
  type Abi,
  type Address,
  type Chain,
  type Hex,
  type PublicClient,
} from 'viem';
import { privateKeyToAccount, generatePrivateKey } from 'viem/accounts';
import { ANVIL_CHAIN_ID, type Anvil } from './anvil';
import { loadTokenArtifact } from './token-compiler';

/** The token's EIP-712 domain name and version (USDC uses "USD Coin" and "2"). */
export const TOKEN_NAME = 'Test USD';
export const TOKEN_VERSION = '2';
export const TOKEN_DECIMALS = 6;

/**
 * How often viem polls anvil (for receipts, blocks). anvil mines each transaction at once;
 * and viem's poll leaves one wait of this length pending after it stops, so a short one
 * lets jest exit as soon as the tests end.
 */
export const ANVIL_POLLING_MS = 50;

/** The viem chain for an anvil node. */
export function anvilChain(anvil: Anvil): Chain {
  return defineChain({
    id: ANVIL_CHAIN_ID,
    name: 'anvil',
    nativeCurrency: { name: 'Ether', symbol: 'ETH', decimals: 18 },
    rpcUrls: { default: { http: [anvil.rpcUrl] } },
  });
}

/** A deployed EIP-3009 token on anvil, with helpers for tests. */
export interface DeployedToken {
  readonly address: Address;
  readonly abi: Abi;
  readonly publicClient: PublicClient;
  /** Mints `amount` base units to `to` (as the deployer). */
  mint(to: Address, amount: bigint): Promise<void>;
  balanceOf(owner: Address): Promise<bigint>;
  authorizationState(authorizer: Address, nonce: Hex): Promise<boolean>;
}

/** A fresh private key with 10 ETH for gas on the node. */
export async function fundedKey(anvil: Anvil): Promise<Hex> {
  const key = generatePrivateKey();
  const test = createTestClient({
    chain: anvilChain(anvil),
    mode: 'anvil',
    transport: http(),
    pollingInterval: ANVIL_POLLING_MS,
  });
  await test.setBalance({ address: privateKeyToAccount(key).address, value: parseEther('10') });
  return key;
}

/** Deploys the committed token artifact from a fresh funded deployer. */
export async function deployToken(anvil: Anvil): Promise<DeployedToken> {
  const chain = anvilChain(anvil);
  const { abi, bytecode } = loadTokenArtifact();
  const tokenAbi = abi as Abi;
  const deployer = privateKeyToAccount(await fundedKey(anvil));
  const wallet = createWalletClient({
    account: deployer,
    chain,
    transport: http(),
    pollingInterval: ANVIL_POLLING_MS,
  });
  const publicClient = createPublicClient({
    chain,
    transport: http(),
    pollingInterval: ANVIL_POLLING_MS,
  });
  const hash = await wallet.deployContract({ abi: tokenAbi, bytecode, args: [TOKEN_NAME, 'TUSD'] });
  const receipt = await publicClient.waitForTransactionReceipt({ hash });
  const address = receipt.contractAddress;
  if (address === null || address === undefined)
    throw new Error('token deployment made no contract');
  return {
    address,
    abi: tokenAbi,
    publicClient,
    async mint(to, amount) {
      const tx = await wallet.writeContract({
        address,
        abi: tokenAbi,
        functionName: 'mint',
        args: [to, amount],
      });
      await publicClient.waitForTransactionReceipt({ hash: tx });
    },
    async balanceOf(owner) {
      return (await publicClient.readContract({
        address,
        abi: tokenAbi,
        functionName: 'balanceOf',
        args: [owner],
      })) as bigint;
    },
    async authorizationState(authorizer, nonce) {
      return (await publicClient.readContract({
        address,
        abi: tokenAbi,
        functionName: 'authorizationState',
        args: [authorizer, nonce],
      })) as boolean;
    },
  };
}
