/**
 * What the paid-call crash tests share (paid-turn-crashes, paid-mcp-crashes): holding the
 * state plane's appends of one event kind so a SIGKILL lands exactly there, approving the
 * payment's card, reading what the journal and the chain hold of the payment afterwards,
 * and replaying the conversation with the real CLI.
 */
import { expect } from '@jest/globals';
import { decodePayload, type EventKind, type EventPayloads } from '../../../common/event-kinds';
import { rm } from 'node:fs/promises';
import { pollUntil } from '../../../hack/lib/processes';
import { PAYMENT_APPROVAL_TOOL } from '../../../common/payment-approval';
import { Role } from '../../../common/persona-roles';
import { formatUnits } from 'viem';
import { TOKEN_DECIMALS } from '../../support/chain/token';
import {
  fixtureMppTokens,
  fixtureSpendLimits,
  fixtureWalletDir,
  startPaidFixture,
  type PaidFixture,
} from '../../support/payments/paid-fixture';
import { polychrome } from './polychrome-cli';
import { apiCall, linkWallet, postMessage, type ApiAnswer } from './public-api';
import { startTurnStack, type TurnStack } from './turn-stack';

/** How long the state plane holds the append at the crash point: longer than any kill. */
export const HOLD_MS = 4_000;

/** Who acts in a crash test, and what the payment costs. */
export interface CrashParties {
  readonly stack: TurnStack;
  readonly fixture: PaidFixture;
  readonly price: string;
  /** The admin's identity and token: approves, resolves, replays. */
  readonly admin: { readonly identity: string; readonly token: string };
  /** The conversation owner's token: posts the messages. */
  readonly ownerToken: string;
  /** The conversations made, by name. */
  readonly made: ReadonlyMap<string, string>;
}

/** What the journal holds of a conversation's payment, and how often the chain moved it. */
export interface Ledger {
  readonly kinds: string[];
  readonly charges: number;
  readonly sent: number;
  readonly receipts: number;
  /** Whole prices that reached the payee since the balance given. */
  readonly transfers: bigint;
  /** Base units that reached the payee and are not a whole price (always 0n when correct). */
  readonly remainder: bigint;
}

/** The crash tests' moves and reads over one stack and chain. */
export interface CrashKit {
  /**
   * Restarts the state plane holding every append that carries `kind` for {@link HOLD_MS}
   * (none without), then starts the control plane if it was killed and waits until it is
   * ready.
   */
  holdAppendsOf(kind: string | undefined): Promise<void>;
  /** Resolves once the state plane holds an append (the crash point is reached). */
  heldAppend(): Promise<void>;
  /**
   * Posts `text`; the turn pauses on the payment's card, charged over `protocol`. Returns
   * the approval request id.
   */
  askToPay(uid: string, text: string, key: string, protocol?: 'x402' | 'mpp'): Promise<string>;
  /** Approves as the admin; a crash of the server ends it with a network error. */
  approve(uid: string, requestId: string): Promise<ApiAnswer | Error>;
  ledger(uid: string, payeeBefore: bigint): Promise<Ledger>;
  /** The first event of `kind` in the conversation's journal, decoded (empty when none). */
  firstEvent<K extends EventKind>(uid: string, kind: K): Promise<EventPayloads[K]>;
  /** The hash of the newest transfer from the payer to the payee on the chain. */
  lastTransfer(): Promise<string>;
  /** Replay (the real CLI, through the control plane) reproduces the turn from the journal. */
  expectReplays(uid: string): Promise<void>;
}

