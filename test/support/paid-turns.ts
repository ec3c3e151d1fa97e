/**
 * Real turns that pay (docs/payments.md, "A paid call in a turn"): {@link startRealTurns}
 * with the harness's built-in `fetch`, the control plane paying x402 from a wallet in a
 * directory SecretStore, and {@link startPaidFixture}'s chain, token and x402 stack, whose
 * `GET /paid` the model's `fetch` calls. One conversation, owned by {@link TEST_OWNER}.
 */
import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Logger } from 'pino';
import type { JournalEntry } from '../../common/state-journal';
import type { ScriptReply } from '../../harness/model/scripted-provider';
import { x402Protocol } from '../../operator/payments/payment-protocol';
import { directorySecretStore } from '../../operator/payments/secret-store';
import { ANVIL_NETWORK } from './chain/anvil';
import { readyStatus } from './in-memory-conversations';
import { startPaidFixture, type PaidFixture } from './payments/paid-fixture';
import { startRealTurns, TEST_ADMIN, TEST_OWNER, type RealTurns } from './real-turns';
import { FETCH_EXTRA_TOOLS } from './scripted-harness';

/** The wallet's name in the store. */
export const PAID_WALLET = 'ops';

export interface PaidTurns {
  readonly fixture: PaidFixture;
  readonly turns: RealTurns;
  readonly conversationId: string;
  /** The x402 resource the model buys. */
  readonly paidUrl: string;
  /** A model reply that `fetch`es {@link paidUrl} under tool call `id`. */
  buyReply(id: string): ScriptReply;
  /** Links {@link PAID_WALLET} with limits that allow `maxPerPayment` of the token to the payee. */
  link(maxPerPayment: string): Promise<void>;
  close(): Promise<void>;
}

/** Starts it all; `replies(paidUrl)` is the scripted model's script. */
export async function startPaidTurns(options: {
  readonly price: string;
  readonly logger: Logger;
  readonly replies: (buy: (id: string) => ScriptReply) => readonly ScriptReply[];
}): Promise<PaidTurns> {
  const fixture = await startPaidFixture({ price: options.price });
  const walletDir = await mkdtemp(join(tmpdir(), 'polychrome-wallets-'));
  const paidUrl = `${fixture.x402.resourceUrl}/paid`;
  const buyReply = (id: string): ScriptReply => ({
    content: [{ tool_use: { id, name: 'fetch', input: { url: paidUrl } } }],
  });
  let turns: RealTurns | undefined;
  try {
    const keyFile = join(walletDir, `${PAID_WALLET}.private-key`);
    await writeFile(keyFile, fixture.payerKey);
    await chmod(keyFile, 0o600);
    const started = await startRealTurns({
      replies: options.replies(buyReply),
      logger: options.logger,
      admins: [TEST_ADMIN.identity],
      spec: { tools: { builtin: ['fetch'] } },
      extraTools: FETCH_EXTRA_TOOLS,
      coordinator: {
        payments: { protocols: [x402Protocol()], wallets: directorySecretStore(walletDir) },
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
      buyReply,
      async link(maxPerPayment) {
        const limits = {
          networks: [ANVIL_NETWORK],
          assets: [
            {
              network: ANVIL_NETWORK,
              asset: fixture.token.address,
              maxPerPayment,
              maxPerPeriod: (BigInt(maxPerPayment) * 4n).toString(),
            },
          ],
          payees: [fixture.payee],
          periodSeconds: 3600,
        };
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
        await fixture.close();
        await rm(walletDir, { recursive: true, force: true });
      },
    };
  } catch (error) {
    await turns?.close();
    await fixture.close();
    await rm(walletDir, { recursive: true, force: true });
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
