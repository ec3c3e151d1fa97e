import { describe, expect, it } from '@jest/globals';
import { parseAuthChallenges } from './auth-params';
import { ChallengeError, challengeDigest } from './charge';
import { hasMppChallenge, parseMppChallenge, parseMppMcpChallenge } from './mpp-challenge';
import { mppCredentialHeaders } from './mpp-settle';

const URL_ = 'https://api.example.com/paid';
const AT = new Date('2026-12-06T12:00:00.000Z');
const TOKEN = '0x4ac9997193AA3FA92bcCe16496f0831F19A84622';
const PAYEE = '0xf63B12703D5D7a68f800b5e8373AB749f85d694e';

function request(
  overrides: Record<string, unknown> = {},
  details: Record<string, unknown> = {},
): string {
  const body = {
    amount: '1250000',
    currency: TOKEN,
    methodDetails: { chainId: 31337, credentialTypes: ['authorization'], decimals: 6, ...details },
    recipient: PAYEE,
    ...overrides,
  };
  return Buffer.from(JSON.stringify(body)).toString('base64url');
}

function header(params: Record<string, string | undefined> = {}): string {
  const all: Record<string, string | undefined> = {
    id: 'LOIkYXtdbMPY1LkvSm1P2LC5X0D8T9QopYcezjysUTM',
    realm: 'api.example.com',
    method: 'evm',
    intent: 'charge',
    request: request(),
    expires: '2026-12-06T12:05:00.000Z',
    ...params,
  };
  const pairs = Object.entries(all).filter(([, v]) => v !== undefined);
  return `Payment ${pairs.map(([k, v]) => `${k}="${v}"`).join(', ')}`;
}

