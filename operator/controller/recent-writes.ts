/**
 * What this controller wrote that its informer caches may not show yet.
 *
 * A pass reads from informer caches, which lag our own writes by one watch event. Without
 * help, a pass that runs between our create of a pod and the pod's watch event would see
 * no pod and create it again (AlreadyExists), and a pass that runs between our status write
 * and its echo would write status again on the old resourceVersion (a conflict).
 *
 * client-go's controllers (ReplicaSet, Job) keep "expectations": counts of creates and
 * deletes not yet seen, and they skip acting until the cache has caught up. Our children
 * are named (one claim or pod per Conversation), so we keep the object itself instead:
 * the object a create, patch or status write returned. Until the cache catches up, a
 * pass sees that object in place of the cached one, so the plan works on a true snapshot
 * (the new pod's uid for delete preconditions, the resourceVersion for the next status
 * write) rather than waiting. After a delete, the object of that uid is seen as being
 * deleted until the cache shows it so. An entry is dropped when the informer delivers the
 * object (same uid; for the Conversation, the resourceVersion we wrote or a later one, as
 * resourceVersions compare since Kubernetes 1.35), when a write to it
 * conflicts (what we recorded is not current), or after `ttlMs` (client-go's expectations
 * time out the same way), so a missed event costs at most one repeated write that the API
 * server refuses.
 *
 * The same record tells the controller which Conversation events are the echoes of its
 * own writes, so they do not queue another pass.
 */
import { ObjectKind } from './kube-api';
import type { WriteRecorder } from './kube-client';
import { isAtLeast } from './resource-version';

/** How long a recorded write stands in for the cache at most. */
export const RECENT_WRITE_TTL_MS = 30_000;

/** Options of {@link RecentWrites}. */
export interface RecentWritesOptions {
  /** @default RECENT_WRITE_TTL_MS */
  readonly ttlMs?: number;
  /** @default Date.now */
  readonly now?: () => number;
}

type Entry =
  | {
      readonly type: 'object';
      readonly obj: unknown;
      readonly uid: string;
      readonly resourceVersion: string;
      readonly expiresAt: number;
    }
  | { readonly type: 'deleted'; readonly uid: string; readonly expiresAt: number };

interface Meta {
  readonly namespace: string;
  readonly name: string;
  readonly uid: string;
  readonly resourceVersion: string;
  readonly deleting: boolean;
}

function metaOf(obj: unknown): Meta | undefined {
  if (typeof obj !== 'object' || obj === null) return undefined;
  const metadata: unknown = Reflect.get(obj, 'metadata');
  if (typeof metadata !== 'object' || metadata === null) return undefined;
  const text = (key: string): string => {
    const value: unknown = Reflect.get(metadata, key);
    return typeof value === 'string' ? value : '';
  };
  const deletion: unknown = Reflect.get(metadata, 'deletionTimestamp');
  return {
    namespace: text('namespace'),
    name: text('name'),
    uid: text('uid'),
    resourceVersion: text('resourceVersion'),
    deleting: deletion !== undefined && deletion !== null,
  };
}

const keyOf = (kind: ObjectKind, namespace: string, name: string): string =>
  `${kind}/${namespace}/${name}`;

/**
 * The Conversation is updated in place: the cache has caught up only at the
 * resourceVersion we wrote. A child we created (or read live) is new: any version of that
 * uid in the cache is at least as new as ours.
 */
const updatesInPlace = (kind: ObjectKind): boolean => kind === ObjectKind.Conversation;

/** Recent writes, by kind, namespace and name. */
export class RecentWrites implements WriteRecorder {
  // Insertion order is expiry order (every entry lives ttlMs), so expired ones are at the front.
  private readonly entries = new Map<string, Entry>();
  private readonly ttlMs: number;
  private readonly now: () => number;

