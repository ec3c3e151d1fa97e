import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import { generateKeyPairSync } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';

import { AppError, isAppError, isRetryable } from '../../common/errors';
import { harnessServerName } from '../../common/harness-identity';
import { CertUsage, DevCertificateAuthority } from '../../hack/lib/pki';
import {
  HarnessService,
  type TurnInput,
  type TurnOutput,
} from '../../proto/gen/polychrome/harness/v1/harness';
import { grpcErrorOf } from '../../common/grpc-errors';
import { Server, type ServerDuplexStream } from '@grpc/grpc-js';
import {
  harnessCertificateFrom,
  testHarnessCa,
  testHarnessServerCredentials,
} from '../../test/support/harness-tls';
import { startScriptedHarness, type ScriptedHarness } from '../../test/support/scripted-harness';
import { ApprovalSigner } from './approval-signer';
import { HarnessConnector } from './harness-client';
import { HarnessCredentialMinter } from './harness-credentials';
import type { HarnessMessage } from './harness-call';
import { handlers, readToEnd, start, type Sink } from './testdata/harness-calls';

// The control plane's side of the harness door, against the real harness server over TLS:
// it runs a turn only on a harness that proves, with a certificate the harness CA signed,
// that it serves the conversation's namespace. What an attacker would try: a harness of
// another namespace (a real certificate, the wrong name), and an impostor with the right
// name from a CA of its own. Neither sees a credential or runs a step.

const logger = pino({ level: 'silent' });
const { privateKey } = generateKeyPairSync('ed25519');
const pem = privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
const approvals = ApprovalSigner.fromPem(pem);

