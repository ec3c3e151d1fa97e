import { describe, expect, it } from '@jest/globals';
import { AppError } from '../../common/errors';
import type { TurnOutput } from '../../proto/gen/polychrome/harness/v1/harness';
import type { McpPaidOutcome, PaidToolRunner } from '../turn/ports/payment-port';
import { TurnPayments } from './turn-payments';

// The stream side of a paid call, by the messages the control plane sends: the answers it
// is owed are taken, anything else is a protocol mistake that ends the turn. The whole
// flow runs on the real stack in operator/turns/paid-turn.test.ts.

type Output = NonNullable<TurnOutput['output']>;

function harness() {
  const written: Output[] = [];
  const violations: string[] = [];
  const payments = new TurnPayments({
    turnId: 't1',
    write: (output) => written.push(output),
    violate: (what) => violations.push(what),
  });
  return { payments, written, violations };
}

const call = {
  turnId: 't1',
  toolCallId: 'c1',
  name: 'shop/report',
  input: { topic: 'tides' },
  argsJson: '{"topic":"tides"}',
  step: 1,
  maxSteps: 8,
};
const options = () => ({ signal: AbortSignal.timeout(5_000), timeoutMs: 5_000 });
const paidOutcome: McpPaidOutcome = {
  content: 'paid report',
  isError: false,
  paymentResponse: '{"success":true}',
  paymentNotTaken: false,
  outcomeUnknownReason: '',
};

/** Waits until the settle under way wrote `count` messages. */
async function written(list: readonly Output[], count: number): Promise<void> {
  while (list.length < count) await new Promise((resolve) => setImmediate(resolve));
}

describe('a paid call on the turn stream', () => {
  it('calls an MCP tool with the payment it is handed, relays the result, and returns the recorded answer', async () => {
    const { payments, written: out, violations } = harness();
    const asked: string[] = [];
    const paid: PaidToolRunner = {
      callPaid: (request, payment) => {
        asked.push(`${request.name} ${payment.protocol} ${payment.payment}`);
        return Promise.resolve(paidOutcome);
      },
    };
    const settled = payments.port(paid).settle(call, 'apr_1', options());
    expect(out.map((o) => o.$case)).toEqual(['paymentSettle']);
    payments.mcpPayment({ toolCallId: 'c1', payment: '{"x402Version":2}', protocol: 'mpp' });
    await written(out, 2);
    // The protocol goes to the runner with the payment: it picks the `_meta` key.
    expect(asked).toEqual(['shop/report mpp {"x402Version":2}']);
    expect(out[1]).toEqual({
      $case: 'mcpPaidResult',
      value: { turnId: 't1', toolCallId: 'c1', thread: '', ...paidOutcome },
    });
    const taken = payments.settled({
      toolCallId: 'c1',
      known: true,
      outcome: { content: 'paid report', isError: false },
    });
    expect(taken).toBe(true);
    await expect(settled).resolves.toEqual({ content: 'paid report', isError: false });
    expect(violations).toEqual([]);
  });

  it('without an MCP runner, relays that the paid call was not sent', async () => {
    const { payments, written: out } = harness();
    const settled = payments.port(undefined).settle(call, 'apr_1', options());
    payments.mcpPayment({ toolCallId: 'c1', payment: '{}', protocol: 'x402' });
    await written(out, 2);
    expect(out[1]).toMatchObject({
      $case: 'mcpPaidResult',
      value: { paymentNotTaken: true, isError: true, paymentResponse: '' },
    });
    payments.settled({ toolCallId: 'c1', known: false, reason: 'unknown' });
    await expect(settled).rejects.toThrow('unknown');
  });

  it('takes as a protocol mistake a payment, or a charge, nobody asked for, and an empty payment', async () => {
    const { payments, violations } = harness();
    payments.mcpPayment({ toolCallId: 'c9', payment: '{}', protocol: 'x402' });
    payments.chargeAnswered({ toolCallId: 'c9', answer: { $case: 'refusal', value: 'no' } });
    const settled = payments.port(undefined).settle(call, 'apr_1', options());
    payments.mcpPayment({ toolCallId: 'c1', payment: '', protocol: 'x402' });
    expect(violations).toEqual([
      'mcp_payment for c9, which did not ask to pay or got no payment',
      'payment_charge_answer for c9, which sent no challenge',
      'mcp_payment for c1, which did not ask to pay or got no payment',
    ]);
    expect(payments.settled({ toolCallId: 'c9', known: false, reason: 'x' })).toBe(false);
    payments.closeInput(new AppError('cancelled', 'the call ended'));
    await expect(settled).rejects.toThrow('the call ended');
    await expect(payments.port(undefined).settle(call, 'apr_1', options())).rejects.toThrow(
      'the call ended',
    );
  });
});
