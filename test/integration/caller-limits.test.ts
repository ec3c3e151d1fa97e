/**
 * Per-caller limits through the real kube-apiserver (the shared local cluster): the
 * Kubernetes door's `log` streams and requests count against the same limits as the public
 * API's (caller = `kubernetes:<user>`), refused 429 with Retry-After through the
 * aggregator; and a refused bearer token is refused again from the cache without another
 * TokenReview, counted by kube-apiserver's own request metrics.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomBytes } from 'node:crypto';
import { type IncomingMessage, type ClientRequest } from 'node:http';
import { request as httpsRequest, type RequestOptions } from 'node:https';
import { pollUntil } from '../../hack/lib/processes';
import { tokenReviewer } from '../../operator/kube-api/kube-door-ports';
import { serviceAccountAuthenticator } from '../../operator/kube-api/service-account-tokens';
import { AuthCache } from '../../operator/public-api/auth-cache';
import { CallerLimits, DEFAULT_LIMITS } from '../../operator/public-api/caller-limits';
import { kubeConfig } from './support/kube';
import {
  KUBE_API_PATH,
  kubectl,
  startKubeDoorStack,
  type KubeDoorStack,
} from './support/kube-door';

/** One open request to kube-apiserver as a user, its status and headers once they came. */
interface Opened {
  readonly request: ClientRequest;
  readonly response: IncomingMessage;
  /** The whole body, for an answer that ends (an error). */
  readonly body: Promise<string>;
}

async function openAs(
  kubeconfig: string,
  path: string,
  accept = 'text/event-stream',
): Promise<Opened> {
  const kc = await kubeConfig(kubeconfig);
  const server = new URL(kc.getCurrentCluster()?.server ?? '');
  const options: RequestOptions = {
    host: server.hostname,
    port: server.port,
    path,
    headers: { accept },
  };
  await kc.applyToHTTPSOptions(options);
  return await new Promise<Opened>((resolve, reject) => {
    const request = httpsRequest(options, (response) => {
      response.setEncoding('utf8');
      let text = '';
      const body = new Promise<string>((done) => {
        response.on('data', (chunk: string) => (text += chunk));
        response.once('end', () => done(text));
        response.once('error', () => done(text));
      });
      resolve({ request, response, body });
    });
    request.once('error', reject);
    request.setTimeout(30_000, () => request.destroy(new Error('no answer in 30 s')));
    request.end();
  });
}

