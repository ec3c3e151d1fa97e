import { once } from 'node:events';
import { readFile } from 'node:fs/promises';
import { connect as connectTcp } from 'node:net';
import { join } from 'node:path';
import { connect as connectTls } from 'node:tls';

import { credentials, Metadata, status, type ServiceError } from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import pino from 'pino';
import { Registry } from 'prom-client';

import { EventKind } from '../../common/event-kinds';
import {
  JournalConflictError,
  JournalFencedError,
  StateCallError,
} from '../../common/state-call-errors';
import { StateClient } from '../../common/state-client';
import type { JournalEntry } from '../../common/state-journal';
import { JournalClient } from '../../proto/gen/polychrome/state/v1/state';
import { createNodeEd25519Signer } from '../journal/node-ed25519';
import { nodeSha256 } from '../journal/node-sha256';
import { keyIdOf } from '../journal/signed-root';
import { verifyInclusion } from '../journal/inclusion-proof';
import { JournalStore } from '../store/journal-store';
import { StateServer } from './state-server';
import { createStateMetrics } from './state-metrics';
import { clientTls, makeTestPki, tempDir, turn, type TestPki } from './testdata/fixtures';

/*
 * The Journal service in process, over a real mutual TLS listener on loopback, with the
 * real store on a temporary LevelDB: who may connect and call what, how errors cross the
 * wire (status, message, trailing metadata, rebuilt class), and streaming.
 */

const signer = createNodeEd25519Signer(new Uint8Array(32).fill(7));
const keyId = keyIdOf(nodeSha256, signer.publicKey);

let dir: { path: string; remove: () => Promise<void> };
let pki: TestPki;
let store: JournalStore;
let server: StateServer;
let registry: Registry;
let address: string;
let writer: StateClient;
let verifier: StateClient;

async function clientAs(
  identity: keyof Pick<
    TestPki,
    'controlPlane' | 'verifier' | 'stranger' | 'foreign' | 'selfSigned'
  >,
): Promise<StateClient> {
  return new StateClient({
    address,
    tls: await clientTls(pki.ca, pki[identity]),
    callTimeoutMs: 5_000,
  });
}

beforeAll(async () => {
  dir = await tempDir('state-server');
  pki = await makeTestPki(dir.path);
  store = new JournalStore({ location: join(dir.path, 'db'), signer });
  await store.open();
  registry = new Registry();
  server = new StateServer({
    store,
    tls: {
      ca: await readFile(pki.ca.certPath),
      cert: await readFile(pki.server.certPath),
      key: await readFile(pki.server.keyPath),
    },
    logger: pino({ level: 'silent' }),
    host: '127.0.0.1',
    port: 0,
    metrics: createStateMetrics(registry, () => store.stats()),
    publicKeys: [{ keyId, publicKey: signer.publicKey }],
  });
  address = `localhost:${String(await server.start())}`;
  writer = await clientAs('controlPlane');
  verifier = await clientAs('verifier');
}, 60_000);

afterAll(async () => {
  writer.close();
  verifier.close();
  await server.close(1_000);
  await store.close();
  await dir.remove();
});

async function calls(method: string, code: string): Promise<number> {
  const metric = await registry.getSingleMetric('polychrome_state_calls_total')?.get();
  return (
    metric?.values.find((v) => v.labels.method === method && v.labels.status === code)?.value ?? 0
  );
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error('expected the call to fail, it succeeded');
}

