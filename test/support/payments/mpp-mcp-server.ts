import {
  CallToolRequestSchema,
  ListToolsRequestSchema,
  McpError,
  type CallToolResult,
} from '@modelcontextprotocol/sdk/types.js';
import { Mppx, Transport } from 'mppx/server';
import type { Address } from 'viem';
import { serveStatelessHttpMcp } from '../mcp-servers/stateless-http';
import { MPP_TEST_SERVER, mppEvmCharge } from './mpp-server';

/**
 * An MCP server whose tools cost `amount` of the token, paid over MPP's MCP transport, on
 * the real parts: the MCP SDK's server over streamable HTTP (stateless,
 * ../mcp-servers/stateless-http.ts) and `mppx`'s server with its MCP SDK transport
 * (`Transport.mcpSdk()`) and its `evm` charge method, settling through the x402
 * facilitator at `facilitatorUrl` on anvil (as mpp-server.ts does over HTTP).
 *
 * - `report`: as mppx's transport answers: an unpaid call gets a JSON-RPC error -32042
 *   whose `data` holds the challenge (a credential that does not verify, -32043); a paid
 *   call (`_meta["org.paymentauth/credential"]`) runs and its result carries the receipt
 *   in `_meta["org.paymentauth/receipt"]`.
 * - `brief`: the same charge, but the unpaid call gets a result carrying the challenge
 *   object in `_meta["org.paymentauth/payment-required"]`, the other form the transport
 *   allows (mppx's client reads both).
 *
 * The tools are served through the SDK's low-level request handler: its `McpServer` turns
 * an error thrown by a tool into an error result, which would drop the challenge.
 */
export interface MppMcpServer {
  readonly url: string;
  /** How many times a paid tool's work ran (only after a payment settled). */
  readonly runs: () => number;
  /** Every credential a call carried, as JSON, in order. */
  readonly credentials: () => readonly string[];
  close(): Promise<void>;
}

export interface MppMcpOffer {
  readonly facilitatorUrl: string;
  readonly token: Address;
  readonly payTo: Address;
  /** In display units of the token (`"1.25"` is 1 250 000 base units). */
  readonly amount: string;
}

const CREDENTIAL_META = 'org.paymentauth/credential';
const TOOLS = [
  { name: 'report', description: 'A paid report on a topic.' },
  { name: 'brief', description: 'A paid brief on a topic.' },
] as const;

/** Starts it on a free loopback port. */
export async function startMppMcpServer(offer: MppMcpOffer): Promise<MppMcpServer> {
  // mppx's `evm` method carries its own HTTP transport (it serves MPP and x402 on one
  // route); without it, the method's challenges, credentials and receipts go through the
  // server's transport, here mppx's MCP SDK one. Its verification and settlement are as
  // they are over HTTP.
  const { transport: _http, ...charge } = mppEvmCharge(offer);
  const mppx = Mppx.create({
    methods: [charge],
    ...MPP_TEST_SERVER,
    transport: Transport.mcpSdk(),
  });
  const seen = { runs: 0, credentials: [] as string[] };

  const call = async (
    tool: string,
    topic: string,
    extra: { _meta?: Record<string, unknown> },
  ): Promise<CallToolResult> => {
    const credential = extra._meta?.[CREDENTIAL_META];
    if (credential !== undefined) seen.credentials.push(JSON.stringify(credential));
    // Only what the transport reads: the SDK's extra holds a signal and functions.
    const charged = await mppx.charge({ amount: offer.amount })({ _meta: extra._meta });
    if (charged.status === 402) {
      const challenge = charged.challenge;
      if (tool === 'report') throw challenge;
      return {
        isError: true,
        content: [{ type: 'text', text: challenge.message }],
        _meta: { 'org.paymentauth/payment-required': challenge.data as Record<string, unknown> },
      };
    }
    seen.runs += 1;
    return charged.withReceipt({
      content: [{ type: 'text', text: `paid ${tool} on ${topic} (run ${seen.runs})` }],
    });
  };

  const served = await serveStatelessHttpMcp('polychrome-mpp-mcp-test-server', (mcp) => {
    const server = mcp.server;
    server.registerCapabilities({ tools: {} });
    server.setRequestHandler(ListToolsRequestSchema, () => ({
      tools: TOOLS.map((t) => ({
        ...t,
        inputSchema: {
          type: 'object' as const,
          properties: { topic: { type: 'string' } },
          required: ['topic'],
        },
      })),
    }));
    server.setRequestHandler(CallToolRequestSchema, async (request, extra) => {
      const { name, arguments: args } = request.params;
      if (!TOOLS.some((t) => t.name === name)) throw new McpError(-32602, `no tool ${name}`);
      const topic = args?.topic;
      return call(name, typeof topic === 'string' ? topic : '', extra);
    });
  });
  return {
    url: served.url,
    runs: () => seen.runs,
    credentials: () => seen.credentials,
    close: () => served.kill(),
  };
}