/** What kube-apiserver has answered for TokenReviews since it started (its own metrics). */
async function tokenReviewsServed(admin: string): Promise<number> {
  const metrics = await openAs(admin, '/metrics', 'text/plain');
  const text = await metrics.body;
  if (metrics.response.statusCode !== 200) {
    throw new Error(
      `GET /metrics answered ${String(metrics.response.statusCode)}: ${text.slice(0, 200)}`,
    );
  }
  let total = 0;
  for (const line of text.split('\n')) {
    if (!line.startsWith('apiserver_request_total{')) continue;
    if (!line.includes('resource="tokenreviews"')) continue;
    total += Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return total;
}

/** A JWT-shaped token nobody issued. */
function forgedToken(): string {
  const part = (n: number): string => randomBytes(n).toString('base64url');
  return `${part(24)}.${part(96)}.${part(64)}`;
}

describe('per-caller limits through kube-apiserver', () => {
  let stack: KubeDoorStack;
  const clock = { ms: 0 };
  const limits = new CallerLimits({
    settings: { ...DEFAULT_LIMITS, streams: 2, requestsPerSecond: 1, burst: 6 },
    now: () => clock.ms,
  });
  const opened: Opened[] = [];

  beforeAll(async () => {
    stack = await startKubeDoorStack('limits', { limits });
    stack.addConversation('hello');
  }, 180_000);

  afterAll(async () => {
    for (const o of opened) o.request.destroy();
    await stack?.close();
  });

  it('holds alice to 2 log streams (429 TooManyRequests with Retry-After through the aggregator), leaves dave alone, and frees a closed one’s slot', async () => {
    const log = `${KUBE_API_PATH}/namespaces/${stack.namespace}/conversations/hello/log`;
    const alice = { identity: 'kubernetes:alice' };
    for (let i = 0; i < 2; i += 1) {
      const stream = await openAs(stack.users.alice, log);
      opened.push(stream);
      expect(stream.response.statusCode).toBe(200);
    }
    expect(limits.streamsOf(alice)).toBe(2);

    const refused = await openAs(stack.users.alice, log);
    expect(refused.response.statusCode).toBe(429);
    expect(refused.response.headers['retry-after']).toBe('5');
    const status = JSON.parse(await refused.body) as {
      reason: string;
      message: string;
      details: { causes: { reason: string }[] };
    };
    expect(status.reason).toBe('TooManyRequests');
    expect(status.details.causes[0]?.reason).toBe('resource_exhausted');
    expect(status.message).toContain('kubernetes:alice has 2 streams open on this replica');
    expect(status.message).toContain('POLYCHROME_LIMIT_STREAMS=2');

    const dave = await openAs(stack.users.dave, log);
    opened.push(dave);
    expect(dave.response.statusCode).toBe(200);

    // alice closes one: kube-apiserver closes its connection to the door, the slot is free.
    opened[0]?.request.destroy();
    await pollUntil(
      'alice’s closed stream to free its slot',
      () => Promise.resolve(limits.streamsOf(alice) === 1 ? true : undefined),
      { timeoutMs: 10_000, intervalMs: 20 },
    );
    const again = await openAs(stack.users.alice, log);
    opened.push(again);
    expect(again.response.statusCode).toBe(200);
  });

  it('holds alice to her request rate on the door (Retry-After from the bucket), not dave', async () => {
    const transcript = `${KUBE_API_PATH}/namespaces/${stack.namespace}/conversations/hello/transcript`;
    // alice used 4 of her 6 in the test above (the clock stands still): 2 more pass.
    for (let i = 0; i < 2; i += 1) {
      expect((await kubectl(stack.users.alice, ['get', '--raw', transcript])).ok).toBe(true);
    }
    const refused = await openAs(stack.users.alice, transcript);
    expect(refused.response.statusCode).toBe(429);
    expect(refused.response.headers['retry-after']).toBe('1');
    expect(await refused.body).toContain('POLYCHROME_LIMIT_REQUESTS_PER_SECOND=1');
    expect((await kubectl(stack.users.dave, ['get', '--raw', transcript])).ok).toBe(true);
    clock.ms += 1_000;
    const later = await openAs(stack.users.alice, transcript);
    expect(later.response.statusCode).toBe(200);
    await later.body;
  });

  it('refuses a forged bearer token again from the cache: the second ask never reaches the TokenReview API', async () => {
    let now = 0;
    const cache = new AuthCache({
      // As main.ts wires it for ServiceAccount tokens, as the control plane's own identity.
      authenticate: serviceAccountAuthenticator({
        review: tokenReviewer(stack.asControlPlane),
        records: stack.records,
      }),
      failureTtlMs: 5_000,
      now: () => now,
    });
    const forged = forgedToken();
    const before = await tokenReviewsServed(stack.admin);
    await expect(cache.authenticate(forged)).rejects.toMatchObject({ code: 'unauthenticated' });
    await pollUntil('kube-apiserver to count the first TokenReview', async () =>
      (await tokenReviewsServed(stack.admin)) === before + 1 ? true : undefined,
    );

    // The same token again: refused from the cache.
    await expect(cache.authenticate(forged)).rejects.toMatchObject({ code: 'unauthenticated' });
    // Another forged token does reach kube-apiserver; once it is counted, the count shows
    // that the repeat did not (it was asked before this one was).
    await expect(cache.authenticate(forgedToken())).rejects.toMatchObject({
      code: 'unauthenticated',
    });
    await pollUntil('kube-apiserver to count the other token’s TokenReview', async () =>
      (await tokenReviewsServed(stack.admin)) >= before + 2 ? true : undefined,
    );
    expect(await tokenReviewsServed(stack.admin)).toBe(before + 2);

    // Once the refusal is older than failureTtlMs, the token is asked about again.
    now += 5_000;
    await expect(cache.authenticate(forged)).rejects.toMatchObject({ code: 'unauthenticated' });
    await pollUntil('kube-apiserver to count the TokenReview after expiry', async () =>
      (await tokenReviewsServed(stack.admin)) === before + 3 ? true : undefined,
    );
  });
});
