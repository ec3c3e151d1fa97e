import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { isJsonObject, type JsonObject } from '../../common/canonical-json';

/**
 * x402's MCP transport as the harness reads it (docs/payments.md, "A paid MCP tool"). Pure.
 *
 * A paid tool answers an unpaid call with an error result carrying x402's
 * `PaymentRequired`: in `structuredContent` (directly, or wrapped as
 * `{"x402/error": {code: 402, data}}`), or as JSON in its first text block (either form);
 * clients look in that order. The paid call carries the payment in
 * `_meta["x402/payment"]`; its result carries the settlement in
 * `_meta["x402/payment-response"]`, or, when settling failed, inside the error's
 * `PaymentRequired`. The harness only reads and carries these: it holds no wallet and
 * never signs; the control plane parses, checks and records them.
 */

/** The `_meta` key of the payment a paid call carries. */
export const X402_PAYMENT_META = 'x402/payment';
/** The `_meta` key (and `PaymentRequired` member) of the settlement a paid result carries. */
export const X402_PAYMENT_RESPONSE_META = 'x402/payment-response';

/**
 * The `PaymentRequired` an error result carries, as JSON, or undefined when the result is
 * not an error or carries none (a tool's own failure).
 */
export function paymentRequiredOf(result: CallToolResult): string | undefined {
  if (result.isError !== true) return undefined;
  const found = [result.structuredContent, firstTextJson(result)]
    .map(paymentRequiredIn)
    .find((value) => value !== undefined);
  return found === undefined ? undefined : JSON.stringify(found);
}

/**
 * The settlement a paid result carries, as JSON: `_meta["x402/payment-response"]`, else
 * the one inside an error's `PaymentRequired`; '' when there is none.
 */
export function paymentResponseOf(result: CallToolResult): string {
  const meta: unknown = result._meta?.[X402_PAYMENT_RESPONSE_META];
  if (isJsonObject(meta)) return JSON.stringify(meta);
  const required = paymentRequiredOf(result);
  if (required === undefined) return '';
  const inner: unknown = (JSON.parse(required) as JsonObject)[X402_PAYMENT_RESPONSE_META];
  return isJsonObject(inner) ? JSON.stringify(inner) : '';
}

/** A `PaymentRequired` object, directly or in the `x402/error` wrapper, or undefined. */
function paymentRequiredIn(value: unknown): JsonObject | undefined {
  if (!isJsonObject(value)) return undefined;
  if (isPaymentRequired(value)) return value;
  const wrapped: unknown = value['x402/error'];
  if (isJsonObject(wrapped) && wrapped.code === 402 && isPaymentRequired(wrapped.data)) {
    return wrapped.data;
  }
  return undefined;
}

/** x402's `PaymentRequired`: a version and a list of ways to pay. */
function isPaymentRequired(value: unknown): value is JsonObject {
  return (
    isJsonObject(value) && typeof value.x402Version === 'number' && Array.isArray(value.accepts)
  );
}

/** The first content block's text as JSON, or undefined. */
function firstTextJson(result: CallToolResult): unknown {
  const first = result.content[0];
  if (first?.type !== 'text') return undefined;
  try {
    return JSON.parse(first.text) as unknown;
  } catch {
    return undefined;
  }
}
