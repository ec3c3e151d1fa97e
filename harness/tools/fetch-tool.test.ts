import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { ToolCallRequest } from '../turn/ports/tool-port';
import { FETCH_MAX_BODY_BYTES, fetchToolRunner } from './fetch-tool';

// The built-in `fetch` against a real HTTP server on loopback: a 402 is handed back as the
// challenge's headers (never as a result the model reads), every other status is the
// result, and a bad URL is the model's mistake, named.

let server: Server;
let base: string;

beforeAll(async () => {
  server = createServer((req, res) => {
    switch (req.url) {
      case '/ok':
        res.writeHead(200, { 'content-type': 'text/plain' }).end('hello');
        return;
      case '/missing':
        res.writeHead(404).end('no such page');
        return;
      case '/paid':
        res
          .writeHead(402, { 'PAYMENT-REQUIRED': 'eyJ4NDAyVmVyc2lvbiI6Mn0=', 'X-Other': 'kept' })
          .end('{}');
        return;
      case '/moved':
        res.writeHead(302, { location: 'http://169.254.169.254/latest' }).end();
        return;
      case '/big':
        res.writeHead(200).end('x'.repeat(FETCH_MAX_BODY_BYTES + 10));
        return;
      default:
        res.writeHead(500).end();
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  await new Promise<void>((resolve, reject) => server.close((e) => (e ? reject(e) : resolve())));
});

function get(url: unknown) {
  const request: ToolCallRequest = {
    turnId: 't',
    toolCallId: 'f',
    name: 'fetch',
    input: { url } as never,
    argsJson: JSON.stringify({ url }),
    step: 1,
    maxSteps: 3,
  };
  return fetchToolRunner.call(request, { signal: AbortSignal.timeout(5_000), timeoutMs: 5_000 });
}

describe('the fetch tool', () => {
  it('returns the status and body of a 200, and a 404 as an error the model sees', async () => {
    await expect(get(`${base}/ok`)).resolves.toEqual({
      content: 'HTTP 200\nhello',
      isError: false,
    });
    await expect(get(`${base}/missing`)).resolves.toEqual({
      content: 'HTTP 404\nno such page',
      isError: true,
    });
  });

  it('hands a 402 back with its headers, names lower-case, for the control plane to read', async () => {
    const outcome = await get(`${base}/paid`);
    expect(outcome.paymentRequired?.url).toBe(`${base}/paid`);
    expect(outcome.paymentRequired?.headers).toEqual(
      expect.arrayContaining([
        ['payment-required', 'eyJ4NDAyVmVyc2lvbiI6Mn0='],
        ['x-other', 'kept'],
      ]),
    );
  });

  it('does not follow a redirect: the model sees where it points', async () => {
    await expect(get(`${base}/moved`)).resolves.toEqual({
      content: 'HTTP 302 (location: http://169.254.169.254/latest)\n',
      isError: false,
    });
  });

  it('cuts a large body and says so', async () => {
    const outcome = await get(`${base}/big`);
    expect(outcome.content.endsWith(`[cut at ${FETCH_MAX_BODY_BYTES} bytes]`)).toBe(true);
  });

  it.each<[unknown, string]>([
    [undefined, 'fetch needs arguments of the form { url: string }'],
    ['not a url', '"not a url" is not an absolute URL'],
    ['file:///etc/passwd', 'file: URLs are not fetched'],
    ['http://user:secret@127.0.0.1/', 'a URL with credentials in it is not fetched'],
  ])('refuses %p, naming what is wrong', async (url, why) => {
    const outcome = await get(url);
    expect(outcome.isError).toBe(true);
    expect(outcome.content).toContain(why);
  });

  it('a server nobody listens on is a known failure: a GET has no effect to lose', async () => {
    const outcome = await get('http://127.0.0.1:1/');
    expect(outcome.isError).toBe(true);
    expect(outcome.content).toMatch(/^fetch http:\/\/127\.0\.0\.1:1\/ failed: /);
  });
});
