import { AppError, ErrorCode, isAppError } from '../../common/errors';
import { ChallengeError, PaymentProtocolName, type Charge } from './charge';
import { hasMppChallenge, MPP_CHALLENGE_HEADER, parseMppChallenge } from './mpp-challenge';
import { settleMpp, type TokenDomain } from './mpp-settle';
import type { McpPaidOutcome, PaidResponse, SettleInput, Settlement } from './settlement';
import { parseX402Challenge, parseX402McpChallenge, X402_CHALLENGE_HEADER } from './x402-challenge';
import { authorizeX402Mcp, x402McpSettlement } from './x402-mcp';
import { settleX402 } from './x402-settle';

/**
 * The port every payment protocol implements (docs/payments.md, "Adding a protocol"). The
 * control plane finds a challenge in a 402, parses it into a neutral `Charge` (pure), and,
 * once a person approved that charge, settles it. Nothing above this port knows a
 * protocol's headers, encodings or signing.
 */
export interface PaymentProtocol {
  readonly name: PaymentProtocolName;
  /** This protocol's challenge in a 402's headers, exactly as received, or undefined. */
  challengeIn(headers: Headers): string | undefined;
  /** Pure: the charge a challenge asks for. Throws `ChallengeError` naming what is wrong. */
  parse(challenge: string, requestUrl: string, receivedAt: Date): Charge;
  /**
   * Signs the payment with the wallet and sends the request with it. Refuses (before
   * signing) a challenge whose digest or fields are not the approved charge's. Fails with
   * a `SettlementError` whose `outcome` says whether money may have moved.
   */
  settle(input: SettleInput): Promise<PaidResponse>;
  /** How the protocol pays an MCP server's tool, when it has an MCP transport. */
  readonly mcp?: McpPaymentTransport;
}

/**
 * A protocol's payments over MCP (docs/payments.md, "A paid MCP tool"). The MCP session is
 * the harness's, so the control plane signs the payment and the harness carries it.
 */
export interface McpPaymentTransport {
  /** Pure: the charge of a challenge an MCP tool's result carried, for the call `resourceUrl`. */
  parse(challenge: string, resourceUrl: string, receivedAt: Date): Charge;
  /** Signs the payment of the approved charge, for the harness to send; refuses a changed one. */
  authorize(input: Omit<SettleInput, 'request'>): Promise<string>;
  /** Pure: what the paid call settled, or a `SettlementError` saying if money may have moved. */
  settlement(
    outcome: McpPaidOutcome,
    charge: Charge,
    payer: string,
    idempotencyKey: string,
  ): Settlement;
}

/** x402 v2 (`PAYMENT-REQUIRED`), `exact` scheme with EIP-3009 tokens. */
export function x402Protocol(): PaymentProtocol {
  return {
    name: PaymentProtocolName.X402,
    challengeIn: (headers) => headers.get(X402_CHALLENGE_HEADER) ?? undefined,
    parse: (challenge, url, at) => parseX402Challenge(challenge, url, at).charge,
    settle: (input) => settleX402(input),
    mcp: {
      parse: (challenge, url, at) => parseX402McpChallenge(challenge, url, at).charge,
      authorize: (input) => authorizeX402Mcp(input),
      settlement: x402McpSettlement,
    },
  };
}

/** Finds the EIP-712 domain of a known token (network, lower-case address). */
export type TokenDomains = (network: string, asset: string) => TokenDomain | undefined;

/**
 * MPP (`WWW-Authenticate: Payment`), method `evm`, intent `charge`, in the tokens
 * `tokenDomains` knows (operator/payments/mpp-tokens.ts): a charge in another token is
 * refused when parsed, before anyone is asked to approve what could not be paid.
 */
export function mppProtocol(tokenDomains: TokenDomains): PaymentProtocol {
  return {
    name: PaymentProtocolName.Mpp,
    challengeIn: (headers) => {
      const value = headers.get(MPP_CHALLENGE_HEADER);
      return value !== null && hasMppChallenge(value) ? value : undefined;
    },
    parse: (challenge, url, at) => {
      const { charge } = parseMppChallenge(challenge, url, at);
      if (tokenDomains(charge.network, charge.asset) === undefined) {
        throw new ChallengeError(
          PaymentProtocolName.Mpp,
          'request.currency',
          `is ${charge.asset} on ${charge.network}, a token the control plane's MPP token table does not list`,
        );
      }
      return charge;
    },
    settle: async (input) => {
      const tokenDomain = tokenDomains(input.charge.network, input.charge.asset);
      if (tokenDomain === undefined) {
        throw new AppError(
          ErrorCode.FailedPrecondition,
          `token ${input.charge.asset} on ${input.charge.network} is not a known token; add its EIP-712 domain to the control plane's token table`,
        );
      }
      return settleMpp({ ...input, tokenDomain });
    },
  };
}

/** A 402's challenge, read by the first protocol (in the given order) that can pay it. */
export interface ReadChallenge {
  readonly protocol: PaymentProtocol;
  readonly challenge: string;
  readonly charge: Charge;
}

/**
 * Reads a 402: the first protocol in `protocols` whose challenge is present and parses
 * gives the charge (a server offering both is paid by the earlier one; the other is never
 * shown or paid). A preferred challenge that is refused (a method Polychrome does not pay,
 * a token MPP's table does not list) gives way to the next one present, so the charge is
 * always one that can be paid; when every challenge present is refused, the refusal names
 * each. A 402 with no challenge any protocol reads is refused with the protocols it looked
 * for.
 */
export function readChallenge(
  protocols: readonly PaymentProtocol[],
  headers: Headers,
  requestUrl: string,
  receivedAt: Date,
): ReadChallenge {
  const refused: AppError[] = [];
  for (const protocol of protocols) {
    const challenge = protocol.challengeIn(headers);
    if (challenge === undefined) continue;
    try {
      return { protocol, challenge, charge: protocol.parse(challenge, requestUrl, receivedAt) };
    } catch (error) {
      if (!isAppError(error)) throw error;
      refused.push(error);
    }
  }
  if (refused.length === 1) throw refused[0]!;
  if (refused.length > 1) {
    throw new AppError(ErrorCode.InvalidArgument, refused.map((e) => e.message).join('; and '), {
      details: { protocols: protocols.map((p) => p.name).join(',') },
    });
  }
  throw new AppError(
    ErrorCode.InvalidArgument,
    `the 402 carries no payment challenge Polychrome reads (looked for: ${protocols.map((p) => p.name).join(', ')})`,
  );
}

/**
 * Reads the challenge an MCP tool's result carried: the first protocol in `protocols` with
 * an MCP transport parses it (today x402 alone has one). None configured, or a challenge it
 * refuses, is refused naming why.
 */
export function readMcpChallenge(
  protocols: readonly PaymentProtocol[],
  challenge: string,
  resourceUrl: string,
  receivedAt: Date,
): ReadChallenge {
  const protocol = protocols.find((p) => p.mcp !== undefined);
  if (protocol?.mcp === undefined) {
    throw new AppError(
      ErrorCode.InvalidArgument,
      `the MCP tool asks for payment over x402's MCP transport, and this control plane pays over MCP only with x402 (it pays: ${protocols.map((p) => p.name).join(', ') || 'nothing'})`,
    );
  }
  return { protocol, challenge, charge: protocol.mcp.parse(challenge, resourceUrl, receivedAt) };
}
