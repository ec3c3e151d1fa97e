import { describe, expect, it } from '@jest/globals';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { paymentRequiredOf, paymentResponseOf } from './mcp-x402';

// Where x402's MCP transport puts its objects, as a client must look for them: the
// PaymentRequired of an error result in structuredContent (direct, then wrapped), then in
// the first text block; the settlement in `_meta`, else inside a PaymentRequired.

const required = {
  x402Version: 2,
  resource: { url: 'mcp://tool/report' },
  accepts: [{ scheme: 'exact', amount: '5' }],
};
const wrapped = { 'x402/error': { code: 402, message: 'Payment required', data: required } };
const text = (value: unknown) => [{ type: 'text' as const, text: JSON.stringify(value) }];

describe('the PaymentRequired of a tool result', () => {
  it.each<[string, CallToolResult, unknown]>([
    [
      'is found in structuredContent',
      { isError: true, content: [], structuredContent: required },
      required,
    ],
    [
      'is found in the wrapper in structuredContent',
      { isError: true, content: [], structuredContent: wrapped },
      required,
    ],
    ['is found in the first text block', { isError: true, content: text(required) }, required],
    [
      'is found in the wrapper in the first text block',
      { isError: true, content: text(wrapped) },
      required,
    ],
    [
      'is not read from a result that is no error',
      { content: text(required), structuredContent: required },
      undefined,
    ],
    [
      'is not read from a tool error of its own',
      { isError: true, content: [{ type: 'text', text: 'bad topic' }] },
      undefined,
    ],
    [
      'is not read from a wrapper whose code is not 402',
      { isError: true, content: text({ 'x402/error': { code: 400, data: required } }) },
      undefined,
    ],
    [
      'is not read from an object without accepts',
      { isError: true, content: text({ x402Version: 2 }) },
      undefined,
    ],
  ])('%s', (_where, result, expected) => {
    const found = paymentRequiredOf(result);
    expect(found === undefined ? undefined : (JSON.parse(found) as unknown)).toEqual(expected);
  });
});

describe('the settlement of a paid result', () => {
  const settled = { success: true, transaction: `0x${'ab'.repeat(32)}` };
  it('is `_meta["x402/payment-response"]`', () => {
    const result = { content: text('ok'), _meta: { 'x402/payment-response': settled } };
    expect(JSON.parse(paymentResponseOf(result))).toEqual(settled);
  });

  it('is the one inside the PaymentRequired of a failed settlement', () => {
    const failed = { ...required, 'x402/payment-response': { success: false } };
    const result = { isError: true, content: [], structuredContent: failed };
    expect(JSON.parse(paymentResponseOf(result))).toEqual({ success: false });
  });

  it('is empty when the result carries none', () => {
    expect(paymentResponseOf({ content: text('ok') })).toBe('');
    expect(paymentResponseOf({ isError: true, content: [], structuredContent: required })).toBe('');
  });
});
