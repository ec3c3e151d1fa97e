import { isJsonObject, type JsonObject } from '../../common/canonical-json';
import { AppError } from '../../common/errors';
import type { McpPaidOutcome } from '../turn/ports/payment-port';
import { paymentNotTaken } from '../turn/ports/payment-port';
import type { McpAnswer, McpCallAnswer } from './mcp-connection';
import { MPP_CREDENTIAL_META, mppPaymentRequiredOf, mppSettlementOf } from './mcp-mpp';
import { paymentRequiredOf, paymentResponseOf, X402_PAYMENT_META } from './mcp-x402';

/**
 * The MCP payment transports the harness carries (docs/payments.md, "A paid MCP tool"), in
 * one table: where each finds a request to pay in a server's answer, under which `_meta`
 * key a paid call carries the control plane's payment, and where its settlement comes
 * back. Pure. The harness reads and carries; the control plane parses, signs and checks.
 */
interface McpPaymentTransport {
  /** The `_meta` key of the payment a paid call carries. */
  readonly paymentMeta: string;
  /** The object asking for payment an answer carries, as JSON, or undefined. */
  required(answer: McpAnswer): string | undefined;
  /** The settlement a paid answer carries, as JSON; '' when none. */
  settlement(answer: McpAnswer): string;
}

const TRANSPORTS: Readonly<Record<string, McpPaymentTransport>> = {
  x402: {
    paymentMeta: X402_PAYMENT_META,
    required: (answer) => ('result' in answer ? paymentRequiredOf(answer.result) : undefined),
    settlement: (answer) => ('result' in answer ? paymentResponseOf(answer.result) : ''),
  },
  mpp: {
    paymentMeta: MPP_CREDENTIAL_META,
    required: mppPaymentRequiredOf,
    settlement: mppSettlementOf,
  },
};

/**
 * JSON-RPC errors that say the server refused the request before running anything (parse,
 * invalid request, unknown method, invalid params): a paid call answered so was not taken.
 * Any other error (an internal error, a server's own code) may come after the payment
 * settled, so its outcome is unknown.
 */
const REFUSED_BEFORE_RUNNING: readonly number[] = [-32700, -32600, -32601, -32602];

/** The object asking for payment in an answer, by the first transport that finds one. */
export function paymentRequiredIn(answer: McpAnswer): string | undefined {
  for (const transport of Object.values(TRANSPORTS)) {
    const required = transport.required(answer);
    if (required !== undefined) return required;
  }
  return undefined;
}

/**
 * The `_meta` of a paid call: the payment under its protocol's key ('' is x402: what a
 * control plane paying MCP tools over x402 alone sent).
 *
 * @throws AppError `invalid_argument` naming what is wrong: a protocol without an MCP
 *   transport here, or a payment that is not a JSON object. Nothing is sent then.
 */
export function paidCallMeta(payment: string, protocol: string): JsonObject {
  const transport = transportOf(protocol);
  let parsed: unknown;
  try {
    parsed = JSON.parse(payment);
  } catch {
    parsed = undefined;
  }
  if (!isJsonObject(parsed)) {
    throw new AppError('invalid_argument', 'the payment is not a JSON object');
  }
  return { [transport.paymentMeta]: parsed };
}

/**
 * What a paid call answered, for the control plane to read its settlement (harness.proto
 * `McpPaidResult`): the tool's result and the settlement it carried; not taken when the
 * server asked for payment again or refused the request before running it; unknown for
 * any other JSON-RPC error. `content` is the result as the model would see it.
 */
export function paidOutcomeOf(
  answer: McpCallAnswer,
  protocol: string,
  content: (answer: Extract<McpCallAnswer, { kind: 'result' }>) => string,
): McpPaidOutcome {
  const transport = transportOf(protocol);
  if (answer.kind === 'result') {
    const answered = { result: answer.result };
    return {
      content: content(answer),
      isError: answer.result.isError === true,
      paymentResponse: transport.settlement(answered),
      paymentNotTaken: transport.required(answered) !== undefined,
      outcomeUnknownReason: '',
    };
  }
  const { error } = answer;
  if (error === undefined) return paymentNotTaken(answer.outcome.content);
  const answered = { error };
  if (transport.required(answered) !== undefined) {
    return {
      ...paymentNotTaken(answer.outcome.content),
      paymentResponse: transport.settlement(answered),
    };
  }
  if (REFUSED_BEFORE_RUNNING.includes(error.code)) return paymentNotTaken(answer.outcome.content);
  return {
    content: '',
    isError: true,
    paymentResponse: '',
    paymentNotTaken: false,
    outcomeUnknownReason: `the server answered the paid call with JSON-RPC error ${error.code} (${error.message.slice(0, 200)}), which may come after the payment settled`,
  };
}

function transportOf(protocol: string): McpPaymentTransport {
  const name = protocol === '' ? 'x402' : protocol;
  const transport = Object.hasOwn(TRANSPORTS, name) ? TRANSPORTS[name] : undefined;
  if (transport === undefined) {
    throw new AppError(
      'invalid_argument',
      `the payment is for ${JSON.stringify(protocol.slice(0, 40))}, which has no MCP transport in this harness (it carries: ${Object.keys(TRANSPORTS).join(', ')})`,
    );
  }
  return transport;
}
