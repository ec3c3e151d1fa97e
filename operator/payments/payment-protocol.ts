import { AppError, ErrorCode, isAppError } from '../../common/errors';
import { ChallengeError, PaymentProtocolName, type Charge } from './charge';
import {
  hasMppChallenge,
  MPP_CHALLENGE_HEADER,
  parseMppChallenge,
  parseMppMcpChallenge,
} from './mpp-challenge';
import { authorizeMppMcp, mppMcpChallengeIn, mppMcpSettlement } from './mpp-mcp';
import { settleMpp, type TokenDomain } from './mpp-settle';
import type { McpPaidOutcome, PaidResponse, SettleInput, Settlement } from './settlement';
import { parseX402Challenge, parseX402McpChallenge, X402_CHALLENGE_HEADER } from './x402-challenge';
import { authorizeX402Mcp, x402McpChallengeIn, x402McpSettlement } from './x402-mcp';
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
  /**
   * This protocol's challenge in the payment-required object an MCP tool's answer carried
   * (as the harness relayed it, JSON), exactly as relayed, or undefined.
   */
  challengeIn(paymentRequired: string): string | undefined;
  /** Pure: the charge of a challenge an MCP tool's answer carried, for the call `resourceUrl`. */
  parse(challenge: string, resourceUrl: string, receivedAt: Date): Charge;
  /** Signs the payment of the approved charge, for the harness to send; refuses a changed one. */
  authorize(input: Omit<SettleInput, 'request'>): Promise<string>;
  /**
   * Pure: what the paid call settled, or a `SettlementError` saying if money may have
   * moved. `challenge` is the approved charge's, as recorded.
   */
  settlement(
    outcome: McpPaidOutcome,
    charge: Charge,
    payer: string,
    idempotencyKey: string,
    challenge: string,
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
      challengeIn: x402McpChallengeIn,
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
  /** A charge in a token the table lists; refused when parsed otherwise. */
  const known = (charge: Charge): Charge => {
    if (tokenDomains(charge.network, charge.asset) === undefined) {
      throw new ChallengeError(
        PaymentProtocolName.Mpp,
        'request.currency',
        `is ${charge.asset} on ${charge.network}, a token the control plane's MPP token table does not list`,
      );
    }
    return charge;
  };
  /** The token's EIP-712 domain, for signing; never from the challenge. */
  const domainOf = (charge: Charge): TokenDomain => {
    const tokenDomain = tokenDomains(charge.network, charge.asset);
    if (tokenDomain === undefined) {
      throw new AppError(
        ErrorCode.FailedPrecondition,
        `token ${charge.asset} on ${charge.network} is not a known token; add its EIP-712 domain to the control plane's token table`,
      );
    }
    return tokenDomain;
  };
  return {
    name: PaymentProtocolName.Mpp,
    challengeIn: (headers) => {
      const value = headers.get(MPP_CHALLENGE_HEADER);
      return value !== null && hasMppChallenge(value) ? value : undefined;
    },
    parse: (challenge, url, at) => known(parseMppChallenge(challenge, url, at).charge),
    settle: async (input) => settleMpp({ ...input, tokenDomain: domainOf(input.charge) }),
    mcp: {
      challengeIn: mppMcpChallengeIn,
      parse: (challenge, url, at) => known(parseMppMcpChallenge(challenge, url, at).charge),
      authorize: async (input) =>
        authorizeMppMcp({ ...input, tokenDomain: domainOf(input.charge) }),
      settlement: mppMcpSettlement,
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
  return readFirst(
    protocols,
    (protocol) => {
      const challenge = protocol.challengeIn(headers);
      return challenge === undefined
        ? undefined
        : { challenge, parse: () => protocol.parse(challenge, requestUrl, receivedAt) };
    },
    (names) => `the 402 carries no payment challenge Polychrome reads (looked for: ${names})`,
  );
}

/**
 * Reads the payment-required object an MCP tool's answer carried, by the same rule as a
 * 402: the first protocol (in the given order) whose MCP transport finds its challenge
 * there and parses it. One no MCP transport configured here reads is refused naming the
 * protocols that pay over MCP.
 */
export function readMcpChallenge(
  protocols: readonly PaymentProtocol[],
  paymentRequired: string,
  resourceUrl: string,
  receivedAt: Date,
): ReadChallenge {
  return readFirst(
    protocols,
    ({ mcp }) => {
      const challenge = mcp?.challengeIn(paymentRequired);
      return mcp === undefined || challenge === undefined
        ? undefined
        : { challenge, parse: () => mcp.parse(challenge, resourceUrl, receivedAt) };
    },
    () =>
      `the MCP tool asks for payment in a form no MCP payment transport of this control plane reads (it pays over MCP: ${
        protocols
          .filter((p) => p.mcp !== undefined)
          .map((p) => p.name)
          .join(', ') || 'nothing'
      })`,
  );
}

/** A protocol's challenge, found, and how to parse it. */
interface Found {
  readonly challenge: string;
  parse(): Charge;
}

/** The first protocol whose `find` gives a challenge that parses; refusals as the callers say. */
function readFirst(
  protocols: readonly PaymentProtocol[],
  find: (protocol: PaymentProtocol) => Found | undefined,
  none: (names: string) => string,
): ReadChallenge {
  const refused: AppError[] = [];
  for (const protocol of protocols) {
    const found = find(protocol);
    if (found === undefined) continue;
    try {
      return { protocol, challenge: found.challenge, charge: found.parse() };
    } catch (error) {
      if (!isAppError(error)) throw error;
      refused.push(error);
    }
  }
  if (refused.length === 1) throw refused[0]!;
  const names = protocols.map((p) => p.name).join(',');
  if (refused.length > 1) {
    throw new AppError(ErrorCode.InvalidArgument, refused.map((e) => e.message).join('; and '), {
      details: { protocols: names },
    });
  }
  throw new AppError(ErrorCode.InvalidArgument, none(protocols.map((p) => p.name).join(', ')));
}
