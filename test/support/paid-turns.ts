/**
 * Real turns that pay (docs/payments.md, "A paid call in a turn"): {@link startRealTurns}
 * with the harness's built-in `fetch`, the control plane configured as a deployment is
 * (`loadPaymentConfig` over `POLYCHROME_PAYMENT_PROTOCOLS`, the MPP token table listing the
 * test token, and `POLYCHROME_WALLET_DIR`), and {@link startPaidFixture}'s chain, token and
 * sellers: the model's `fetch` calls `GET /paid` of the x402 stack, or of the mppx server,
 * whose 402 offers both MPP and x402. One conversation, owned by {@link TEST_OWNER}.
 */
import { rm } from 'node:fs/promises';
import { KubeConfig } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import type { JournalEntry } from '../../common/state-journal';
import { formatUnits } from 'viem';
import type { ScriptReply } from '../../harness/model/scripted-provider';
import { loadPaymentConfig } from '../../operator/payments/payment-config';
import { TOKEN_DECIMALS } from './chain/token';
import { readyStatus } from './in-memory-conversations';
import {
  fixtureMppTokens,
  fixtureSpendLimits,
  fixtureWalletDir,
  startPaidFixture,
  type PaidFixture,
} from './payments/paid-fixture';
import {
  startRealTurns,
  TEST_ADMIN,
  TEST_OWNER,
  textReply,
  type RealTurns,
  type RealTurnsOptions,
} from './real-turns';
import { FETCH_EXTRA_TOOLS } from './scripted-harness';
import { startMppMcpServer } from './payments/mpp-mcp-server';
import { startX402McpServer } from './payments/x402-mcp-server';
import { mcpResourceUrl } from '../../common/payment-approval';

/** The wallet's name in the store. */
export const PAID_WALLET = 'ops';

/**
 * Who sells: `GET /paid` of the x402 stack, or of the mppx server (offering MPP and x402),
 * bought with `fetch`; or the tool `shop/report` of an MCP server paid over x402's MCP
 * transport (x402-mcp-server.ts) or MPP's (mpp-mcp-server.ts), bought by calling it.
 */
export type Seller = 'x402' | 'mpp' | 'x402-mcp' | 'mpp-mcp';

/** The MCP seller's server name and tool, as the model calls it. */
export const PAID_MCP_TOOL = 'shop/report';

export interface PaidTurns {
  readonly fixture: PaidFixture;
  readonly turns: RealTurns;
  readonly conversationId: string;
  /** The resource the model buys. */
  readonly paidUrl: string;
  /** How many times the seller's paid handler ran (only after a payment it took). */
  paidHandlerRuns(): number;
  /** A model reply that buys {@link paidUrl} under tool call `id`. */
  buyReply(id: string): ScriptReply;
  /**
   * Links {@link PAID_WALLET} with limits that allow `maxPerPayment` of the token to the
   * payee, and `maxPerPeriod` an hour (default four payments).
   */
  link(maxPerPayment: string, maxPerPeriod?: string): Promise<void>;
  close(): Promise<void>;
}