describe('mutual TLS', () => {
  it('refuses a client without a certificate during the handshake', async () => {
    const before = await calls('Head', 'UNAUTHENTICATED');
    const raw = new JournalClient(address, credentials.createSsl(await readFile(pki.ca.certPath)));
    try {
      const error = await new Promise<ServiceError | null>((resolve) => {
        raw.head({ partition: 'conv-a' }, new Metadata(), { deadline: Date.now() + 5_000 }, (e) =>
          resolve(e),
        );
      });
      expect(error?.code).toBe(status.UNAVAILABLE);
    } finally {
      raw.close();
    }
    // No call ever reached a handler.
    expect(await calls('Head', 'UNAUTHENTICATED')).toBe(before);
  });

  it('survives a client that resets its connection mid-stream, and serves the next one', async () => {
    const tls = await clientTls(pki.ca, pki.controlPlane);
    const port = Number(address.split(':')[1]);
    const tcp = connectTcp({ host: '127.0.0.1', port });
    tcp.on('error', () => undefined);
    await once(tcp, 'connect');
    const socket = connectTls({
      socket: tcp,
      ca: Buffer.from(tls.ca),
      cert: Buffer.from(tls.cert),
      key: Buffer.from(tls.key),
      servername: 'localhost',
      ALPNProtocols: ['h2'],
    });
    socket.on('error', () => undefined);
    await once(socket, 'secureConnect');
    // Half an HTTP/2 preface, then a TCP reset: the server's socket fails with ECONNRESET.
    socket.write('PRI * HTTP/2.0\r\n');
    tcp.resetAndDestroy();
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect((await writer.head('conv-after-reset')).head).toBe(0);
  });

  it.each([
    ['a self-signed certificate', 'selfSigned'],
    ['a certificate from a CA the server does not trust', 'foreign'],
  ] as const)('refuses %s during the handshake', async (_label, identity) => {
    const client = await clientAs(identity);
    try {
      const error = await rejection(client.head('conv-a'));
      expect(error).toBeInstanceOf(StateCallError);
      expect(error).toMatchObject({ code: 'unavailable', fromServer: false, method: 'Head' });
    } finally {
      client.close();
    }
  });

  it('refuses a Polychrome-signed identity that holds no role, naming it', async () => {
    const client = await clientAs('stranger');
    try {
      const error = await rejection(client.head('conv-a'));
      expect(error).toBeInstanceOf(StateCallError);
      expect(error).toMatchObject({
        code: 'permission_denied',
        grpcStatus: status.PERMISSION_DENIED,
      });
      expect(messageOf(error)).toContain('caller "CN=someone-else, O=acme" may not call Head');
      expect(messageOf(error)).toContain('polychrome:verifier');
    } finally {
      client.close();
    }
  });
});

describe('authorization', () => {
  it('lets a verifier read but not append, and nothing is written', async () => {
    const first = await writer.append('conv-authz', 0, turn('one'));
    const error = await rejection(verifier.append('conv-authz', first.head, turn('two')));
    expect(error).toBeInstanceOf(StateCallError);
    expect(error).toMatchObject({ code: 'permission_denied', fromServer: true, method: 'Append' });
    expect(messageOf(error)).toMatch(
      /caller "CN=polychrome-verifier, O=polychrome:verifier" may not call Append: it needs role polychrome:writer/,
    );
    expect((await verifier.head('conv-authz')).head).toBe(first.head);
    expect((await verifier.verify('conv-authz')).ok).toBe(true);
  });
});

