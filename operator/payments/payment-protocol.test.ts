import { describe, expect, it } from '@jest/globals';
import { mppProtocol, readChallenge, readMcpChallenge, x402Protocol } from './payment-protocol';

const URL_ = 'https://api.example.com/paid';
const AT = new Date('2026-12-06T12:00:00.000Z');
const ADDRESS = '0x4ac9997193AA3FA92bcCe16496f0831F19A84622';
const x402Header = Buffer.from(
  JSON.stringify({
    x402Version: 2,
    resource: { url: URL_ },
    accepts: [
      {
        scheme: 'exact',
        network: 'eip155:31337',
        amount: '5',
        asset: ADDRESS,
        payTo: ADDRESS,
        maxTimeoutSeconds: 60,
        extra: { name: 'T', version: '2' },
      },
    ],
  }),
).toString('base64');
const request = Buffer.from(
  JSON.stringify({
    amount: '7',
    currency: ADDRESS,
    recipient: ADDRESS,
    methodDetails: { chainId: 31337 },
  }),
).toString('base64url');
const mppHeader = `Payment id="i", realm="r", method="evm", intent="charge", request="${request}"`;
const both = new Headers({ 'payment-required': x402Header, 'www-authenticate': mppHeader });
const knows = (network: string, asset: string) =>
  network === 'eip155:31337' && asset === ADDRESS.toLowerCase()
    ? { name: 'T', version: '2' }
    : undefined;
const protocols = [mppProtocol(knows), x402Protocol()];

describe('readChallenge', () => {
  it('lets the first protocol in the order that finds a challenge parse it', () => {
    expect(readChallenge(protocols, both, URL_, AT).charge).toMatchObject({
      protocol: 'mpp',
      amount: '7',
    });
    expect(readChallenge([...protocols].reverse(), both, URL_, AT).charge).toMatchObject({
      protocol: 'x402',
      amount: '5',
    });
    expect(
      readChallenge(protocols, new Headers({ 'payment-required': x402Header }), URL_, AT).challenge,
    ).toBe(x402Header);
  });

  it('gives way to the next challenge present when the preferred one cannot be paid', () => {
    // A seller offering MPP in a token the table does not list, and x402: x402 is shown.
    expect(
      readChallenge([mppProtocol(() => undefined), x402Protocol()], both, URL_, AT),
    ).toMatchObject({ challenge: x402Header, charge: { protocol: 'x402', amount: '5' } });
    // An MPP method Polychrome does not pay (tempo) beside x402.
    const tempo = new Headers({
      'www-authenticate': mppHeader.replace('method="evm"', 'method="tempo"'),
      'payment-required': x402Header,
    });
    expect(readChallenge(protocols, tempo, URL_, AT).charge.protocol).toBe('x402');
    // Both refused: each named, nothing shown.
    const bad = new Headers({
      'www-authenticate': mppHeader.replace('method="evm"', 'method="tempo"'),
      'payment-required': Buffer.from('{"x402Version": 1}').toString('base64'),
    });
    expect(() => readChallenge(protocols, bad, URL_, AT)).toThrow(
      /^mpp payment challenge: method is tempo; only "evm" is paid; the charge was not made; and x402 payment challenge: /,
    );
  });

  it('passes over a WWW-Authenticate without a Payment challenge', () => {
    const headers = new Headers({
      'www-authenticate': 'Bearer realm="api"',
      'payment-required': x402Header,
    });
    expect(readChallenge(protocols, headers, URL_, AT).charge.protocol).toBe('x402');
  });

  it('refuses a 402 without a challenge, naming what it looked for', () => {
    expect(() => readChallenge(protocols, new Headers(), URL_, AT)).toThrow(
      'the 402 carries no payment challenge Polychrome reads (looked for: mpp, x402)',
    );
  });

  it('refuses an MPP charge in a token its table does not list, before any approval', () => {
    expect(() => readChallenge([mppProtocol(() => undefined)], both, URL_, AT)).toThrow(
      `mpp payment challenge: request.currency is ${ADDRESS.toLowerCase()} on eip155:31337, a token the control plane's MPP token table does not list; the charge was not made`,
    );
    // Another network's token of the same address is another token.
    const elsewhere = (network: string, asset: string) =>
      knows(network === 'eip155:31337' ? 'eip155:1' : network, asset);
    expect(() => readChallenge([mppProtocol(elsewhere)], both, URL_, AT)).toThrow(
      'request.currency',
    );
  });

  it('refuses to settle MPP in a token whose EIP-712 domain it does not know', async () => {
    // Parsed while the table listed it, settled by a protocol whose table no longer does.
    const read = readChallenge(protocols, both, URL_, AT);
    await expect(
      mppProtocol(() => undefined).settle({
        charge: read.charge,
        challenge: read.challenge,
        wallet: { name: 'w', address: ADDRESS, signTypedData: () => Promise.resolve('0x') },
        request: { url: URL_, method: 'GET', headers: {} },
        idempotencyKey: '00'.repeat(32),
      }),
    ).rejects.toThrow(/is not a known token; add its EIP-712 domain/);
  });
});

describe('readMcpChallenge', () => {
  const MCP_URL = 'mcp://shop/report';
  const x402Json = Buffer.from(x402Header, 'base64').toString('utf8');
  const challenge = {
    id: 'i',
    realm: 'r',
    method: 'evm',
    intent: 'charge',
    request: {
      amount: '7',
      currency: ADDRESS,
      recipient: ADDRESS,
      methodDetails: { chainId: 31337 },
    },
    expires: '2026-12-06T12:05:00.000Z',
  };
  const mppJson = JSON.stringify({ httpStatus: 402, challenges: [challenge] });

  it("reads x402's PaymentRequired and MPP's challenges, each by its own transport", () => {
    expect(readMcpChallenge(protocols, x402Json, MCP_URL, AT)).toMatchObject({
      challenge: x402Json,
      charge: { protocol: 'x402', amount: '5', resourceUrl: MCP_URL },
    });
    expect(readMcpChallenge(protocols, mppJson, MCP_URL, AT)).toMatchObject({
      challenge: mppJson,
      charge: {
        protocol: 'mpp',
        amount: '7',
        payee: ADDRESS.toLowerCase(),
        network: 'eip155:31337',
        resourceUrl: MCP_URL,
        expiresAt: '2026-12-06T12:05:00.000Z',
      },
    });
  });

  it('refuses an MPP charge in a token its table does not list, and one no transport here reads', () => {
    expect(() => readMcpChallenge([mppProtocol(() => undefined)], mppJson, MCP_URL, AT)).toThrow(
      'request.currency',
    );
    // MPP over MCP to a control plane paying x402 alone.
    expect(() => readMcpChallenge([x402Protocol()], mppJson, MCP_URL, AT)).toThrow(
      'the MCP tool asks for payment in a form no MCP payment transport of this control plane reads (it pays over MCP: x402)',
    );
    expect(() => readMcpChallenge(protocols, '{"something": "else"}', MCP_URL, AT)).toThrow(
      '(it pays over MCP: mpp, x402)',
    );
  });
});
