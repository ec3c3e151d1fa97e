import { describe, expect, it } from '@jest/globals';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import type { McpAnswer, McpCallAnswer } from './mcp-connection';
import { paidCallMeta, paidOutcomeOf, paymentRequiredIn } from './mcp-payment';

// The MCP payment transports as the harness reads and carries them (mcp-payment.ts): where
// a request to pay is found (x402's error result; MPP's -32042/-32043 error or `_meta`),
// under which key a paid call carries the payment, and how a paid call's answer reads:
// taken, not taken, or unknown.

const x402Required = { x402Version: 2, accepts: [{ scheme: 'exact' }] };
const mppRequired = { httpStatus: 402, challenges: [{ id: 'c', method: 'evm', intent: 'charge' }] };
const error = (code: number, data?: unknown): McpAnswer => ({
  error: { code, message: 'Payment Required', data },
});
const result = (over: Partial<CallToolResult>): McpAnswer => ({ result: { content: [], ...over } });

describe('a request to pay in a server answer', () => {
  it.each<[string, McpAnswer, unknown]>([
    [
      "x402's PaymentRequired of an error result",
      result({ isError: true, structuredContent: x402Required }),
      x402Required,
    ],
    ["MPP's -32042 error data", error(-32042, mppRequired), mppRequired],
    ["MPP's -32043 error data (verification failed)", error(-32043, mppRequired), mppRequired],
    [
      "MPP's payment-required object in a result's _meta",
      result({ isError: true, _meta: { 'org.paymentauth/payment-required': mppRequired } }),
      mppRequired,
    ],
    ['not a -32042 of another code', error(-32603, mppRequired), undefined],
    ['not a -32042 without challenges', error(-32042, { challenges: [] }), undefined],
    [
      'not a -32042 whose challenges are not objects',
      error(-32042, { challenges: ['x'] }),
      undefined,
    ],
    ['not a -32042 without data', error(-32042), undefined],
    ['not an ordinary result', result({ content: [{ type: 'text', text: 'hi' }] }), undefined],
  ])('%s', (_name, answer, expected) => {
    const found = paymentRequiredIn(answer);
    expect(found === undefined ? undefined : JSON.parse(found)).toEqual(expected);
  });
});

describe("a paid call's _meta", () => {
  it('puts the payment under its protocol\'s key; "" is x402', () => {
    expect(paidCallMeta('{"a":1}', 'mpp')).toEqual({ 'org.paymentauth/credential': { a: 1 } });
    expect(paidCallMeta('{"a":1}', 'x402')).toEqual({ 'x402/payment': { a: 1 } });
    expect(paidCallMeta('{"a":1}', '')).toEqual({ 'x402/payment': { a: 1 } });
  });

  it.each([
    ['a protocol without an MCP transport here', '{}', 'tempo', 'has no MCP transport'],
    ['an inherited name', '{}', 'constructor', 'has no MCP transport'],
    ['a payment that is not JSON', '{', 'mpp', 'not a JSON object'],
    ['a payment that is not an object', '[1]', 'mpp', 'not a JSON object'],
  ])('refuses %s', (_name, payment, protocol, message) => {
    expect(() => paidCallMeta(payment, protocol)).toThrow(message);
  });
});

describe("a paid call's answer", () => {
  const content = () => 'the result';
  const answered = (over: Partial<CallToolResult>): McpCallAnswer => ({
    kind: 'result',
    result: { content: [], ...over },
  });
  const refused = (code: number, data?: unknown): McpCallAnswer => ({
    kind: 'not_run',
    outcome: { content: 'refused', isError: true },
    error: { code, message: 'no', data },
  });

  it('reads the receipt of a paid result', () => {
    const receipt = { status: 'success', reference: '0xab' };
    expect(
      paidOutcomeOf(answered({ _meta: { 'org.paymentauth/receipt': receipt } }), 'mpp', content),
    ).toEqual({
      content: 'the result',
      isError: false,
      paymentResponse: JSON.stringify(receipt),
      paymentNotTaken: false,
      outcomeUnknownReason: '',
    });
  });

  it('is not taken when the server asks again, keeping the problem it gave', () => {
    const problem = { title: 'Verification Failed', detail: 'nonce used' };
    expect(
      paidOutcomeOf(refused(-32043, { ...mppRequired, problem }), 'mpp', content),
    ).toMatchObject({
      paymentNotTaken: true,
      paymentResponse: JSON.stringify(problem),
      outcomeUnknownReason: '',
    });
    expect(
      paidOutcomeOf(answered({ isError: true, structuredContent: x402Required }), 'x402', content),
    ).toMatchObject({ paymentNotTaken: true });
  });

  it.each([-32700, -32600, -32601, -32602])(
    'is not taken when the server refused the request before running it (%i)',
    (code) => {
      expect(paidOutcomeOf(refused(code), 'mpp', content)).toMatchObject({
        paymentNotTaken: true,
        outcomeUnknownReason: '',
      });
    },
  );

  it('is unknown for any other JSON-RPC error: it may come after the payment settled', () => {
    const outcome = paidOutcomeOf(refused(-32603), 'x402', content);
    expect(outcome.paymentNotTaken).toBe(false);
    expect(outcome.outcomeUnknownReason).toContain('JSON-RPC error -32603');
  });

  it('is not taken when it never reached the server', () => {
    const unsent: McpCallAnswer = { kind: 'not_run', outcome: { content: 'down', isError: true } };
    expect(paidOutcomeOf(unsent, 'mpp', content)).toMatchObject({
      paymentNotTaken: true,
      content: 'down',
    });
  });
});