describe('append', () => {
  it('answers with the durable head and a signed root over every earlier event', async () => {
    const result = await writer.append('conv-append', 0, turn('a'));
    expect(result).toMatchObject({ firstPosition: 0, head: 4 });
    expect(result.signedRoot).toMatchObject({ position: 3, leafCount: 3, keyId });
    const head = await writer.head('conv-append');
    expect(head.head).toBe(4);
    expect(head.signedRoot?.root).toEqual(result.signedRoot.root);
  });

  it('rebuilds a lost compare-and-swap as JournalConflictError with the current head', async () => {
    const { head } = await writer.append('conv-cas', 0, turn('a'));
    const error = await rejection(writer.append('conv-cas', 0, turn('b')));
    expect(error).toBeInstanceOf(JournalConflictError);
    expect(error).toMatchObject({ code: 'conflict', head, grpcStatus: status.ABORTED });
    expect(error instanceof JournalConflictError ? error.details : undefined).toMatchObject({
      expectedHead: 0,
      head,
    });
    expect(messageOf(error)).toContain(`the head is ${String(head)}`);
  });

  it('rebuilds a fenced append as JournalFencedError with both tokens, and writes nothing', async () => {
    await writer.append('conv-fenced', 0, turn('new holder'), { fencingToken: 4 });
    const before = await writer.head('conv-fenced');
    // At the current head, so only the fence stands between the stale writer and the journal.
    const error = await rejection(
      writer.append('conv-fenced', before.head, turn('old holder'), { fencingToken: 3 }),
    );
    expect(error).toBeInstanceOf(JournalFencedError);
    expect(error).toMatchObject({
      code: 'fenced',
      fencingToken: 3,
      highestFencingToken: 4,
      grpcStatus: status.FAILED_PRECONDITION,
      fromServer: true,
      method: 'Append',
    });
    expect(messageOf(error)).toContain(
      "conv-fenced: the append carries fencing token 3, but token 4 has already written: this writer lost the conversation's lease; a newer holder has written",
    );
    expect(await writer.head('conv-fenced')).toEqual(before);
    // A client that sends no token sends 0, the lowest: refused as well.
    expect(
      await rejection(writer.append('conv-fenced', before.head, turn('old client'))),
    ).toBeInstanceOf(JournalFencedError);
    expect(
      (await writer.append('conv-fenced', before.head, turn('same'), { fencingToken: 4 }))
        .firstPosition,
    ).toBe(before.head);
  });

  it('sends the code, details and head in trailing metadata', async () => {
    const raw = new JournalClient(
      address,
      credentials.createSsl(
        await readFile(pki.ca.certPath),
        await readFile(pki.controlPlane.keyPath),
        await readFile(pki.controlPlane.certPath),
      ),
    );
    try {
      const error = await new Promise<ServiceError | null>((resolve) => {
        raw.append(
          {
            partition: 'conv-cas',
            expectedHead: 1,
            events: [],
            fencingToken: 0,
            expectedRoot: Buffer.alloc(0),
          },
          new Metadata(),
          { deadline: Date.now() + 5_000 },
          (e) => resolve(e),
        );
      });
      // An empty batch is refused before the head is compared.
      expect(error?.code).toBe(status.INVALID_ARGUMENT);
      expect(error?.metadata.get('polychrome-error-code')).toEqual(['invalid_argument']);
      const conflict = await new Promise<ServiceError | null>((resolve) => {
        raw.append(
          {
            partition: 'conv-cas',
            expectedHead: 0,
            events: turn('x').map((e) => ({ kind: e.kind, payload: Buffer.from(e.payload) })),
            fencingToken: 0,
            expectedRoot: Buffer.alloc(0),
          },
          new Metadata(),
          { deadline: Date.now() + 5_000 },
          (e) => resolve(e),
        );
      });
      expect(conflict?.code).toBe(status.ABORTED);
      expect(conflict?.metadata.get('polychrome-error-code')).toEqual(['conflict']);
      expect(conflict?.metadata.get('polychrome-head')).toEqual(['4']);
      const details: unknown = JSON.parse(
        String(conflict?.metadata.get('polychrome-error-details')[0]),
      );
      expect(details).toEqual({ partition: 'conv-cas', expectedHead: 0, head: 4 });
    } finally {
      raw.close();
    }
  });

  const big = new Uint8Array(1024 * 1024 + 1);
  it.each([
    [
      'a malformed partition name',
      'Conv_A',
      0,
      turn('a'),
      'invalid_argument',
      /partition name "Conv_A" is not valid/,
    ],
    ['an empty batch', 'conv-bad', 4, [], 'invalid_argument', /an append needs at least one event/],
    [
      'an oversized payload',
      'conv-bad',
      4,
      [{ kind: EventKind.ToolResult, payload: big }],
      'invalid_argument',
      /payload of 1048577 bytes; the limit is 1048576/,
    ],
    [
      'an unknown kind',
      'conv-bad',
      4,
      [{ kind: 'chit_chat', payload: new Uint8Array() }],
      'invalid_argument',
      /unknown kind "chit_chat"/,
    ],
    [
      'a reserved kind',
      'conv-bad',
      4,
      [{ kind: EventKind.SignedRoot, payload: new Uint8Array() }],
      'invalid_argument',
      /which only the store writes/,
    ],
    [
      'a head from the future',
      'conv-bad',
      99,
      turn('a'),
      'failed_precondition',
      /expected head 99 is beyond the journal's head 4/,
    ],
  ] as const)(
    'refuses %s and leaves the head alone',
    async (_label, partition, expectedHead, events, code, message) => {
      if ((await writer.head('conv-bad')).head === 0)
        await writer.append('conv-bad', 0, turn('seed'));
      const error = await rejection(writer.append(partition, expectedHead, events));
      expect(error).toBeInstanceOf(StateCallError);
      expect(error).toMatchObject({ code, fromServer: true });
      expect(messageOf(error)).toMatch(message);
      expect((await writer.head('conv-bad')).head).toBe(4);
    },
  );
});

