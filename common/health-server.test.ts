import { afterEach, describe, expect, it } from '@jest/globals';
import { Counter, Registry } from 'prom-client';
import { HealthServer } from './health-server';

let server: HealthServer | undefined;

afterEach(async () => {
  await server?.close();
  server = undefined;
});

async function get(port: number, path: string): Promise<{ status: number; body: string }> {
  const response = await fetch(`http://127.0.0.1:${port}${path}`);
  return { status: response.status, body: await response.text() };
}

describe('HealthServer', () => {
  it('serves /healthz, flips /readyz with the callback and serves /metrics', async () => {
    let ready = false;
    const registry = new Registry();
    new Counter({ name: 'test_turns_total', help: 'Turns.', registers: [registry] }).inc(3);
    server = new HealthServer({ host: '127.0.0.1', port: 0, isReady: () => ready, registry });
    const { port } = await server.start();

    expect(await get(port, '/healthz')).toEqual({ status: 200, body: 'ok\n' });
    expect(await get(port, '/readyz')).toEqual({ status: 503, body: 'not ready\n' });
    ready = true;
    expect(await get(port, '/readyz')).toEqual({ status: 200, body: 'ready\n' });
    ready = false;
    expect((await get(port, '/readyz')).status).toBe(503);

    const metrics = await get(port, '/metrics');
    expect(metrics.status).toBe(200);
    expect(metrics.body).toContain('test_turns_total 3');
    expect((await get(port, '/nope')).status).toBe(404);
  });

  it('names the reason on /readyz while not ready, when the process gives one', async () => {
    let reason: string | undefined = 'journal volume low_space: 12 bytes free';
    server = new HealthServer({
      host: '127.0.0.1',
      port: 0,
      isReady: () => reason === undefined,
      notReadyReason: () => reason,
      registry: new Registry(),
    });
    const { port } = await server.start();
    expect(await get(port, '/readyz')).toEqual({
      status: 503,
      body: 'not ready: journal volume low_space: 12 bytes free\n',
    });
    reason = undefined;
    expect(await get(port, '/readyz')).toEqual({ status: 200, body: 'ready\n' });
  });

  it('closes idempotently and refuses a second start', async () => {
    server = new HealthServer({
      host: '127.0.0.1',
      port: 0,
      isReady: () => true,
      registry: new Registry(),
    });
    const { port } = await server.start();
    await expect(server.start()).rejects.toThrow('health server: start() called twice');
    await Promise.all([server.close(), server.close()]);
    await server.close();
    await expect(fetch(`http://127.0.0.1:${port}/healthz`)).rejects.toThrow();
  });
});
