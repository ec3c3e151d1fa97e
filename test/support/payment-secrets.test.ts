import { describe, expect, it } from '@jest/globals';
import { randomBytes } from 'node:crypto';
import { expectNoPaymentSecrets, type PaymentSecrets } from './payment-secrets';

// The search the paid-turn tests run over journals, logs and traces finds each form of each
// secret, and passes over text that holds none.

const key = `0x${randomBytes(32).toString('hex')}`;
const signature = `0x${randomBytes(65).toString('hex')}`;
const mppSignature = `0x${randomBytes(65).toString('hex')}`;
const x402Header = Buffer.from(
  JSON.stringify({ x402Version: 2, payload: { signature, authorization: { value: '1' } } }),
).toString('base64');
const mppToken = Buffer.from(
  JSON.stringify({
    challenge: { id: 'c' },
    payload: { type: 'authorization', signature: mppSignature },
  }),
).toString('base64url');
const secrets: PaymentSecrets = {
  payerKey: key,
  paymentSignatures: [x402Header],
  mppCredentials: [`Payment ${mppToken}`],
};
const bare = key.slice(2);
const bytes = (hex: string): Buffer => Buffer.from(hex.replace(/^0x/u, ''), 'hex');

const FOUND: readonly (readonly [string, string])[] = [
  ['the key, 0x hex', key],
  ['the key, bare hex', bare],
  ['the key, upper-case hex', bare.toUpperCase()],
  ['the key, base64', bytes(key).toString('base64')],
  ['the key, base64url', bytes(key).toString('base64url')],
  ['the key, base64 of its hex', Buffer.from(bare).toString('base64')],
  ['the key, decimal', BigInt(key).toString(10)],
  ['the PAYMENT-SIGNATURE header', x402Header],
  ['its EIP-3009 signature', signature.toUpperCase().replace('0X', '0x')],
  ['its signature as base64', bytes(signature).toString('base64')],
  ['the MPP credential', `Authorization: Payment ${mppToken}`],
  ['its EIP-3009 signature', mppSignature.slice(2)],
];

describe('expectNoPaymentSecrets', () => {
  it.each(FOUND)('finds %s', (_name, leaked) => {
    expect(() => expectNoPaymentSecrets(`a span attribute: "${leaked}".`, secrets)).toThrow();
  });

  it('passes over text with only public facts: addresses, a transaction, another key', () => {
    const text = `payer 0x${randomBytes(20).toString('hex')} tx 0x${randomBytes(32).toString('hex')} ${randomBytes(32).toString('base64')}`;
    expect(() => expectNoPaymentSecrets(text, secrets)).not.toThrow();
  });

  it('refuses to search for the signatures of a seller that received none', () => {
    expect(() => expectNoPaymentSecrets('', { payerKey: key, paymentSignatures: [] })).toThrow();
    expect(() =>
      expectNoPaymentSecrets('', { payerKey: key, mppCredentials: ['Bearer x'] }),
    ).toThrow(/not "Payment <credential>"/u);
  });
});
