import { isJsonObject, type JsonObject } from '../../common/canonical-json';
import type { McpAnswer } from './mcp-connection';

/**
 * MPP's MCP transport (draft-httpauth-payment's MCP binding, the `org.paymentauth` keys) as
 * the harness reads it (docs/payments.md, "A paid MCP tool"). Pure.
 *
 * A paid tool answers an unpaid call with a JSON-RPC error -32042 (payment required) whose
 * `data` is `{httpStatus: 402, challenges: [...]}`, or, when the payment failed to verify,
 * -32043 with the same data and an RFC 9457 `problem`; a server may instead answer with a
 * result carrying that object in `_meta["org.paymentauth/payment-required"]`. The paid call
 * carries the credential in `_meta["org.paymentauth/credential"]`; its result carries the
 * receipt in `_meta["org.paymentauth/receipt"]`. The harness only reads and carries these:
 * it holds no wallet and never signs; the control plane parses, checks and records them.
 */

/** The `_meta` key of the credential a paid call carries. */
export const MPP_CREDENTIAL_META = 'org.paymentauth/credential';
/** The `_meta` key of the receipt a paid result carries. */
export const MPP_RECEIPT_META = 'org.paymentauth/receipt';
/** The `_meta` key of a result that asks for payment instead of an error. */
export const MPP_PAYMENT_REQUIRED_META = 'org.paymentauth/payment-required';
/** The JSON-RPC error codes that ask for payment: required, and verification failed. */
export const MPP_PAYMENT_ERROR_CODES: readonly number[] = [-32042, -32043];

/**
 * The payment-required object an answer carries, as JSON: a -32042/-32043 error's `data`,
 * or a result's `_meta["org.paymentauth/payment-required"]`, when it holds at least one
 * challenge object; otherwise undefined (an error or result of the tool's own).
 */
export function mppPaymentRequiredOf(answer: McpAnswer): string | undefined {
  const data: unknown =
    'error' in answer
      ? MPP_PAYMENT_ERROR_CODES.includes(answer.error.code)
        ? answer.error.data
        : undefined
      : answer.result._meta?.[MPP_PAYMENT_REQUIRED_META];
  return isPaymentRequired(data) ? JSON.stringify(data) : undefined;
}

/**
 * The settlement a paid answer carries, as JSON: the result's receipt, or, when the server
 * asked for payment again, the `problem` it gave (why it did not take the payment); ''
 * when there is neither.
 */
export function mppSettlementOf(answer: McpAnswer): string {
  const found: unknown =
    'error' in answer
      ? isPaymentRequired(answer.error.data)
        ? answer.error.data.problem
        : undefined
      : answer.result._meta?.[MPP_RECEIPT_META];
  return isJsonObject(found) ? JSON.stringify(found) : '';
}

/** `{challenges: [object, ...]}`: MPP's payment-required data. */
function isPaymentRequired(value: unknown): value is JsonObject {
  if (!isJsonObject(value)) return false;
  const { challenges } = value;
  return Array.isArray(challenges) && challenges.length > 0 && challenges.every(isJsonObject);
}