describe('HarnessConnector over TLS', () => {
  let dir: string;
  let connector: HarnessConnector;
  const harnesses: ScriptedHarness[] = [];

  const harness = async (
    options: Partial<Parameters<typeof startScriptedHarness>[0]> = {},
  ): Promise<ScriptedHarness> => {
    const started = await startScriptedHarness({
      replies: [{ text: 'first' }, { text: 'second' }],
      approvalPublicKey: approvals.publicKey,
      logger,
      namespace: 'team-a',
      ...options,
    });
    harnesses.push(started);
    return started;
  };

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'harness-client-'));
    connector = new HarnessConnector({
      harnessCa: await testHarnessCa(),
      credentials: HarnessCredentialMinter.fromPem(pem),
    });
  });

  afterEach(async () => {
    await Promise.all(harnesses.splice(0).map((h) => h.close()));
  });

  afterAll(async () => {
    connector.close();
    await rm(dir, { recursive: true, force: true });
  });

  it("runs turns on the harness of the conversation's namespace", async () => {
    const h = await harness();
    for (const turnId of ['t-1', 't-2']) {
      const sink = handlers();
      const end = await readToEnd(
        connector.openTurn(h.endpoint, start('c-1', turnId), { namespace: 'team-a' }),
        sink,
      );
      expect(end).toMatchObject({ kind: 'result', result: { outcome: { $case: 'complete' } } });
    }
    expect(h.model.callCount).toBe(2);
  });

  it("refuses a harness whose certificate names another namespace's harness: nothing is sent", async () => {
    const h = await harness();
    const sink = handlers();
    const refused = await readToEnd(
      connector.openTurn(h.endpoint, start('c-1', 't-1'), { namespace: 'team-b' }),
      sink,
    ).catch((error: unknown) => error);
    expect(isAppError(refused) && refused.code).toBe('unavailable');
    expect(String(refused)).toContain(`harness at ${h.endpoint}`);
    expect(h.model.callCount).toBe(0);
    expect(h.server.currentTurn()).toBeUndefined();
    expect(sink.committed).toBe(0);
  });

  it('refuses an impostor with the right name from a CA of its own: nothing is sent', async () => {
    const rogue = await DevCertificateAuthority.create(
      dir,
      'rogue-ca',
      'Polychrome dev harness CA',
    );
    const files = await rogue.issue({
      name: 'impostor',
      commonName: harnessServerName('team-a'),
      dnsNames: [harnessServerName('team-a')],
      usage: CertUsage.Server,
    });
    const h = await harness({
      certificate: await harnessCertificateFrom(files, 'team-a', logger),
    });
    const sink = handlers();
    const refused = await readToEnd(
      connector.openTurn(h.endpoint, start('c-1', 't-1'), { namespace: 'team-a' }),
      sink,
    ).catch((error: unknown) => error);
    expect(isAppError(refused) && refused.code).toBe('unavailable');
    expect(h.model.callCount).toBe(0);
    expect(h.server.currentTurn()).toBeUndefined();
  });

  // The harness sends its AppError's code and details in the call's trailing metadata
  // (common/grpc-errors.ts); the caller gets them, not only what the bare status says.
  it("gives the caller the harness's own refusal: permission_denied with its details", async () => {
    const h = await harness();
    await readToEnd(
      connector.openTurn(h.endpoint, start('c-1', 't-1'), { namespace: 'team-a' }),
      handlers(),
    );
    const sink = handlers();
    const refused = await readToEnd(
      connector.openTurn(h.endpoint, start('c-2', 't-2'), { namespace: 'team-a' }),
      sink,
    ).catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(AppError);
    expect(refused).toMatchObject({
      code: 'permission_denied',
      details: { conversation: 'c-1', requested: 'c-2' },
    });
    expect(String(refused)).toContain(`harness at ${h.endpoint}: this harness serves`);
    expect(h.model.callCount).toBe(1);
    expect(sink.committed).toBe(0);
  });

  it('gives the caller failed_precondition naming the running turn when the harness is busy', async () => {
    const h = await harness();
    let release = (): void => undefined;
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    let entered = (): void => undefined;
    const inCommit = new Promise<void>((resolve) => {
      entered = resolve;
    });
    const slow: Sink = {
      committed: 0,
      commit: async () => {
        entered();
        await held;
        return ++slow.committed;
      },
    };
    const running = readToEnd(
      connector.openTurn(h.endpoint, start('c-1', 't-1'), {
        namespace: 'team-a',
      }),
      slow,
    );
    await inCommit;
    const busy = await readToEnd(
      connector.openTurn(h.endpoint, start('c-1', 't-2'), { namespace: 'team-a' }),
      handlers(),
    ).catch((error: unknown) => error);
    release();
    expect(busy).toMatchObject({
      code: 'failed_precondition',
      details: { runningTurn: 't-1', conversation: 'c-1' },
    });
    await expect(running).resolves.toMatchObject({ kind: 'result' });
  });

  it('gives the caller unauthenticated for a credential the harness refuses', async () => {
    const h = await harness();
    const other = generateKeyPairSync('ed25519').privateKey;
    const stranger = new HarnessConnector({
      harnessCa: await testHarnessCa(),
      credentials: HarnessCredentialMinter.fromPem(
        other.export({ type: 'pkcs8', format: 'pem' }).toString(),
      ),
    });
    try {
      const refused = await readToEnd(
        stranger.openTurn(h.endpoint, start('c-1', 't-1'), { namespace: 'team-a' }),
        handlers(),
      ).catch((error: unknown) => error);
      expect(refused).toMatchObject({ code: 'unauthenticated' });
      expect(String(refused)).toContain('no valid harness credential');
      expect(isRetryable(refused)).toBe(false);
      expect(h.model.callCount).toBe(0);
    } finally {
      stranger.close();
    }
  });

  it('keeps a harness from steering the control plane: an error naming forwardTo loses it', async () => {
    // A compromised harness ends every call with an error whose details name a replica to
    // forward to; only the control plane's own errors may say where a request runs.
    const server = new Server();
    server.addService(HarnessService, {
      runTurn: (call: ServerDuplexStream<TurnInput, TurnOutput>) => {
        call.on('data', () =>
          call.emit(
            'error',
            grpcErrorOf(
              new AppError('unavailable', 'try the other replica', {
                details: { forwardTo: 'cp-evil', holder: 'cp-evil', conversation: 'c-1' },
              }),
            ),
          ),
        );
        call.on('error', () => undefined);
      },
    });
    const credentials = await testHarnessServerCredentials('team-a', logger);
    const port = await new Promise<number>((resolve, reject) =>
      server.bindAsync('127.0.0.1:0', credentials, (error, bound) =>
        error === null ? resolve(bound) : reject(error),
      ),
    );
    try {
      const refused = await readToEnd(
        connector.openTurn(`127.0.0.1:${String(port)}`, start('c-1', 't-1'), {
          namespace: 'team-a',
        }),
        handlers(),
      ).catch((error: unknown) => error);
      expect(isAppError(refused) && refused.code).toBe('unavailable');
      expect(isAppError(refused) && refused.details).toEqual({ conversation: 'c-1' });
    } finally {
      server.forceShutdown();
    }
  });

  // The reader drives the call: a reader that stops (a forged step, a commit that failed)
  // must end the gRPC call, or the harness would wait for the ack until the deadline and
  // refuse the conversation's next call as busy.
  it('ends the gRPC call when its reader stops at a step without answering it', async () => {
    const h = await harness();
    const call = connector.openTurn(h.endpoint, start('c-1', 't-1'), { namespace: 'team-a' });
    let read: HarnessMessage | undefined;
    for await (const message of call) {
      read = message;
      if (message.kind === 'step') break;
    }
    expect(read?.kind).toBe('step');
    expect(h.server.currentTurn()).toMatchObject({ turnId: 't-1' });
    await waitFor(() => h.server.currentTurn() === undefined);
    const end = await readToEnd(
      connector.openTurn(h.endpoint, start('c-1', 't-2'), { namespace: 'team-a' }),
    );
    expect(end).toMatchObject({ kind: 'result', result: { outcome: { $case: 'complete' } } });
  });

  it('ends the gRPC call on cancel, and reading on says cancelled with the reason', async () => {
    const h = await harness();
    const call = connector.openTurn(h.endpoint, start('c-1', 't-1'), { namespace: 'team-a' });
    const reason = new AppError('permission_denied', 'step refused: a test');
    const failed = await (async () => {
      for await (const message of call) {
        if (message.kind === 'step') call.cancel(reason);
      }
    })().catch((error: unknown) => error);
    expect(failed).toMatchObject({ code: 'cancelled', cause: reason });
    expect(String(failed)).toContain(`the turn call to the harness at ${h.endpoint} was cancelled`);
    await waitFor(() => h.server.currentTurn() === undefined);
  });

  // A step is acknowledged only once committed: a reader that reads on past an unanswered
  // step, or answers a step the harness did not send, is refused, and the call ends.
  it('refuses a reader that reads on past an unanswered step, or answers another step', async () => {
    const h = await harness();
    const call = connector.openTurn(h.endpoint, start('c-1', 't-1'), { namespace: 'team-a' });
    let sequence: number | undefined;
    const failed = await (async () => {
      for await (const message of call) {
        if (message.kind !== 'step') continue;
        const read = message.step.sequence;
        sequence = read;
        expect(() => call.committed(read + 1, 1)).toThrow(
          `waits for an answer to step ${String(read)}, not to step ${String(read + 1)}`,
        );
      }
    })().catch((error: unknown) => error);
    expect(sequence).toBeDefined();
    expect(failed).toMatchObject({ code: 'internal' });
    expect(String(failed)).toContain(`was read on before step ${String(sequence)} was answered`);
    await waitFor(() => h.server.currentTurn() === undefined);
  });
});

/** Polls `done` every 20 ms for up to 5 s. */
async function waitFor(done: () => boolean): Promise<void> {
  for (let waited = 0; !done(); waited += 20) {
    if (waited >= 5_000) throw new Error('not done after 5 s');
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
