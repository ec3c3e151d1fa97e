import { describe, expect, it } from '@jest/globals';
import { ChallengeError, challengeDigest } from './charge';
import { parseX402Challenge } from './x402-challenge';

const URL_ = 'https://api.example.com/paid?q=1';
const AT = new Date('2026-12-06T12:00:00.000Z');
const ASSET = '0x036CbD53842c5426634e7929541eC2318f3dCF7e';
const PAY_TO = '0x209693Bc6afc0C5328bA36FaF03C514EF312287C';

function offer(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    scheme: 'exact',
    network: 'eip155:84532',
    amount: '10000',
    asset: ASSET,
    payTo: PAY_TO,
    maxTimeoutSeconds: 60,
    extra: { name: 'USDC', version: '2' },
    ...overrides,
  };
}

function header(body: unknown): string {
  return Buffer.from(JSON.stringify(body)).toString('base64');
}

function challenge(overrides: Record<string, unknown> = {}, accepts: unknown = [offer()]): string {
  return header({ x402Version: 2, resource: { url: URL_ }, accepts, ...overrides });
}

describe('parseX402Challenge', () => {
  it('turns a v2 challenge into a neutral charge bound to its exact bytes', () => {
    const value = challenge();
    const { charge } = parseX402Challenge(value, URL_, AT);
    expect(charge).toEqual({
      protocol: 'x402',
      challengeDigest: challengeDigest(value),
      amount: '10000',
      asset: ASSET.toLowerCase(),
      network: 'eip155:84532',
      payee: PAY_TO.toLowerCase(),
      resourceUrl: URL_,
      expiresAt: '2026-12-06T12:01:00.000Z',
    });
    expect(charge.challengeDigest).toMatch(/^[0-9a-f]{64}$/);
  });

  it('gives a different digest to a challenge that differs in one byte', () => {
    const a = parseX402Challenge(challenge(), URL_, AT).charge.challengeDigest;
    const b = parseX402Challenge(challenge({}, [offer({ amount: '10001' })]), URL_, AT).charge
      .challengeDigest;
    expect(a).not.toBe(b);
  });

  const maxUint256 = ((1n << 256n) - 1n).toString();
  it('accepts the largest uint256 amount as a string, exactly', () => {
    expect(
      parseX402Challenge(challenge({}, [offer({ amount: maxUint256 })]), URL_, AT).charge.amount,
    ).toBe(maxUint256);
  });

  const bad: [string, string, RegExp][] = [
    ['not base64', '***', /PAYMENT-REQUIRED is not base64/],
    ['base64 of not JSON', Buffer.from('{nope').toString('base64'), /is base64 but not JSON/],
    ['a JSON array', header([1, 2]), /is not a JSON object/],
    ['too large', 'A'.repeat(20_000), /over the 16384-byte limit/],
    ['version 1', challenge({ x402Version: 1 }), /x402Version is 1, not 2/],
    [
      'no version',
      header({ resource: { url: URL_ }, accepts: [offer()] }),
      /x402Version is missing/,
    ],
    ['no resource', challenge({ resource: undefined }), /resource.url is missing/],
    [
      'a resource on another origin',
      challenge({ resource: { url: 'https://evil.example/paid' } }),
      /resource.url names https:\/\/evil.example/,
    ],
    ['no accepts', challenge({}, []), /accepts is missing or empty/],
    ['two accepts', challenge({}, [offer(), offer({ amount: '1' })]), /offers 2 ways to pay/],
    ['scheme upto', challenge({}, [offer({ scheme: 'upto' })]), /scheme is upto; only "exact"/],
    [
      'a solana network',
      challenge({}, [offer({ network: 'solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp' })]),
      /network is solana/,
    ],
    ['a float amount', challenge({}, [offer({ amount: '0.01' })]), /amount is not a whole number/],
    ['a numeric amount', challenge({}, [offer({ amount: 10000 })]), /amount is not a string/],
    ['a zero amount', challenge({}, [offer({ amount: '0' })]), /amount is zero/],
    ['a negative amount', challenge({}, [offer({ amount: '-5' })]), /amount is not a whole number/],
    ['leading zeros', challenge({}, [offer({ amount: '007' })]), /amount has leading zeros/],
    [
      'an amount over uint256',
      challenge({}, [offer({ amount: (1n << 256n).toString() })]),
      /larger than a uint256/,
    ],
    [
      'a huge amount',
      challenge({}, [offer({ amount: '9'.repeat(500) })]),
      /amount is not a whole number/,
    ],
    ['no asset', challenge({}, [offer({ asset: undefined })]), /asset is not a token address/],
    ['a bad payTo', challenge({}, [offer({ payTo: '0x1234' })]), /payTo is not an address/],
    [
      'no timeout',
      challenge({}, [offer({ maxTimeoutSeconds: undefined })]),
      /maxTimeoutSeconds is not a whole number/,
    ],
    ['a day-long timeout', challenge({}, [offer({ maxTimeoutSeconds: 86_400 })]), /from 1 to 3600/],
    [
      'no EIP-712 domain',
      challenge({}, [offer({ extra: {} })]),
      /lacks the token's EIP-712 domain/,
    ],
    [
      'permit2',
      challenge({}, [
        offer({ extra: { name: 'USDC', version: '2', assetTransferMethod: 'permit2' } }),
      ]),
      /only EIP-3009 is paid/,
    ],
  ];
  it.each(bad)('refuses %s with a message naming what is wrong', (_name, value, message) => {
    let error: unknown;
    try {
      parseX402Challenge(value, URL_, AT);
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(ChallengeError);
    expect((error as ChallengeError).message).toMatch(message);
    expect((error as ChallengeError).message).toMatch(
      /^x402 payment challenge: .*; the charge was not made$/,
    );
    expect((error as ChallengeError).code).toBe('invalid_argument');
  });

  it('cuts attacker-written values short in its messages', () => {
    const long = 'x'.repeat(5000);
    expect(() => parseX402Challenge(challenge({}, [offer({ scheme: long })]), URL_, AT)).toThrow(
      /scheme is x{40}\.\.\.;/,
    );
  });
});