describe('parseMppChallenge', () => {
  it('turns an evm charge challenge into a neutral charge bound to its exact bytes', () => {
    const value = header();
    const parsed = parseMppChallenge(value, URL_, AT);
    expect(parsed.charge).toEqual({
      protocol: 'mpp',
      challengeDigest: challengeDigest(value),
      amount: '1250000',
      asset: TOKEN.toLowerCase(),
      network: 'eip155:31337',
      payee: PAYEE.toLowerCase(),
      resourceUrl: URL_,
      expiresAt: '2026-12-06T12:05:00.000Z',
    });
    expect(parsed.id).toBe('LOIkYXtdbMPY1LkvSm1P2LC5X0D8T9QopYcezjysUTM');
  });

  it('gives a challenge without expires five minutes', () => {
    expect(parseMppChallenge(header({ expires: undefined }), URL_, AT).charge.expiresAt).toBe(
      '2026-12-06T12:05:00.000Z',
    );
  });

  it('reads the Payment challenge among others in one header', () => {
    const value = `Bearer realm="api", ${header()}`;
    expect(hasMppChallenge(value)).toBe(true);
    expect(parseMppChallenge(value, URL_, AT).charge.amount).toBe('1250000');
    expect(hasMppChallenge('Bearer realm="api"')).toBe(false);
  });

  const bad: [string, string, RegExp][] = [
    ['no Payment challenge', 'Bearer realm="x"', /has no Payment challenge/],
    [
      'two Payment challenges',
      `${header()}, ${header({ id: 'other' })}`,
      /has 2 Payment challenges/,
    ],
    [
      'an unclosed quote',
      'Payment method="evm", id="abc',
      /is malformed \(a quoted value is not closed\)/,
    ],
    [
      'a repeated parameter',
      'Payment id="a", id="b"',
      /is malformed \(parameter id appears twice\)/,
    ],
    ['too large', `Payment id="${'a'.repeat(20_000)}"`, /over the 16384-byte limit/],
    ['no id', header({ id: undefined }), /: id is missing/],
    ['no realm', header({ realm: undefined }), /: realm is missing/],
    ['method tempo', header({ method: 'tempo' }), /method is tempo; only "evm" is paid/],
    ['intent session', header({ intent: 'session' }), /intent is session; only "charge" is paid/],
    ['no request', header({ request: undefined }), /request is missing/],
    ['request not base64url', header({ request: 'a+b/c' }), /request is not base64url/],
    [
      'request not JSON',
      header({ request: Buffer.from('{x').toString('base64url') }),
      /request is base64url but not JSON/,
    ],
    [
      'a float amount',
      header({ request: request({ amount: '1.25' }) }),
      /request.amount is not a whole number/,
    ],
    ['a zero amount', header({ request: request({ amount: '0' }) }), /request.amount is zero/],
    [
      'an amount over uint256',
      header({ request: request({ amount: (1n << 256n).toString() }) }),
      /larger than a uint256/,
    ],
    [
      'a currency code',
      header({ request: request({ currency: 'usd' }) }),
      /request.currency is not a token address/,
    ],
    [
      'no recipient',
      header({ request: request({ recipient: undefined }) }),
      /request.recipient is not an address/,
    ],
    [
      'no chain id',
      header({ request: request({}, { chainId: undefined }) }),
      /chainId is not a positive whole number/,
    ],
    [
      'no authorization credential',
      header({ request: request({}, { credentialTypes: ['permit2'] }) }),
      /does not accept an EIP-3009 authorization/,
    ],
    [
      'splits',
      header({ request: request({}, { splits: [{ amount: '1', recipient: PAYEE }] }) }),
      /splits the payment/,
    ],
    [
      'expired',
      header({ expires: '2026-12-06T11:59:59.000Z' }),
      /expires is 2026-12-06T11:59:59.000Z, already past/,
    ],
    [
      'an expiry that is not a time',
      header({ expires: 'tomorrow' }),
      /expires is not an RFC 3339 time/,
    ],
  ];
  it.each(bad)('refuses %s with a message naming what is wrong', (_name, value, message) => {
    let error: unknown;
    try {
      parseMppChallenge(value, URL_, AT);
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(ChallengeError);
    expect((error as Error).message).toMatch(message);
    expect((error as Error).message).toMatch(/^mpp payment challenge: /);
  });
});

describe('parseAuthChallenges', () => {
  it('reads schemes, tokens, quoted strings with escapes, and several challenges', () => {
    expect(
      parseAuthChallenges('Basic realm="a \\"b\\"", Payment id=tok/en=, method="evm"'),
    ).toEqual([
      { scheme: 'Basic', params: new Map([['realm', 'a "b"']]) },
      {
        scheme: 'Payment',
        params: new Map([
          ['id', 'tok/en='],
          ['method', 'evm'],
        ]),
      },
    ]);
  });

  it.each([
    ['id="x"', /parameter id comes before any scheme/],
    ['Payment id="x" method="y"', /parameter id is not followed by a comma/],
    ['Payment id=', /a parameter has no value/],
    ['Payment ;', /unexpected ";"/],
  ])('refuses %s', (value, message) => {
    expect(() => parseAuthChallenges(value)).toThrow(message);
  });
});

describe('mppCredentialHeaders', () => {
  const credential = { authorization: 'Payment eyJ9' };
  it('sends the credential in Authorization when the tool has none', () => {
    expect(mppCredentialHeaders({ accept: 'application/json' }, credential)).toEqual({
      authorization: 'Payment eyJ9',
    });
  });
  it("moves it to Payment-Authorization when the tool's request keeps its own", () => {
    expect(mppCredentialHeaders({ Authorization: 'Bearer t' }, credential)).toEqual({
      'payment-authorization': 'Payment eyJ9',
    });
  });
});

describe('parseMppMcpChallenge', () => {
  const MCP_URL = 'mcp://shop/report';
  const challenge = (over: Record<string, unknown> = {}) => ({
    id: 'LOIkYXtdbMPY1LkvSm1P2LC5X0D8T9QopYcezjysUTM',
    realm: 'api.example.com',
    method: 'evm',
    intent: 'charge',
    request: JSON.parse(Buffer.from(request(), 'base64url').toString('utf8')) as unknown,
    expires: '2026-12-06T12:05:00.000Z',
    ...over,
  });
  const data = (...challenges: unknown[]) => JSON.stringify({ httpStatus: 402, challenges });

  it('reads the one challenge by the header rules; the digest is of the JSON as relayed', () => {
    const json = data(challenge());
    const parsed = parseMppMcpChallenge(json, MCP_URL, AT);
    expect(parsed.charge).toEqual({
      ...parseMppChallenge(header(), URL_, AT).charge,
      resourceUrl: MCP_URL,
      challengeDigest: challengeDigest(json),
    });
    expect(parsed).toMatchObject({
      id: challenge().id,
      realm: 'api.example.com',
      expiresGiven: true,
    });
    // The header it stands for is the one mppx's client reads to pay it.
    expect(parseMppChallenge(parsed.header, MCP_URL, AT).charge.amount).toBe('1250000');
  });

  it.each<[string, string, string]>([
    ['not JSON', '{', 'payment-required is not JSON'],
    ['no challenges', '{"httpStatus": 402}', 'challenges is missing'],
    [
      'two challenges',
      data(challenge(), challenge({ id: 'b' })),
      'challenges has 2 challenges; only exactly one is paid',
    ],
    ['no challenge', data(), 'challenges has 0 challenges'],
    [
      'a challenge without an id',
      data(challenge({ id: undefined })),
      'challenges[0].id is not part of an MPP challenge',
    ],
    ['another method', data(challenge({ method: 'tempo' })), 'method is tempo; only "evm" is paid'],
    [
      'another intent',
      data(challenge({ intent: 'session' })),
      'intent is session; only "charge" is paid',
    ],
    ['an expiry past', data(challenge({ expires: '2026-12-06T11:00:00.000Z' })), 'already past'],
    [
      'a payee that is no address',
      data(
        challenge({
          request: { amount: '5', currency: TOKEN, recipient: 'me', methodDetails: { chainId: 1 } },
        }),
      ),
      'request.recipient is not an address',
    ],
    ['over the size limit', data(challenge({ description: 'x'.repeat(20_000) })), 'over the'],
  ])('refuses %s, naming it', (_name, json, message) => {
    expect(() => parseMppMcpChallenge(json, MCP_URL, AT)).toThrow(ChallengeError);
    expect(() => parseMppMcpChallenge(json, MCP_URL, AT)).toThrow(message);
  });
});
