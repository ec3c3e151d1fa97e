import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import {
  ApiException,
  CoordinationV1Api,
  CoreV1Api,
  CustomObjectsApi,
  KubeConfig,
  RbacAuthorizationV1Api,
  V1MicroTime,
  type V1Lease,
} from '@kubernetes/client-node';
import { spawn } from 'node:child_process';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { join } from 'node:path';
import { repoRoot } from '../../hack/lib/paths';
import { isAlive, pollUntil } from '../../hack/lib/processes';
import { ConversationLeases } from '../../operator/lease/conversation-leases';
import {
  isLeaseHandle,
  type ConversationRef,
  type LeaseHandle,
} from '../../operator/lease/lease-source';
import { field, freshNamespace, kubeConfig, sharedCluster } from './support/kube';
import { CONTROL_PLANE_NAMESPACE } from './support/peer-pods';

// Every Lease is in the control plane's namespace (LEASES), whatever the conversation's.
const LEASES = CONTROL_PLANE_NAMESPACE;

describe('conversation leases on a real API server', () => {
  let kc: KubeConfig;
  let ns: { name: string; dispose: () => Promise<void> };
  const open: ConversationLeases[] = [];
  const replica = (identity: string, leaseDurationMs = 3_000): ConversationLeases => {
    const leases = new ConversationLeases({
      kubeConfig: kc,
      namespace: LEASES,
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
  const leaseOf = (ref: ConversationRef): Promise<V1Lease> =>
    kc
      .makeApiClient(CoordinationV1Api)
      .readNamespacedLease({ namespace: LEASES, name: `conv-${ref.uid}` });
  const holderOf = async (ref: ConversationRef): Promise<string | undefined> =>
    (await leaseOf(ref)).spec?.holderIdentity;
  /** What a writer of the Lease other than the holder could do (here: the admin). */
  const rewrite = async (ref: ConversationRef, spec: V1Lease['spec']): Promise<void> => {
    const lease = await leaseOf(ref);
    await kc.makeApiClient(CoordinationV1Api).replaceNamespacedLease({
      namespace: LEASES,
      name: `conv-${ref.uid}`,
      body: { ...lease, spec: { ...lease.spec, ...spec } },
    });
  };

  beforeAll(async () => {
    kc = await kubeConfig();
    ns = await freshNamespace(kc, 'lease');
    await kc
      .makeApiClient(CoreV1Api)
      .createNamespace({ body: { metadata: { name: LEASES } } })
      .catch((err: unknown) => {
        if (!(err instanceof ApiException && err.code === 409)) throw err;
      });
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
        LEASES,
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
    // Nothing on the Lease a replica would dial, should anyone but the control plane write it.
    expect((await leaseOf(ref)).metadata?.annotations ?? {}).toEqual({});
  });

  it('counts a renewal the API server never answers as failed, and loses the lease by its expiry', async () => {
    const ref = await conversation();
    const link = await hangableLink(kc);
    try {
      const durationMs = 3_000;
      const requestTimeoutMs = 500;
      const leases = new ConversationLeases({
        kubeConfig: link.kubeConfig,
        namespace: LEASES,
        identity: 'behind-a-hung-link',
        leaseDurationMs: durationMs,
        renewIntervalMs: 1_000,
        requestTimeoutMs,
      });
      open.push(leases);
      const before = Date.now();
      const held = await leases.tryAcquire(ref);
      if (!isLeaseHandle(held)) throw new Error('the replica should hold the fresh lease');
      const acquired = Date.now();

      // From now on the API server accepts this replica's connections and never answers.
      link.hang();
      const started = performance.now();
      await leases.renewAll();
      const took = performance.now() - started;
      expect(took).toBeGreaterThanOrEqual(requestTimeoutMs - 50);
      expect(took).toBeLessThan(requestTimeoutMs + 1_000);
      expect(held.signal.aborted).toBe(false);

      // Renewing on its own schedule against the hung server, it gives the lease up no
      // later than its expiry: it never believes it holds a lease others may take.
      leases.start();
      await pollUntil('the lease to be lost', () =>
        Promise.resolve(held.signal.aborted ? true : undefined),
      );
      const lostAt = Date.now();
      expect(lostAt - before).toBeGreaterThanOrEqual(durationMs);
      expect(lostAt - acquired).toBeLessThan(durationMs + 500);
      expect(leases.current(ref)).toBeUndefined();
      // The Lease on the server still names it: the API server never saw a renewal.
      expect(await holderOf(ref)).toBe('behind-a-hung-link');
    } finally {
      link.close();
    }
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

  it("keeps the Lease in the control plane's namespace, labelled, owned by nothing, and none in the conversation's", async () => {
    const ref = await conversation();
    const held = await replica('placed', 10_000).tryAcquire(ref);
    expect(isLeaseHandle(held)).toBe(true);
    const lease = await leaseOf(ref);
    expect(lease.metadata).toMatchObject({
      namespace: LEASES,
      name: `conv-${ref.uid}`,
      labels: {
        'app.kubernetes.io/managed-by': 'polychrome',
        'polychrome.dev/conversation-namespace': ref.namespace,
        'polychrome.dev/conversation': ref.name,
        'polychrome.dev/conversation-uid': ref.uid,
      },
    });
    // An owner reference to a Conversation in another namespace would have the garbage
    // collector delete the Lease as an orphan (kube-controller-manager runs here).
    expect(lease.metadata?.ownerReferences ?? []).toEqual([]);
    // Found by the labels an operator would use.
    const found = await kc.makeApiClient(CoordinationV1Api).listNamespacedLease({
      namespace: LEASES,
      labelSelector: `polychrome.dev/conversation-namespace=${ref.namespace},polychrome.dev/conversation=${ref.name}`,
    });
    expect(found.items.map((l) => l.metadata?.name)).toEqual([`conv-${ref.uid}`]);
    const inTenant = await kc
      .makeApiClient(CoordinationV1Api)
      .listNamespacedLease({ namespace: ref.namespace });
    expect(inTenant.items).toEqual([]);
  });

  it('judges expiry by its configured duration, not by the duration on the Lease', async () => {
    const durationMs = 3_000;
    // A huge duration on the record (the finding: 999999 s) does not keep the lease.
    const huge = await conversation();
    const stalled = replica('stalled-huge', durationMs);
    expect(isLeaseHandle(await stalled.tryAcquire(huge))).toBe(true);
    await rewrite(huge, {
      holderIdentity: 'mallory-was-here',
      leaseDurationSeconds: 999_999,
      renewTime: new V1MicroTime(Date.now()),
    });
    const taker = replica('taker', durationMs);
    const since = Date.now();
    expect(await taker.tryAcquire(huge)).toMatchObject({ holder: 'mallory-was-here' });
    const taken = await pollUntil(
      'the configured duration to pass',
      async () => {
        const got = await taker.tryAcquire(huge);
        return isLeaseHandle(got) ? got : undefined;
      },
      { timeoutMs: 10 * durationMs, intervalMs: 200 },
    );
    expect(Date.now() - since).toBeGreaterThanOrEqual(durationMs);
    expect(Date.now() - since).toBeLessThan(3 * durationMs);
    expect(await holderOf(huge)).toBe('taker');
    expect((await leaseOf(huge)).spec?.leaseDurationSeconds).toBe(durationMs / 1000);
    expect(taken.fencingToken).toBe(1);

    // A tiny duration on the record does not hand the lease over before the configured one.
    const tiny = await conversation();
    const holder = replica('holder-tiny', durationMs);
    expect(isLeaseHandle(await holder.tryAcquire(tiny))).toBe(true);
    await rewrite(tiny, { leaseDurationSeconds: 1 });
    const eager = replica('eager', durationMs);
    const start = Date.now();
    expect(await eager.tryAcquire(tiny)).toMatchObject({ holder: 'holder-tiny' });
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    expect(await eager.tryAcquire(tiny)).toMatchObject({ holder: 'holder-tiny' });
    // `holder` never renews (its timer is not started): after the configured 3 s it expires.
    await pollUntil(
      'the configured duration to pass',
      async () => (isLeaseHandle(await eager.tryAcquire(tiny)) ? true : undefined),
      { timeoutMs: 10 * durationMs, intervalMs: 200 },
    );
    expect(Date.now() - start).toBeGreaterThanOrEqual(durationMs);
  });

  it('moves a held lease past the journal’s fencing mark, and not a lease taken over', async () => {
    const ref = await conversation();
    const a = replica('advance-a', 10_000);
    const held = await a.tryAcquire(ref);
    if (!isLeaseHandle(held)) throw new Error('replica a should hold the fresh lease');
    expect(held.fencingToken).toBe(0);
    // The journal has accepted token 5 (the Lease started over below it).
    const advanced = await a.advancePast(held, 5);
    expect(advanced?.fencingToken).toBe(6);
    expect(held.signal.aborted).toBe(true);
    expect(a.current(ref)).toBe(advanced);
    expect((await leaseOf(ref)).spec).toMatchObject({
      holderIdentity: 'advance-a',
      leaseTransitions: 6,
    });
    // Renewals go on from the new token.
    await a.renewAll();
    expect(advanced?.signal.aborted).toBe(false);

    // Taken over meanwhile: not ours to move; the next renewal gives the old handle up.
    if (advanced === undefined) throw new Error('unreachable');
    await rewrite(ref, { holderIdentity: 'someone-else', leaseTransitions: 7 });
    expect(await a.advancePast(advanced, 9)).toBeUndefined();
    expect((await leaseOf(ref)).spec).toMatchObject({
      holderIdentity: 'someone-else',
      leaseTransitions: 7,
    });
    await a.renewAll();
    expect(advanced.signal.aborted).toBe(true);
  });

  it('deletes the Lease when the conversation is retired, and stops holding it', async () => {
    const ref = await conversation();
    const a = replica('retiring', 10_000);
    const held = await a.tryAcquire(ref);
    if (!isLeaseHandle(held)) throw new Error('the replica should hold the fresh lease');
    await a.retire(ref);
    expect(held.signal.aborted).toBe(true);
    expect(a.current(ref)).toBeUndefined();
    await expect(leaseOf(ref)).rejects.toMatchObject({ code: 404 });
    // Again: already gone is done.
    await a.retire(ref);
  });

  it('deletes a Lease another replica made again for a deleted conversation, and never takes it again', async () => {
    const ref = await conversation();
    const retiring = replica('retiring-2', 10_000);
    const stale = replica('stale-cache', 10_000);
    if (!isLeaseHandle(await retiring.tryAcquire(ref))) throw new Error('expected the lease');
    // The other replica has seen the Lease held, so it reads it before it creates one.
    expect(isLeaseHandle(await stale.tryAcquire(ref))).toBe(false);
    await retiring.retire(ref);
    // Its cache still holds the Conversation: it finds no Lease, and a missing Lease is
    // free to take.
    const again = await stale.tryAcquire(ref);
    if (!isLeaseHandle(again)) throw new Error('a missing Lease is free to take');
    expect(await holderOf(ref)).toBe('stale-cache');
    // Its watch reports the Conversation gone.
    await stale.forget(ref);
    expect(again.signal.aborted).toBe(true);
    await expect(leaseOf(ref)).rejects.toMatchObject({ code: 404 });
    await expect(stale.tryAcquire(ref)).rejects.toMatchObject({ code: 'not_found' });
    await stale.renewAll();
    await expect(leaseOf(ref)).rejects.toMatchObject({ code: 404 });
  });

  it('deletes a Lease whose create was in flight when the conversation was forgotten', async () => {
    const ref = await conversation();
    const leases = replica('in-flight', 10_000);
    const acquiring = leases.tryAcquire(ref);
    await leases.forget(ref);
    await expect(acquiring).rejects.toMatchObject({ code: 'not_found' });
    expect(leases.current(ref)).toBeUndefined();
    await expect(leaseOf(ref)).rejects.toMatchObject({ code: 404 });
  });

  it('refuses a ServiceAccount with the built-in edit role in the conversation’s namespace every access to the Lease', async () => {
    const ref = await conversation();
    const holder = replica('guarded', 10_000);
    const held = await holder.tryAcquire(ref);
    if (!isLeaseHandle(held)) throw new Error('the replica should hold the fresh lease');
    const before = await leaseOf(ref);

    const mallory = await tenantEditor(kc, ns.name);
    const leases = mallory.makeApiClient(CoordinationV1Api);
    const name = `conv-${ref.uid}`;
    // Its own namespace has no Lease to find (it may list Leases there: edit allows it).
    expect((await leases.listNamespacedLease({ namespace: ns.name })).items).toEqual([]);
    await expect(leases.readNamespacedLease({ namespace: ns.name, name })).rejects.toMatchObject({
      code: 404,
    });
    // The control plane's namespace refuses it everything: read, list, replace, patch,
    // delete, create.
    const forged = {
      ...before,
      spec: { ...before.spec, holderIdentity: 'mallory-was-here', leaseDurationSeconds: 999_999 },
    };
    const attempts: [string, () => Promise<unknown>][] = [
      ['read', () => leases.readNamespacedLease({ namespace: LEASES, name })],
      ['list', () => leases.listNamespacedLease({ namespace: LEASES })],
      ['replace', () => leases.replaceNamespacedLease({ namespace: LEASES, name, body: forged })],
      [
        'patch',
        () =>
          leases.patchNamespacedLease({
            namespace: LEASES,
            name,
            body: [{ op: 'replace', path: '/spec/leaseTransitions', value: 0 }],
          }),
      ],
      ['delete', () => leases.deleteNamespacedLease({ namespace: LEASES, name })],
      [
        'create',
        () =>
          leases.createNamespacedLease({
            namespace: LEASES,
            body: { metadata: { name: `conv-${ref.uid}-x` }, spec: {} },
          }),
      ],
    ];
    for (const [what, attempt] of attempts) {
      const outcome = await attempt().then(
        () => 'allowed',
        (err: unknown) => (err instanceof ApiException ? err.code : String(err)),
      );
      expect({ what, outcome }).toEqual({ what, outcome: 403 });
    }
    // Untouched, and still held.
    const after = await leaseOf(ref);
    expect(after.metadata?.resourceVersion).toBe(before.metadata?.resourceVersion);
    expect(after.spec?.holderIdentity).toBe('guarded');
    await holder.renewAll();
    expect(held.signal.aborted).toBe(false);
  });
});

/**
 * A ServiceAccount's identity bound to the built-in `edit` ClusterRole in `namespace` only:
 * what any user or workload that may edit a conversation's namespace holds.
 */
async function tenantEditor(admin: KubeConfig, namespace: string): Promise<KubeConfig> {
  const serviceAccount = 'mallory';
  await admin.makeApiClient(CoreV1Api).createNamespacedServiceAccount({
    namespace,
    body: { metadata: { name: serviceAccount } },
  });
  await admin.makeApiClient(RbacAuthorizationV1Api).createNamespacedRoleBinding({
    namespace,
    body: {
      metadata: { name: 'mallory-edit' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'edit' },
      subjects: [{ kind: 'ServiceAccount', name: serviceAccount, namespace }],
    },
  });
  const kc = new KubeConfig();
  kc.loadFromFile(
    await (
      await sharedCluster()
    ).mintUser(`system:serviceaccount:${namespace}:${serviceAccount}`, [
      'system:serviceaccounts',
      `system:serviceaccounts:${namespace}`,
      'system:authenticated',
    ]),
  );
  return kc;
}

/**
 * A TCP link to the API server that can be hung: until {@link hang} it forwards bytes both
 * ways; after it, every connection (open or new) is accepted and read but never answered,
 * as a hung API server (or a silently dropped network path) behaves.
 */
async function hangableLink(kc: KubeConfig): Promise<{
  readonly kubeConfig: KubeConfig;
  hang(): void;
  close(): void;
}> {
  const cluster = kc.getCurrentCluster();
  if (cluster === null) throw new Error('the kubeconfig has no cluster');
  const target = new URL(cluster.server);
  const pairs: { client: Socket; upstream: Socket }[] = [];
  const strays: Socket[] = [];
  let hung = false;
  const server: Server = createServer((client) => {
    client.on('error', () => undefined);
    if (hung) {
      strays.push(client);
      client.resume();
      return;
    }
    const upstream = connect(Number(target.port), target.hostname);
    upstream.on('error', () => client.destroy());
    client.pipe(upstream);
    upstream.pipe(client);
    pairs.push({ client, upstream });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('no port');
  const through = new KubeConfig();
  through.loadFromOptions({
    clusters: kc.clusters.map((c) =>
      c.name === cluster.name
        ? { ...c, server: `${target.protocol}//${target.hostname}:${String(address.port)}` }
        : c,
    ),
    users: kc.users,
    contexts: kc.contexts,
    currentContext: kc.getCurrentContext(),
  });
  return {
    kubeConfig: through,
    hang() {
      hung = true;
      for (const { client, upstream } of pairs) {
        client.unpipe(upstream);
        upstream.unpipe(client);
        upstream.destroy();
        client.resume();
        strays.push(client);
      }
    },
    close() {
      for (const socket of strays) socket.destroy();
      for (const { client, upstream } of pairs) {
        client.destroy();
        upstream.destroy();
      }
      server.close();
    },
  };
}
