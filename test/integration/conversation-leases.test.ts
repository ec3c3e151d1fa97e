import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { CoordinationV1Api, CustomObjectsApi, type KubeConfig } from '@kubernetes/client-node';
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { repoRoot } from '../../hack/lib/local-cluster';
import { isAlive, pollUntil } from '../../hack/lib/processes';
import {
  ConversationLeases,
  isLeaseHandle,
  type ConversationRef,
  type LeaseHandle,
} from '../../operator/lease/conversation-leases';
import { field, freshNamespace, kubeConfig, sharedCluster } from './support/kube';

describe('conversation leases on a real API server', () => {
  let kc: KubeConfig;
  let ns: { name: string; dispose: () => Promise<void> };
  const open: ConversationLeases[] = [];
  const replica = (identity: string, leaseDurationMs = 3_000): ConversationLeases => {
    const leases = new ConversationLeases({
      kubeConfig: kc,
      identity,
      leaseDurationMs,
      renewIntervalMs: Math.floor(leaseDurationMs / 3),
    });
    open.push(leases);
    return leases;
  };
  let seq = 0;
  const conversation = async (): Promise<ConversationRef> => {
    const name = `lease-${++seq}`;
    const created: unknown = await kc.makeApiClient(CustomObjectsApi).createNamespacedCustomObject({
      group: 'polychrome.dev',
      version: 'v1alpha1',
      plural: 'conversations',
      namespace: ns.name,
      body: {
        apiVersion: 'polychrome.dev/v1alpha1',
        kind: 'Conversation',
        metadata: { name },
        spec: { agent: { systemPrompt: 'test' } },
      },
    });
    return { namespace: ns.name, name, uid: String(field(created, 'metadata', 'uid')) };
  };
  const holderOf = async (ref: ConversationRef): Promise<string | undefined> =>
    (
      await kc
        .makeApiClient(CoordinationV1Api)
        .readNamespacedLease({ namespace: ref.namespace, name: `conv-${ref.uid}` })
    ).spec?.holderIdentity;

  beforeAll(async () => {
    kc = await kubeConfig();
    ns = await freshNamespace(kc, 'lease');
  });
  afterAll(async () => {
    await Promise.allSettled(open.map((l) => l.close()));
    await ns.dispose();
  });

  it('gives each conversation exactly one holder when two replicas race', async () => {
    const a = replica('replica-a');
    const b = replica('replica-b');
    const refs = await Promise.all(Array.from({ length: 12 }, () => conversation()));
    const results = await Promise.all(
      refs.map(async (ref) => {
        const [ra, rb] = await Promise.all([a.tryAcquire(ref), b.tryAcquire(ref)]);
        return { ref, winners: [ra, rb].filter(isLeaseHandle) };
      }),
    );
    for (const { ref, winners } of results) {
      expect(winners).toHaveLength(1);
      expect(await holderOf(ref)).toBe(winners[0]?.holder);
      expect(winners[0]?.fencingToken).toBe(0);
    }
    // A second round changes nothing: the holder renews, the other keeps waiting.
    for (const { ref, winners } of results) {
      const [ra, rb] = await Promise.all([a.tryAcquire(ref), b.tryAcquire(ref)]);
      expect([ra, rb].filter(isLeaseHandle).map((h) => h.holder)).toEqual([winners[0]?.holder]);
    }
  });

  it('lets another replica take a SIGKILLed holder’s lease only after it expires', async () => {
    const ref = await conversation();
    const durationMs = 3_000;
    // `node --import tsx` rather than the tsx CLI, which would run the script in a child
    // process that survives a SIGKILL of the CLI.
    const child = spawn(
      process.execPath,
      [
        '--import',
        'tsx',
        join(__dirname, 'fixtures', 'lease-holder.ts'),
        (await sharedCluster()).kubeconfigPath,
        ref.namespace,
        ref.name,
        ref.uid,
        'doomed-replica',
        String(durationMs),
      ],
      { stdio: ['ignore', 'pipe', 'inherit'], cwd: repoRoot },
    );
    const token = await new Promise<number>((resolve, reject) => {
      child.stdout.setEncoding('utf8');
      child.stdout.on('data', (chunk: string) => {
        const m = /held (\d+)/.exec(chunk);
        if (m?.[1] !== undefined) resolve(Number(m[1]));
      });
      child.on('exit', (code) => reject(new Error(`lease holder exited with ${String(code)}`)));
    });
    expect(await holderOf(ref)).toBe('doomed-replica');

    const survivor = replica('survivor', durationMs);
    const first = await survivor.tryAcquire(ref);
    expect(isLeaseHandle(first)).toBe(false);

    child.kill('SIGKILL');
    await pollUntil('the holder to die', () =>
      Promise.resolve(isAlive(child.pid ?? 0) ? undefined : true),
    );
    const killedAt = Date.now();
    const handle = await pollUntil(
      'the survivor to take the expired lease',
      async () => {
        const got = await survivor.tryAcquire(ref);
        return isLeaseHandle(got) ? got : undefined;
      },
      { timeoutMs: 20_000, intervalMs: 200 },
    );
    // Not before a whole lease duration of silence, as observed by the survivor.
    expect(Date.now() - killedAt).toBeGreaterThanOrEqual(durationMs - 1_000);
    expect(handle.fencingToken).toBe(token + 1);
    expect(await holderOf(ref)).toBe('survivor');
  });

  it('hands a released lease over at once and fences the old holder', async () => {
    const ref = await conversation();
    const a = replica('release-a', 10_000);
    const b = replica('release-b', 10_000);
    const held = await a.tryAcquire(ref);
    if (!isLeaseHandle(held)) throw new Error('replica a should hold the fresh lease');
    expect(isLeaseHandle(await b.tryAcquire(ref))).toBe(false);
    await a.release(held);
    expect(held.signal.aborted).toBe(true);
    const taken = await b.tryAcquire(ref);
    expect(isLeaseHandle(taken) && taken.fencingToken).toBe(held.fencingToken + 1);
  });

  it('names the holder to a busy caller and writes no address on the Lease', async () => {
    const ref = await conversation();
    const a = replica('endpoint-a', 10_000);
    const b = replica('endpoint-b', 10_000);
    expect(isLeaseHandle(await a.tryAcquire(ref))).toBe(true);
    const busy = await b.tryAcquire(ref);
    expect(isLeaseHandle(busy)).toBe(false);
    expect(busy).toMatchObject({ holder: 'endpoint-a' });
    // Namespace users can write the Lease: it must say nothing a replica would dial.
    const lease = await kc
      .makeApiClient(CoordinationV1Api)
      .readNamespacedLease({ namespace: ref.namespace, name: `conv-${ref.uid}` });
    expect(lease.metadata?.annotations ?? {}).toEqual({});
  });

  it('aborts the old holder’s signal when it finds its lease taken', async () => {
    const ref = await conversation();
    const slow = replica('stalled', 2_000);
    const held = await slow.tryAcquire(ref);
    if (!isLeaseHandle(held)) throw new Error('the stalled replica should hold the fresh lease');
    // `slow` never starts its renew timer: it stalls, and the lease expires for others.
    const other = replica('active', 2_000);
    const taken: LeaseHandle = await pollUntil(
      'the active replica to take over',
      async () => {
        const got = await other.tryAcquire(ref);
        return isLeaseHandle(got) ? got : undefined;
      },
      { timeoutMs: 15_000, intervalMs: 200 },
    );
    expect(taken.fencingToken).toBe(held.fencingToken + 1);
    expect(held.signal.aborted).toBe(false);
    await slow.renewAll();
    expect(held.signal.aborted).toBe(true);
    expect(slow.current(ref)).toBeUndefined();
  });
});
