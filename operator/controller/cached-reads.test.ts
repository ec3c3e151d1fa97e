import { describe, expect, it } from '@jest/globals';
import { ApiException } from '@kubernetes/client-node';
import pino from 'pino';
import type { Conversation } from '../api/v1alpha1/conversation-types';
import type { CacheSource } from './cached-reads';
import { CachedReader } from './cached-reads';
import { ManualClock } from './clock';
import { ConversationReconciler } from './conversation-reconciler';
import type { KubeApi } from './kube-api';
import { ObjectKind } from './kube-api';
import { conversationKube } from './kube-client';
import { RecentWrites } from './recent-writes';
import { NOW, conversation } from './snapshot-fixtures';

/** An object as the API returns it. */
interface Written {
  readonly metadata: object;
}

const metaText = (obj: unknown, key: string): string => {
  const meta: unknown = typeof obj === 'object' && obj !== null ? Reflect.get(obj, 'metadata') : {};
  const value: unknown = typeof meta === 'object' && meta !== null ? Reflect.get(meta, key) : '';
  return typeof value === 'string' ? value : '';
};

/** An informer cache: objects by namespace/name, synced unless told. */
class FakeCache implements CacheSource {
  private readonly objects = new Map<string, unknown>();
  isSynced = true;
  put(obj: unknown): void {
    this.objects.set(`${metaText(obj, 'namespace')}/${metaText(obj, 'name')}`, obj);
  }
  get(name: string, namespace: string): unknown {
    return this.objects.get(`${namespace}/${name}`);
  }
  synced(): boolean {
    return this.isSynced;
  }
}

/** The API: counts every call; writes return what the API server would. */
class FakeApi implements KubeApi {
  readonly calls: string[] = [];
  /** What the writes returned, newest last. */
  readonly returned: { kind: ObjectKind; obj: Written }[] = [];
  private rv = 500;
  readonly live = new Map<string, unknown>();

  get(kind: ObjectKind, namespace: string, name: string): Promise<unknown> {
    this.calls.push(`get ${kind}`);
    return Promise.resolve(this.live.get(`${kind}/${namespace}/${name}`));
  }
  createClaim(claim: Written): Promise<unknown> {
    this.calls.push('create claim');
    return Promise.resolve(this.keep(ObjectKind.Claim, { ...claim, metadata: this.meta(claim) }));
  }
  createPod(pod: Written): Promise<unknown> {
    this.calls.push('create pod');
    return Promise.resolve(
      this.keep(ObjectKind.Pod, { ...pod, metadata: this.meta(pod), status: { phase: 'Pending' } }),
    );
  }
  remove(kind: ObjectKind): Promise<unknown> {
    this.calls.push(`delete ${kind}`);
    return Promise.resolve(undefined);
  }
  patchFinalizers(c: Conversation, finalizers: string[]): Promise<unknown> {
    this.calls.push('patch conversation');
    const patched = { ...c, metadata: { ...c.metadata, finalizers } };
    return Promise.resolve(
      this.keep(ObjectKind.Conversation, { ...patched, metadata: this.meta(patched) }),
    );
  }
  replaceStatus(c: Conversation, status: unknown): Promise<unknown> {
    this.calls.push('update conversation/status');
    return Promise.resolve(
      this.keep(ObjectKind.Conversation, { ...c, metadata: this.meta(c), status }),
    );
  }
  private meta(obj: Written): object {
    const uid = metaText(obj, 'uid');
    return {
      ...obj.metadata,
      uid: uid === '' ? `uid-${this.rv}` : uid,
      resourceVersion: String(++this.rv),
    };
  }
  private keep<T extends Written>(kind: ObjectKind, obj: T): T {
    this.returned.push({ kind, obj });
    return obj;
  }
}

function harness(): {
  api: FakeApi;
  caches: Map<ObjectKind, FakeCache>;
  recent: RecentWrites;
  pass: () => Promise<{ calls: string[]; requeueAfterMs?: number }>;
  /** The informers deliver everything the API returned (and what `extra` adds). */
  deliver: (...extra: unknown[]) => void;
} {
  const api = new FakeApi();
  const caches = new Map<ObjectKind, FakeCache>(
    [ObjectKind.Conversation, ObjectKind.Pod, ObjectKind.Claim, ObjectKind.Sandbox].map((k) => [
      k,
      new FakeCache(),
    ]),
  );
  const recent = new RecentWrites();
  const reader = new CachedReader({ live: api, caches, recent });
  const reconciler = new ConversationReconciler({
    kube: conversationKube(api, reader, recent),
    clock: new ManualClock(NOW),
    logger: pino({ level: 'silent' }),
  });
  return {
    api,
    caches,
    recent,
    async pass() {
      const before = api.calls.length;
      const result = await reconciler.reconcile('team', 'c1');
      return {
        calls: api.calls.slice(before),
        ...(result.requeueAfterMs === undefined ? {} : { requeueAfterMs: result.requeueAfterMs }),
      };
    },
    deliver(...extra) {
      for (const { kind, obj } of [
        ...api.returned.splice(0),
        ...extra.map((obj) => ({ kind: ObjectKind.Pod, obj })),
      ]) {
        caches.get(kind)?.put(obj);
        recent.observe(kind, obj, false);
      }
    },
  };
}

const podConversation = (): Conversation =>
  conversation({ sandbox: { backend: 'pod' } }, undefined, { finalizers: [] });