  constructor(options: RecentWritesOptions = {}) {
    this.ttlMs = options.ttlMs ?? RECENT_WRITE_TTL_MS;
    this.now = options.now ?? Date.now;
  }

  /** Number of entries held (expired ones included until the next write sweeps them). */
  get size(): number {
    return this.entries.size;
  }

  wrote(kind: ObjectKind, obj: unknown): void {
    const meta = metaOf(obj);
    if (meta === undefined || meta.name === '' || meta.uid === '') return;
    this.put(keyOf(kind, meta.namespace, meta.name), {
      type: 'object',
      obj,
      uid: meta.uid,
      resourceVersion: meta.resourceVersion,
      expiresAt: this.now() + this.ttlMs,
    });
  }

  deleted(kind: ObjectKind, namespace: string, name: string, uid: string): void {
    this.put(keyOf(kind, namespace, name), {
      type: 'deleted',
      uid,
      expiresAt: this.now() + this.ttlMs,
    });
  }

  forget(kind: ObjectKind, namespace: string, name: string): void {
    this.entries.delete(keyOf(kind, namespace, name));
  }

  /**
   * What a pass should see for `kind` `namespace/name`, given what the cache holds
   * (undefined: not in the cache).
   */
  resolve(kind: ObjectKind, namespace: string, name: string, cached: unknown): unknown {
    const key = keyOf(kind, namespace, name);
    const entry = this.entries.get(key);
    if (entry === undefined) return cached;
    if (entry.expiresAt <= this.now()) {
      this.entries.delete(key);
      return cached;
    }
    const meta = cached === undefined ? undefined : metaOf(cached);
    if (entry.type === 'object') {
      const caughtUp = updatesInPlace(kind)
        ? meta === undefined ||
          meta.uid !== entry.uid ||
          isAtLeast(meta.resourceVersion, entry.resourceVersion)
        : meta !== undefined && meta.uid === entry.uid;
      if (!caughtUp) return entry.obj;
      this.entries.delete(key);
      return cached;
    }
    if (meta === undefined || meta.uid !== entry.uid || meta.deleting) {
      this.entries.delete(key);
      return cached;
    }
    return markDeleting(cached, this.now());
  }

  /**
   * An informer event (`deleted`: a delete event). Drops the entry the cache has now caught
   * up with, and returns true when `obj` is exactly the object one of our writes returned
   * (the echo of our own write).
   */
  observe(kind: ObjectKind, obj: unknown, deleted: boolean): boolean {
    const meta = metaOf(obj);
    if (meta === undefined) return false;
    const key = keyOf(kind, meta.namespace, meta.name);
    const entry = this.entries.get(key);
    if (entry === undefined) return false;
    if (meta.uid !== entry.uid) {
      // Another object of the name: ours is gone (or the entry was about an older one).
      if (updatesInPlace(kind) || entry.type === 'deleted') this.entries.delete(key);
      return false;
    }
    if (entry.type === 'deleted') {
      if (deleted || meta.deleting) this.entries.delete(key);
      return false;
    }
    const echo = !deleted && meta.resourceVersion === entry.resourceVersion;
    const caughtUp = isAtLeast(meta.resourceVersion, entry.resourceVersion);
    if (caughtUp || deleted || !updatesInPlace(kind)) this.entries.delete(key);
    return echo;
  }

  private put(key: string, entry: Entry): void {
    const now = this.now();
    for (const [k, e] of this.entries) {
      if (e.expiresAt > now) break;
      this.entries.delete(k);
    }
    this.entries.delete(key);
    this.entries.set(key, entry);
  }
}

function markDeleting(obj: unknown, nowMs: number): unknown {
  if (typeof obj !== 'object' || obj === null) return obj;
  const metadata: unknown = Reflect.get(obj, 'metadata');
  return {
    ...obj,
    metadata: {
      ...(typeof metadata === 'object' && metadata !== null ? metadata : {}),
      deletionTimestamp: new Date(nowMs).toISOString(),
    },
  };
}