function crashKit(parties: CrashParties): CrashKit {
  const { stack, fixture, price, admin, ownerToken } = parties;
  return {
    async holdAppendsOf(kind) {
      if (kind === undefined) delete stack.state.env.STATE_FAULT_APPEND_DELAY;
      else stack.state.env.STATE_FAULT_APPEND_DELAY = `${kind}:${HOLD_MS}`;
      await stack.state.restart('SIGTERM');
      if (!stack.controlPlane(0).running) stack.controlPlane(0).start();
      await stack.controlPlane(0).waitReady();
    },

    async heldAppend() {
      const held = (): number =>
        stack.state.logs.filter((line) => line.includes('fault injection: holding an append'))
          .length;
      const before = held();
      await pollUntil(
        'the held append',
        () => Promise.resolve(held() > before ? true : undefined),
        { timeoutMs: 60_000, intervalMs: 25 },
      );
    },

    async askToPay(uid, text, key, protocol = 'x402') {
      const paused = await postMessage(stack.apiUrl, ownerToken, uid, text, key);
      expect(paused.status).toBe(200);
      expect(paused.body).toMatchObject({
        status: 'paused',
        approval: { toolName: PAYMENT_APPROVAL_TOOL, args: { amount: price, protocol } },
      });
      return String((paused.body.approval as { requestId: string }).requestId);
    },

    approve(uid, requestId) {
      return apiCall(stack.apiUrl, 'POST', `/v1/conversations/${uid}/approvals/${requestId}`, {
        token: admin.token,
        body: { decision: 'approve' },
      }).catch((error: unknown) => (error instanceof Error ? error : new Error(String(error))));
    },

    async ledger(uid, payeeBefore) {
      const kinds = await stack.journalKinds(uid);
      const count = (kind: string): number => kinds.filter((k) => k === kind).length;
      const moved = (await fixture.token.balanceOf(fixture.payee)) - payeeBefore;
      return {
        kinds,
        charges: count('payment_charge'),
        sent: count('payment_sent'),
        receipts: count('outbound_payment_receipt'),
        transfers: moved / BigInt(price),
        remainder: moved % BigInt(price),
      };
    },

    async firstEvent(uid, kind) {
      const entry = (await stack.journal(uid)).find((e) => e.kind === kind);
      return decodePayload(kind, entry?.payload ?? new Uint8Array());
    },

    async lastTransfer() {
      const logs = await fixture.token.publicClient.getContractEvents({
        address: fixture.token.address,
        abi: fixture.token.abi,
        eventName: 'Transfer',
        args: { from: fixture.payer, to: fixture.payee },
        fromBlock: 0n,
      });
      const hash = logs.at(-1)?.transactionHash;
      if (hash === undefined || hash === null) throw new Error('no transfer on the chain');
      return hash;
    },

    async expectReplays(uid) {
      // Replay trusts the journal key the Conversation's status records: wait until it does.
      const head = (await stack.journal(uid)).length;
      const name = [...parties.made].find(([, made]) => made === uid)?.[0] ?? '';
      await stack.waitConversation(
        name,
        (obj) =>
          (obj as { status?: { journal?: { head?: number } } }).status?.journal?.head === head,
      );
      const args = [
        'conversation',
        'replay',
        uid,
        '--actor',
        admin.identity,
        '--api',
        stack.apiUrl,
      ];
      const replay = await polychrome(args, admin.token);
      expect({ code: replay.code, stderr: replay.stderr }).toEqual({ code: 0, stderr: '' });
      expect(replay.stdout).toContain('OK: 1 turns replayed');
    },
  };
}

const WALLET = 'ops';
const OWNER = 'test:payer-owner';
const ADMIN = 'test:payer-admin';

/**
 * A turn stack paying on anvil from a wallet directory, for SIGKILL tests: MPP preferred,
 * then x402 (the x402 stack's sellers offer x402 alone; the fixture's mppx server, whose
 * `GET /paid` offers both, is paid over MPP).
 */
export interface PaidCrashStack extends CrashKit {
  readonly stack: TurnStack;
  readonly fixture: PaidFixture;
  readonly ownerToken: string;
  readonly admin: { readonly identity: string; readonly token: string };
  /** Every paid conversation made, by name. */
  readonly made: ReadonlyMap<string, string>;
  /**
   * A conversation offered `tools` (its spec's field), with the wallet linked by an admin
   * (recorded) for one payment of the price.
   */
  paidConversation(name: string, tools: Record<string, unknown>): Promise<string>;
  stop(): Promise<void>;
}

/** Starts the chain, the sellers and the turn stack whose control plane pays `price`. */
export async function startPaidCrashStack(
  namespacePrefix: string,
  price: string,
): Promise<PaidCrashStack> {
  const fixture = await startPaidFixture({
    price,
    mppAmount: formatUnits(BigInt(price), TOKEN_DECIMALS),
  });
  const walletDir = await fixtureWalletDir(fixture, WALLET);
  const stop = async (stack?: TurnStack): Promise<void> => {
    await stack?.stop();
    await fixture.close();
    await rm(walletDir, { recursive: true, force: true });
  };
  let stack: TurnStack | undefined;
  try {
    stack = await startTurnStack({
      namespacePrefix,
      controlPlaneEnv: {
        POLYCHROME_PAYMENT_PROTOCOLS: 'mpp,x402',
        POLYCHROME_MPP_TOKENS: fixtureMppTokens(fixture),
        POLYCHROME_WALLET_DIR: walletDir,
        // A dead harness is found quickly; the turn waits for the restarted pod.
        POLYCHROME_TURN_SANDBOX_WAIT_MS: '60000',
      },
    });
    const running = stack;
    const ownerToken = await running.mintToken(OWNER);
    const admin = { identity: ADMIN, token: await running.mintToken(ADMIN, [Role.Admin]) };
    const made = new Map<string, string>();
    return {
      ...crashKit({ stack: running, fixture, price, admin, ownerToken, made }),
      stack: running,
      fixture,
      ownerToken,
      admin,
      made,
      async paidConversation(name, tools) {
        const uid = await running.createConversation(name, { owner: OWNER, tools });
        const linked = await linkWallet(running.apiUrl, admin.token, uid, {
          actor: ADMIN,
          wallet: WALLET,
          limits: fixtureSpendLimits(fixture, price),
        });
        expect(linked.status).toBe(200);
        made.set(name, uid);
        return uid;
      },
      stop: () => stop(running),
    };
  } catch (error) {
    await stop(stack);
    throw error;
  }
}
