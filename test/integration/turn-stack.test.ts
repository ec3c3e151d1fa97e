import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { credentials, Metadata, status as GrpcStatus, type ServiceError } from '@grpc/grpc-js';
import { existsSync, readFileSync } from 'node:fs';
import { randomUUID, type X509Certificate } from 'node:crypto';
import { connect } from 'node:tls';
import { harnessServerName } from '../../common/harness-identity';
import { loadStateClientTls } from '../../common/state-channel';
import { StateClient } from '../../common/state-client';
import { HarnessClient } from '../../proto/gen/polychrome/harness/v1/harness';
import { isAlive } from '../../hack/lib/processes';
import { startTurnStack, type TurnStack } from './support/turn-stack';

// The end-to-end stack the turn tests run on, smoke-tested: a Conversation gets a real
// harness process wired to the stack's model server and keys, tokens can be minted, the
// control plane rides out a SIGKILLed state plane, and stop leaves nothing running.

/** The environment a process started with (Linux), or undefined elsewhere. */
function environOf(pid: number): Record<string, string> | undefined {
  const path = `/proc/${pid}/environ`;
  if (!existsSync(path)) return undefined;
  const env: Record<string, string> = {};
  for (const entry of readFileSync(path, 'utf8').split('\0')) {
    const at = entry.indexOf('=');
    if (at > 0) env[entry.slice(0, at)] = entry.slice(at + 1);
  }
  return env;
}

/**
 * The certificate the harness at `address` presents to a client that trusts only the stack's
 * harness CA and checks for the stack's namespace: the handshake fails otherwise.
 */
async function servedCertificate(address: string, stack: TurnStack): Promise<X509Certificate> {
  const [host = '', port = ''] = address.split(':');
  const ca = readFileSync(stack.harnessCa.certPath, 'utf8');
  return await new Promise((resolve, reject) => {
    const socket = connect(
      { host, port: Number(port), ca, servername: harnessServerName(stack.namespace) },
      () => {
        const certificate = socket.getPeerX509Certificate();
        socket.end();
        if (certificate === undefined) reject(new Error(`${address} presented no certificate`));
        else resolve(certificate);
      },
    );
    socket.once('error', reject);
  });
}

describe('turn stack', () => {
  let stack: TurnStack | undefined;
  const started = Date.now();

  beforeAll(async () => {
    stack = await startTurnStack({ controlPlanes: 1 });
    process.stderr.write(`turn stack: up in ${Date.now() - started} ms\n`);
  }, 120_000);

  afterAll(async () => {
    await stack?.stop();
  }, 60_000);

  const the = (): TurnStack => {
    if (stack === undefined) throw new Error('the stack did not start');
    return stack;
  };

  it('starts a Conversation’s harness as a process wired to the stack', () =>
    the().withDiagnostics(async () => {
      const s = the();
      const t0 = Date.now();
      const uid = await s.createConversation('smoke');
      process.stderr.write(`turn stack: Conversation Ready in ${Date.now() - t0} ms\n`);
      expect(uid).toMatch(/^[0-9a-f-]{36}$/u);

      const harness = await s.harness('smoke');
      expect(harness.pid).toBeDefined();
      expect(isAlive(harness.pid ?? 0)).toBe(true);
      expect(harness.podIP).toMatch(/^127\./u);
      expect((await fetch(`http://${harness.podIP}:9090/readyz`)).status).toBe(200);
      const env = environOf(harness.pid ?? 0);
      if (env !== undefined) {
        expect(env).toMatchObject({
          ANTHROPIC_BASE_URL: s.messages.url,
          ANTHROPIC_API_KEY: s.messages.apiKey,
          HARNESS_NAMESPACE: s.namespace,
          HARNESS_APPROVAL_PUBLIC_KEY: s.approvalKey.publicKeyHex,
          POD_IP: harness.podIP,
        });
        expect(env.HARNESS_MODEL_SCRIPT).toBeUndefined();
      }
      // The harness door is TLS only, with the certificate of the stack's namespace from the
      // Secret polychrome-harness-tls, and a plaintext client is refused.
      const served = await servedCertificate(`${harness.podIP}:7070`, s);
      expect(served.subjectAltName).toBe(`DNS:${harnessServerName(s.namespace)}`);
      const plain = new HarnessClient(`${harness.podIP}:7070`, credentials.createInsecure());
      try {
        const status = await new Promise<ServiceError>((resolve) => {
          const call = plain.runTurn(new Metadata(), { deadline: Date.now() + 5_000 });
          call.on('error', resolve);
          call.on('data', () => undefined);
          call.end();
        });
        expect(status.code).toBe(GrpcStatus.UNAVAILABLE);
      } finally {
        plain.close();
      }
      // No turn ran yet: the journal is empty.
      expect(await s.journal(uid)).toEqual([]);
    }));

  it('mints tokens, and the control plane is ready again after the state plane is SIGKILLed', () =>
    the().withDiagnostics(async () => {
      const s = the();
      const cp = s.controlPlane(0);
      const alice = await s.mintToken('test:alice', ['admin']);
      expect(alice).toMatch(/^\S{16,}$/u);
      expect(await s.mintToken('test:alice', ['admin'])).not.toBe(alice);

      // A journal of its own (not a conversation's) shows journal() and verify() at work.
      const uid = randomUUID();
      const writer = new StateClient({
        address: s.state.address,
        tls: await loadStateClientTls({
          ca: s.certs.ca.certPath,
          cert: s.certs.controlPlane.certPath,
          key: s.certs.controlPlane.keyPath,
        }),
      });
      try {
        await writer.append(`conv-${uid}`, 0, [
          { kind: 'conversation_closed', payload: new Uint8Array() },
        ]);
      } finally {
        writer.close();
      }

      const t0 = Date.now();
      expect(await s.state.kill('SIGKILL')).toBe('SIGKILL');
      await cp.waitNotReady(20_000);
      await s.state.start();
      await cp.waitReady(30_000);
      process.stderr.write(
        `turn stack: state plane SIGKILL → control plane ready again in ${Date.now() - t0} ms\n`,
      );

      // Same data directory: the journal and the records survived.
      expect(await s.journalKinds(uid)).toEqual(['conversation_closed', 'signed_root']);
      const check = await s.verify(uid);
      expect(check).toMatchObject({ ok: true, events: 2 });
      expect(await s.mintToken('test:alice', ['admin'])).toMatch(/^\S{16,}$/u);
    }));

  it('stops everything it started', async () => {
    const s = the();
    const harness = await s.harness('smoke');
    const pids = [
      harness.pid,
      s.state.process?.child.pid,
      ...s.controlPlanes.map((p) => p.child?.pid),
    ].filter((pid): pid is number => pid !== undefined);
    expect(pids).toHaveLength(3);
    const t0 = Date.now();
    await s.stop();
    process.stderr.write(`turn stack: stopped in ${Date.now() - t0} ms\n`);
    expect(pids.filter(isAlive)).toEqual([]);
    expect(existsSync(s.dir)).toBe(false);
  });
});