/** Starts it all; `replies(buy)` is the scripted model's script. */
export async function startPaidTurns(options: {
  /** In base units of the token, whoever sells. */
  readonly price: string;
  readonly logger: Logger;
  /** `buy(id)` fetches the paid URL, `free(id)` the x402 stack's unpaid `GET /free`. */
  readonly replies: (
    buy: (id: string) => ScriptReply,
    free: (id: string) => ScriptReply,
  ) => readonly ScriptReply[];
  /** `POLYCHROME_PAYMENT_PROTOCOLS`. @default "x402" */
  readonly protocols?: string;
  /** @default "x402" */
  readonly seller?: Seller;
  /**
   * The chain, token and sellers of another control plane, as a control plane started
   * afresh would find them; this one does not stop them. @default a fixture of its own
   */
  readonly fixture?: PaidFixture;
  /** More coordinator options (the persona payment records). */
  readonly coordinator?: RealTurnsOptions['coordinator'];
}): Promise<PaidTurns> {
  const seller = options.seller ?? 'x402';
  const fixture =
    options.fixture ??
    (await startPaidFixture({
      price: options.price,
      ...(seller === 'mpp'
        ? { mppAmount: formatUnits(BigInt(options.price), TOKEN_DECIMALS) }
        : {}),
    }));
  // A chain another control plane started is that one's to stop.
  const closeFixture = () => (options.fixture === undefined ? fixture.close() : Promise.resolve());
  const walletDir = await fixtureWalletDir(fixture, PAID_WALLET);
  const offer = {
    facilitatorUrl: fixture.x402.facilitatorUrl,
    token: fixture.token.address,
    payTo: fixture.payee,
  };
  const mcpSeller =
    seller === 'x402-mcp'
      ? await startX402McpServer({ ...offer, price: options.price })
      : seller === 'mpp-mcp'
        ? await startMppMcpServer({
            ...offer,
            amount: formatUnits(BigInt(options.price), TOKEN_DECIMALS),
          })
        : undefined;
  const mpp = fixture.mpp;
  const fetchReply =
    (url: string) =>
    (id: string): ScriptReply => ({
      content: [{ tool_use: { id, name: 'fetch', input: { url } } }],
    });
  const sold =
    mcpSeller === undefined
      ? {
          paidUrl: `${mpp === undefined ? fixture.x402.resourceUrl : mpp.url}/paid`,
          runs: mpp?.paidHandlerRuns ?? fixture.x402.paidHandlerRuns,
        }
      : { paidUrl: mcpResourceUrl(PAID_MCP_TOOL) ?? '', runs: mcpSeller.runs };
  const { paidUrl, runs: paidHandlerRuns } = sold;
  const buyReply =
    mcpSeller === undefined
      ? fetchReply(paidUrl)
      : (id: string): ScriptReply => ({
          content: [{ tool_use: { id, name: PAID_MCP_TOOL, input: { topic: 'tides' } } }],
        });
  const stop = async (): Promise<void> => {
    await mcpSeller?.close();
    await closeFixture();
    await rm(walletDir, { recursive: true, force: true });
  };
  let turns: RealTurns | undefined;
  try {
    const started = await startRealTurns({
      replies: options.replies(buyReply, fetchReply(`${fixture.x402.resourceUrl}/free`)),
      logger: options.logger,
      admins: [TEST_ADMIN.identity],
      spec: { tools: { builtin: ['fetch'] } },
      extraTools: FETCH_EXTRA_TOOLS,
      ...(mcpSeller === undefined
        ? {}
        : { mcpServers: [{ name: 'shop', transport: 'http' as const, url: mcpSeller.url }] }),
      coordinator: {
        ...options.coordinator,
        payments: paymentConfig(options.protocols ?? 'x402', fixture, walletDir),
      },
    });
    turns = started;
    const conversation = started.conversations.add(
      { owner: TEST_OWNER.identity },
      { status: readyStatus(started.harness.endpoint) },
    );
    const conversationId = conversation.metadata.uid ?? '';
    return {
      fixture,
      turns: started,
      conversationId,
      paidUrl,
      paidHandlerRuns,
      buyReply,
      async link(maxPerPayment, maxPerPeriod) {
        const limits = fixtureSpendLimits(fixture, maxPerPayment, maxPerPeriod);
        await started.coordinator.setPaymentPolicy(
          TEST_ADMIN,
          {
            conversationId,
            wallet: PAID_WALLET,
            limits,
            reason: 'the report budget',
            actor: TEST_ADMIN.identity,
          },
          AbortSignal.timeout(10_000),
        );
      },
      async close() {
        await started.close();
        await stop();
      },
    };
  } catch (error) {
    await turns?.close();
    await stop();
    throw error;
  }
}

/**
 * One paid call, approved: links the wallet for `price`, posts a message whose turn buys
 * (the script's next reply must be a buy), approves the payment as the admin, and returns
 * the conversation's journal once the turn settled.
 */
export async function buyApproved(paid: PaidTurns, price: string): Promise<JournalEntry[]> {
  const { turns, conversationId } = paid;
  const signal = AbortSignal.timeout(60_000);
  await paid.link(price);
  const paused = await turns.coordinator.postMessage(
    TEST_OWNER,
    { conversationId, text: 'buy the report', idempotencyKey: 'k1' },
    signal,
  );
  await turns.coordinator.answerApproval(
    TEST_ADMIN,
    { conversationId, requestId: paused.approval?.requestId ?? '', decision: 'approve' },
    signal,
  );
  return turns.journal.entries(`conv-${conversationId}`);
}

/** A conversation that made one approved paid call, and what an audit of it is given. */
export interface BoughtJournal {
  readonly paid: PaidTurns;
  /** The conversation's journal once the paid turn settled. */
  readonly entries: JournalEntry[];
  /** The control plane's approval public key (raw 32 bytes): its receipts verify with it. */
  readonly approvalKey: Uint8Array;
}

/**
 * Starts {@link startPaidTurns} with a model that buys once and says "Bought it.", makes
 * that call for `price` ({@link buyApproved}), and returns the journal; `paid.close()` ends it.
 */
export async function startBoughtJournal(price: string, logger: Logger): Promise<BoughtJournal> {
  const paid = await startPaidTurns({
    price,
    logger,
    replies: (buy) => [buy('toolu_buy'), textReply('Bought it.')],
  });
  const entries = await buyApproved(paid, price);
  return { paid, entries, approvalKey: paid.turns.approvals.publicKey };
}

/** The payment settings a deployment naming `protocols` gets, paying the fixture's token. */
function paymentConfig(
  protocols: string,
  fixture: PaidFixture,
  walletDir: string,
): NonNullable<ReturnType<typeof loadPaymentConfig>> {
  const env = {
    POLYCHROME_PAYMENT_PROTOCOLS: protocols,
    POLYCHROME_WALLET_DIR: walletDir,
    ...(protocols.includes('mpp') ? { POLYCHROME_MPP_TOKENS: fixtureMppTokens(fixture) } : {}),
  };
  const config = loadPaymentConfig(new KubeConfig(), 'polychrome-system', env);
  if (config === undefined) throw new Error(`no payment protocol in "${protocols}"`);
  return config;
}
