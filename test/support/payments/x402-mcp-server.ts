import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { HTTPFacilitatorClient, x402ResourceServer } from '@x402/core/server';
import type { PaymentPayload, PaymentRequirements } from '@x402/core/types';
import { ExactEvmScheme } from '@x402/evm/exact/server';
import type { Address } from 'viem';
import { z } from 'zod';
import { ANVIL_NETWORK } from '../chain/anvil';
import { TOKEN_NAME, TOKEN_VERSION } from '../chain/token';
import { serveStatelessHttpMcp } from '../mcp-servers/stateless-http';

/**
 * An MCP server whose tool `report` costs `price` base units of the token, paid over
 * x402's MCP transport: the server side of the flow as x402's MCP transport specifies it,
 * on the real parts — the MCP SDK's server over streamable HTTP (stateless,
 * ../mcp-servers/stateless-http.ts), and
 * `@x402/core`'s `x402ResourceServer` building the requirements, verifying and settling
 * through the real facilitator of the x402 stack on anvil. (No `@x402/mcp` package is
 * served here; what this file adds is where the transport puts each object.)
 *
 * - Unpaid call: an error result carrying `PaymentRequired` in `structuredContent` and, in
 *   the `x402/error` wrapper, as its first text block.
 * - Paid call (`_meta["x402/payment"]`): verified; the tool runs; settled; the result
 *   carries the settlement in `_meta["x402/payment-response"]`. A payment that does not
 *   verify, or does not settle, gets `PaymentRequired` again (with the failed settlement).
 */
export interface X402McpServer {
  /** The MCP endpoint (streamable HTTP). */
  readonly url: string;
  /** How many times the paid tool's work ran (only after a payment verified). */
  readonly runs: () => number;
  /** Every `x402/payment` the server received, as JSON. */
  readonly payments: () => readonly string[];
  /** Every settlement it tried, with whether it succeeded. */
  readonly settles: () => readonly boolean[];
  /**
   * Holds the next paid call once its payment verified, before the tool runs and the payment
   * settles: a crash test kills its caller there. `reached` resolves when a call is held;
   * `release` lets it run and settle (its caller may be gone by then).
   */
  holdNextPaidCall(): { readonly reached: Promise<void>; release(): void };
  close(): Promise<void>;
}

export interface X402McpOffer {
  readonly facilitatorUrl: string;
  readonly token: Address;
  readonly payTo: Address;
  /** Base units of the token. */
  readonly price: string;
}

/** The tool's resource, as the server names it (x402's MCP transport: `mcp://tool/<name>`). */
const RESOURCE = { url: 'mcp://tool/report', description: 'A paid report', mimeType: 'text/plain' };

/** Starts it on a free loopback port. */
export async function startX402McpServer(offer: X402McpOffer): Promise<X402McpServer> {
  const resourceServer = new x402ResourceServer(
    new HTTPFacilitatorClient({ url: offer.facilitatorUrl }),
  ).register(ANVIL_NETWORK, new ExactEvmScheme());
  await resourceServer.initialize();
  const requirements = await resourceServer.buildPaymentRequirements({
    scheme: 'exact',
    network: ANVIL_NETWORK,
    payTo: offer.payTo,
    price: {
      asset: offer.token,
      amount: offer.price,
      extra: { name: TOKEN_NAME, version: TOKEN_VERSION },
    },
    maxTimeoutSeconds: 120,
  });
  const seen = { runs: 0, payments: [] as string[], settles: [] as boolean[] };
  let hold: { arrived: () => void; released: Promise<void> } | undefined;

  const required = async (error: string, extra: Record<string, unknown> = {}) => {
    const body = {
      ...(await resourceServer.createPaymentRequiredResponse(requirements, RESOURCE, error)),
      ...extra,
    };
    const text = JSON.stringify({ 'x402/error': { code: 402, message: error, data: body } });
    return {
      isError: true,
      structuredContent: body as Record<string, unknown>,
      content: [{ type: 'text' as const, text }],
    };
  };

  const report = async (topic: string, meta: Record<string, unknown> | undefined) => {
    const payment = meta?.['x402/payment'] as PaymentPayload | undefined;
    if (payment === undefined) return required('Payment required to access this resource');
    seen.payments.push(JSON.stringify(payment));
    const accepted = resourceServer.findMatchingRequirements(requirements, payment);
    if (accepted === undefined) return required('the payment matches no requirement');
    const verified = await resourceServer.verifyPayment(payment, accepted);
    if (!verified.isValid) return required(`invalid payment: ${verified.invalidReason ?? ''}`);
    const held = hold;
    hold = undefined;
    if (held !== undefined) {
      held.arrived();
      await held.released;
    }
    seen.runs += 1;
    const settled = await settle(payment, accepted);
    seen.settles.push(settled.success);
    if (!settled.success) {
      return required('Payment settlement failed', { 'x402/payment-response': settled });
    }
    return {
      content: [{ type: 'text' as const, text: `paid report on ${topic} (run ${seen.runs})` }],
      _meta: { 'x402/payment-response': settled },
    };
  };

  const settle = async (payment: PaymentPayload, accepted: PaymentRequirements) => {
    try {
      return await resourceServer.settlePayment(payment, accepted);
    } catch (error) {
      return {
        success: false,
        errorReason: (error as Error).message,
        transaction: '',
        network: ANVIL_NETWORK,
      };
    }
  };

  const served = await serveStatelessHttpMcp('polychrome-x402-mcp-test-server', (mcp) => {
    mcp.registerTool(
      'report',
      { description: 'A paid report on a topic.', inputSchema: { topic: z.string() } },
      async ({ topic }, extra): Promise<CallToolResult> => report(topic, extra._meta),
    );
  });
  return {
    url: served.url,
    runs: () => seen.runs,
    payments: () => seen.payments,
    settles: () => seen.settles,
    holdNextPaidCall() {
      let arrived = (): void => undefined;
      let release = (): void => undefined;
      const reached = new Promise<void>((resolve) => (arrived = resolve));
      const released = new Promise<void>((resolve) => (release = resolve));
      hold = { arrived, released };
      return { reached, release };
    },
    close: () => served.kill(),
  };
}
