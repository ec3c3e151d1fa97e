import { x402Client, x402HTTPClient } from '@x402/core/client';
import type { PaymentPayload, PaymentRequirements, SchemeNetworkClient } from '@x402/core/types';
import { authorizationTypes } from '@x402/evm';
import { getAddress } from 'viem';
import { challengeDigest, type Charge } from './charge';
import { paidResponse, readBody, refuseIfExpired, sendPaid } from './send-paid';
import {
  SettlementError,
  SettlementOutcome,
  type PaidResponse,
  type SettleInput,
} from './settlement';
import type { Wallet } from './wallet';
import { parseX402Challenge, type X402Challenge } from './x402-challenge';

/**
 * Pays an approved x402 charge: signs the EIP-3009 authorization with the wallet, sends
 * the request again with `PAYMENT-SIGNATURE` (encoded by `@x402/core`'s HTTP client), and
 * reads the settlement from `PAYMENT-RESPONSE`.
 *
 * The authorization's nonce is the idempotency key and its `validBefore` the charge's
 * expiry, so a retry of the same payment signs the same authorization and the token
 * contract refuses to move money for it twice ("authorization is used").
 */
export async function settleX402(input: SettleInput): Promise<PaidResponse> {
  const { charge, challenge, wallet, request, idempotencyKey } = input;
  const options = input.options ?? {};
  const parsed = boundChallenge(charge, challenge, request.url);
  refuseIfExpired(charge.expiresAt, (options.now ?? (() => new Date()))());
  const payload = await signX402Payment(parsed, wallet, idempotencyKey, charge.expiresAt);
  const http = new x402HTTPClient(new x402Client());
  const headers = http.encodePaymentSignatureHeader(payload);
  const response = await sendPaid(request, headers, options);
  const body = await readBody(response);
  const receipt = response.headers.get('payment-response');
  if (receipt === null) {
    throw new SettlementError(
      response.status === 402 ? SettlementOutcome.Rejected : SettlementOutcome.Unknown,
      `the paid request answered ${response.status} without PAYMENT-RESPONSE`,
      { status: String(response.status) },
    );
  }
  let settled: {
    success: boolean;
    transaction?: string;
    network?: string;
    payer?: string;
    errorReason?: string;
  };
  try {
    settled = http.getPaymentSettleResponse((name) => response.headers.get(name));
  } catch {
    throw new SettlementError(
      SettlementOutcome.Unknown,
      'the PAYMENT-RESPONSE header could not be decoded',
    );
  }
  if (!settled.success || response.status >= 400) {
    throw new SettlementError(
      SettlementOutcome.Rejected,
      `the server did not settle the x402 payment (${String(settled.errorReason ?? response.status)})`,
      { status: String(response.status) },
    );
  }
  return paidResponse(
    response,
    body,
    {
      protocol: charge.protocol,
      transaction: settled.transaction ?? '',
      payer: (settled.payer ?? wallet.address).toLowerCase(),
      network: settled.network ?? charge.network,
      idempotencyKey,
      upstreamReceipt: receipt,
    },
    'PAYMENT-RESPONSE',
  );
}

/**
 * Signs the `PaymentPayload` of an approved challenge with the wallet (`@x402/core`'s client
 * with {@link eip3009Client}): the same charge, key and expiry always sign the same
 * authorization. Fails `refused` (nothing left the process) when it cannot be signed.
 */
export async function signX402Payment(
  parsed: X402Challenge,
  wallet: Wallet,
  idempotencyKey: string,
  expiresAt: string,
): Promise<PaymentPayload> {
  const client = new x402Client()
    .register(parsed.requirements.network, eip3009Client(wallet, idempotencyKey, expiresAt))
    .setSpendControls(false);
  try {
    return await client.createPaymentPayload(parsed.paymentRequired as never);
  } catch (error) {
    throw new SettlementError(
      SettlementOutcome.Refused,
      `the x402 payment could not be signed (${(error as Error).message.slice(0, 200)}); nothing was sent`,
    );
  }
}

/**
 * Re-parses the challenge (with `parse`: the header's, or the MCP transport's) and checks
 * it is the one the charge was approved for.
 */
export function boundChallenge(
  charge: Charge,
  challenge: string,
  url: string,
  parse: typeof parseX402Challenge = parseX402Challenge,
): X402Challenge {
  if (challengeDigest(challenge) !== charge.challengeDigest || charge.resourceUrl !== url) {
    throw new SettlementError(
      SettlementOutcome.Refused,
      'the challenge or URL is not the one the charge was approved for; a new approval is needed',
    );
  }
  const parsed = parse(challenge, url, new Date(0));
  const same =
    parsed.charge.amount === charge.amount &&
    parsed.charge.asset === charge.asset &&
    parsed.charge.payee === charge.payee &&
    parsed.charge.network === charge.network;
  if (!same) {
    throw new SettlementError(
      SettlementOutcome.Refused,
      'the charge does not match its challenge; a new approval is needed',
    );
  }
  return parsed;
}

/**
 * An `@x402/core` scheme client for `exact` on EVM that signs the EIP-3009
 * `TransferWithAuthorization` (the EIP-712 types `@x402/evm` publishes) with a fixed nonce
 * and expiry instead of `@x402/evm`'s random nonce and clock.
 */
function eip3009Client(
  wallet: Wallet,
  idempotencyKey: string,
  expiresAt: string,
): SchemeNetworkClient {
  return {
    scheme: 'exact',
    async createPaymentPayload(x402Version: number, requirements: PaymentRequirements) {
      const authorization = {
        from: wallet.address,
        to: getAddress(requirements.payTo),
        value: requirements.amount,
        validAfter: '0',
        validBefore: String(Math.floor(Date.parse(expiresAt) / 1000)),
        nonce: `0x${idempotencyKey}` as const,
      };
      const extra = requirements.extra as { name: string; version: string };
      const signature = await wallet.signTypedData({
        domain: {
          name: extra.name,
          version: extra.version,
          chainId: Number(requirements.network.split(':')[1]),
          verifyingContract: getAddress(requirements.asset),
        },
        types: authorizationTypes,
        primaryType: 'TransferWithAuthorization',
        message: {
          ...authorization,
          value: BigInt(authorization.value),
          validAfter: 0n,
          validBefore: BigInt(authorization.validBefore),
        },
      });
      return { x402Version, payload: { authorization, signature } };
    },
  };
}