describe('a pass from the informer caches', () => {
  it('makes no GET for objects in the caches, and never creates twice while they lag', async () => {
    const h = harness();
    h.caches.get(ObjectKind.Conversation)?.put(podConversation());

    // Finalizer pass: the shared PodTemplate is read once (absent: the built-in spec).
    expect(await h.pass()).toEqual({
      calls: ['get podtemplate', 'patch conversation'],
      requeueAfterMs: 0,
    });
    // The caches have not seen the patch: the pass works on what the patch returned.
    expect((await h.pass()).calls).toEqual(['create pod', 'update conversation/status']);
    // Still nothing in the caches: no second create, no second status write, no GET.
    expect((await h.pass()).calls).toEqual([]);
    // One entry per object: the Conversation (as the status write left it) and the pod.
    expect(h.recent.size).toBe(2);

    // The informers catch up; the local node marks the pod Running and Ready.
    h.deliver();
    expect(h.recent.size).toBe(0);
    const pod = h.caches.get(ObjectKind.Pod)?.get('c1', 'team') as Written;
    h.deliver({
      ...pod,
      metadata: { ...pod.metadata, resourceVersion: '900' },
      status: {
        phase: 'Running',
        podIP: '10.1.2.3',
        conditions: [{ type: 'Ready', status: 'True' }],
      },
    });
    expect((await h.pass()).calls).toEqual(['update conversation/status']);
    h.deliver();
    expect(
      (h.caches.get(ObjectKind.Conversation)?.get('c1', 'team') as Conversation).status?.phase,
    ).toBe('Ready');

    // An idle pass with every object cached: no request at all.
    expect((await h.pass()).calls).toEqual([]);
    expect(h.api.calls.filter((c) => c.startsWith('get '))).toEqual(['get podtemplate']);
  });

  it('agent-sandbox: the claim is created once while the claim cache lags', async () => {
    const h = harness();
    h.api.live.set('warmpool/team/polychrome-harness', {
      metadata: { name: 'polychrome-harness' },
      spec: { sandboxTemplateRef: { name: 'polychrome-harness' } },
    });
    h.api.live.set('sandboxtemplate/team/polychrome-harness', {
      metadata: { name: 'polychrome-harness' },
    });
    h.caches.get(ObjectKind.Conversation)?.put(conversation());
    expect((await h.pass()).calls).toEqual([
      'get warmpool',
      'get sandboxtemplate',
      'create claim',
      'update conversation/status',
    ]);
    expect((await h.pass()).calls).toEqual([]);
  });

  it('a conflicting status write forgets the Conversation our last write returned', async () => {
    const h = harness();
    h.caches.get(ObjectKind.Conversation)?.put(podConversation());
    await h.pass();
    expect(h.recent.size).toBe(1);
    h.api.replaceStatus = () => Promise.reject(new ApiException(409, 'Conflict', '{}', {}));
    await expect(h.pass()).rejects.toThrow('Conflict');
    expect(h.recent.size).toBe(1); // the pod the pass created; the Conversation is forgotten
    expect(h.recent.resolve(ObjectKind.Conversation, 'team', 'c1', 'cached')).toBe('cached');
  });

  it('reads a kind whose informer is not synced with a GET', async () => {
    const h = harness();
    h.caches.get(ObjectKind.Conversation)?.put(conversation({ sandbox: { backend: 'pod' } }));
    const pods = h.caches.get(ObjectKind.Pod);
    if (pods !== undefined) pods.isSynced = false;
    expect((await h.pass()).calls.filter((c) => c.startsWith('get '))).toEqual([
      'get podtemplate',
      'get pod',
    ]);
  });
});

describe('CachedReader, shared objects', () => {
  const setup = (): { api: FakeApi; reader: CachedReader; clock: { ms: number } } => {
    const api = new FakeApi();
    const clock = { ms: 0 };
    const reader = new CachedReader({
      live: api,
      caches: new Map(),
      recent: new RecentWrites(),
      sharedTtlMs: 1_000,
      now: () => clock.ms,
    });
    return { api, reader, clock };
  };

  it('one GET per name per ttl, shared by concurrent passes; NotFound kept as long', async () => {
    const { api, reader, clock } = setup();
    await Promise.all([
      reader.get(ObjectKind.PodTemplate, 'team', 'a'),
      reader.get(ObjectKind.PodTemplate, 'team', 'a'),
      reader.get(ObjectKind.PodTemplate, 'other', 'a'),
    ]);
    clock.ms = 999;
    await reader.get(ObjectKind.PodTemplate, 'team', 'a');
    expect(api.calls).toEqual(['get podtemplate', 'get podtemplate']);
    clock.ms = 1_000;
    await reader.get(ObjectKind.PodTemplate, 'team', 'a');
    expect(api.calls).toHaveLength(3);
  });

  it('does not keep a failed read', async () => {
    const { api, reader } = setup();
    let fail = true;
    api.get = (kind) => {
      api.calls.push(`get ${kind}`);
      return fail ? Promise.reject(new Error('503')) : Promise.resolve(undefined);
    };
    await expect(reader.get(ObjectKind.WarmPool, 'team', 'p')).rejects.toThrow('503');
    fail = false;
    await expect(reader.get(ObjectKind.WarmPool, 'team', 'p')).resolves.toBeUndefined();
    expect(api.calls).toHaveLength(2);
  });
});
