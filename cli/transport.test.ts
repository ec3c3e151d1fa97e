import { describe, expect, it } from '@jest/globals';
import { ConversationOperation, joinUrl, PersonaOperation, publicApiTransport } from './transport';

describe('publicApiTransport', () => {
  const seen: { url: string; init: RequestInit }[] = [];
  const transport = publicApiTransport({
    baseUrl: 'http://127.0.0.1:8080/prefix/',
    token: 'pcs_secret',
    fetch: (input, init) => {
      seen.push({ url: input instanceof Request ? input.url : input.toString(), init: init ?? {} });
      return Promise.resolve(new Response('{}'));
    },
  });

  it('maps an operation onto /v1/conversations, encoding every segment and the query', () => {
    expect(
      transport.url({
        conversation: 'a/b',
        operation: ConversationOperation.Approvals,
        rest: ['req 1'],
        query: { since: '4' },
      }),
    ).toBe('http://127.0.0.1:8080/prefix/v1/conversations/a%2Fb/approvals/req%201?since=4');
    expect(transport.url({ conversation: 'c', operation: ConversationOperation.Stream })).toBe(
      'http://127.0.0.1:8080/prefix/v1/conversations/c/stream',
    );
  });

  it("maps a persona's payment policy onto /v1/personas/{id}/payment-policy", () => {
    expect(
      transport.url({
        persona: 'p 1',
        operation: PersonaOperation.PaymentPolicy,
        query: { actor: 'email:root@example.com' },
      }),
    ).toBe(
      'http://127.0.0.1:8080/prefix/v1/personas/p%201/payment-policy?actor=email%3Aroot%40example.com',
    );
  });

  it('applies the token as a bearer header, keeping the request headers, and never names it', async () => {
    await transport.fetch('http://127.0.0.1:8080/x', {
      method: 'POST',
      headers: { accept: 'application/json' },
    });
    expect(seen.at(-1)?.init.headers).toEqual({
      accept: 'application/json',
      authorization: 'Bearer pcs_secret',
    });
    expect(`${transport.description} ${transport.unreachableHint}`).not.toContain('pcs_secret');
  });
});

describe('joinUrl', () => {
  it('leaves the base alone and adds no "?" for an empty query', () => {
    expect(joinUrl('https://h:1/apis', ['x', '%'], {})).toBe('https://h:1/apis/x/%25');
  });
});