describe('reads', () => {
  let head = 0;
  beforeAll(async () => {
    for (let i = 0; i < 50; i++)
      head = (await writer.append('conv-read', head, turn(`t${String(i)}`, 2048))).head;
  });

  it('streams every event in order, also to a slow consumer', async () => {
    const seen: JournalEntry[] = [];
    for await (const event of verifier.read('conv-read')) {
      seen.push(event);
      // A consumer slower than the network: the client pauses the stream, the server waits for drain.
      if (seen.length % 40 === 0) await new Promise((resolve) => setTimeout(resolve, 20));
    }
    expect(seen.map((e) => e.position)).toEqual(Array.from({ length: head }, (_, i) => i));
    expect(seen[head - 1]?.kind).toBe(EventKind.SignedRoot);
  });

  it('honours from and limit', async () => {
    const seen: number[] = [];
    for await (const event of verifier.read('conv-read', 10, 5)) seen.push(event.position);
    expect(seen).toEqual([10, 11, 12, 13, 14]);
  });

  it('cancels the server-side read when the consumer stops early', async () => {
    const before = await calls('Read', 'CANCELLED');
    let n = 0;
    for await (const event of verifier.read('conv-read')) {
      void event;
      if (++n === 3) break;
    }
    expect(n).toBe(3);
    const deadline = Date.now() + 5_000;
    while ((await calls('Read', 'CANCELLED')) === before && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    expect(await calls('Read', 'CANCELLED')).toBe(before + 1);
  });

  it('reports a read past the head as failed_precondition from the stream', async () => {
    const error = await rejection(
      (async () => {
        for await (const event of verifier.read('conv-read', head + 1)) void event;
      })(),
    );
    expect(error).toMatchObject({ code: 'failed_precondition', method: 'Read' });
    expect(messageOf(error)).toContain(
      `position ${String(head + 1)} is beyond the head ${String(head)}`,
    );
  });

  it('exports the public keys first, then every event', async () => {
    const items = [];
    for await (const item of verifier.export('conv-read')) items.push(item);
    expect(items[0]).toEqual({ type: 'public_key', keyId, publicKey: signer.publicKey });
    expect(items.slice(1).map((i) => (i.type === 'event' ? i.event.position : -1))).toEqual(
      Array.from({ length: head }, (_, i) => i),
    );
  });

  it('proves an event against the latest signed root', async () => {
    const proof = await verifier.proof('conv-read', 17);
    expect(proof.leafCount).toBe(head - 1);
    expect(proof.signedRoot?.leafCount).toBe(head - 1);
    expect(() =>
      verifyInclusion(
        nodeSha256,
        { leafIndex: proof.position, leafCount: proof.leafCount, digests: proof.digests },
        proof.leafDigest,
        proof.root,
      ),
    ).not.toThrow();
  });

  it('lists partitions and reports unknown ones as not_found', async () => {
    expect(await verifier.listPartitions()).toEqual(
      expect.arrayContaining(['conv-append', 'conv-cas', 'conv-read']),
    );
    const error = await rejection(verifier.verify('conv-nothing-here'));
    expect(error).toMatchObject({ code: 'not_found', grpcStatus: status.NOT_FOUND });
  });

  it('counts verifications and appends in /metrics', async () => {
    await verifier.verify('conv-read');
    const text = await registry.metrics();
    expect(text).toMatch(/polychrome_state_verifications_total\{outcome="ok"\} [1-9]/);
    expect(text).toMatch(/polychrome_state_appends_total [1-9]/);
    expect(text).toMatch(/polychrome_state_append_duration_seconds_count\{outcome="ok"\} [1-9]/);
    expect(text).toMatch(/polychrome_state_group_commit_batches_total [1-9]/);
  });
});
