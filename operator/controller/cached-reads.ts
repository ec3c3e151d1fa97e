/**
 * The reads of a pass, served from what the controller already holds instead of a GET per
 * object per pass:
 *
 * - kinds the controller watches (Conversations, our pods, SandboxClaims, Sandboxes and
 *   agent-sandbox's pods) come from the informer caches, with our own recent writes laid
 *   over them (`recent-writes.ts`); while a kind's informer is not synced (starting, or
 *   restarting after an error) its objects are read with a GET, as before;
 * - the objects many Conversations share and nothing watches (PodTemplates,
 *   SandboxWarmPools, SandboxTemplates: the control plane may only `get` them) are read
 *   at most once per `sharedTtlMs` per name, concurrent passes sharing one GET; a
 *   NotFound is kept as long (the pod backend's default template is usually absent).
 *   A change to one is therefore seen within `sharedTtlMs`, sooner than the timed
 *   recheck of a Conversation blocked on a missing one.
 */
import type { ObjectReader } from './kube-api';
import { ObjectKind } from './kube-api';
import type { RecentWrites } from './recent-writes';

/** How long a shared object (template, warm pool) read is reused. */
export const SHARED_READ_TTL_MS = 10_000;

/** One informer's cache, or several searched in turn. */
export interface CacheSource {
  get(name: string, namespace: string): unknown;
  /** True once the informer has listed and is watching (false again after an error). */
  synced(): boolean;
}

/** Options of {@link CachedReader}. */
export interface CachedReaderOptions {
  /** GETs: for kinds with no synced cache and for shared objects. */
  readonly live: ObjectReader;
  /** The informer caches by kind (filled when the controller starts). */
  readonly caches: ReadonlyMap<ObjectKind, CacheSource>;
  readonly recent: RecentWrites;
  /** @default SHARED_READ_TTL_MS */
  readonly sharedTtlMs?: number;
  /** @default Date.now */
  readonly now?: () => number;
}

const SHARED_KINDS: ReadonlySet<ObjectKind> = new Set([
  ObjectKind.PodTemplate,
  ObjectKind.WarmPool,
  ObjectKind.SandboxTemplate,
]);

/** An {@link ObjectReader} over informer caches, recent writes and a short-lived read cache. */
export class CachedReader implements ObjectReader {
  private readonly shared = new Map<string, { at: number; value: Promise<unknown> }>();
  private readonly sharedTtlMs: number;
  private readonly now: () => number;

  constructor(private readonly options: CachedReaderOptions) {
    this.sharedTtlMs = options.sharedTtlMs ?? SHARED_READ_TTL_MS;
    this.now = options.now ?? Date.now;
  }

  get(kind: ObjectKind, namespace: string, name: string): Promise<unknown> {
    const cache = this.options.caches.get(kind);
    if (cache?.synced() === true) {
      const cached = wire(cache.get(name, namespace));
      return Promise.resolve(this.options.recent.resolve(kind, namespace, name, cached));
    }
    if (SHARED_KINDS.has(kind)) return this.readShared(kind, namespace, name);
    return this.options.live.get(kind, namespace, name);
  }

  private readShared(kind: ObjectKind, namespace: string, name: string): Promise<unknown> {
    const key = `${kind}/${namespace}/${name}`;
    const now = this.now();
    const held = this.shared.get(key);
    if (held !== undefined && now - held.at < this.sharedTtlMs) return held.value;
    for (const [k, entry] of this.shared) {
      if (now - entry.at >= this.sharedTtlMs) this.shared.delete(k);
    }
    const value = this.options.live.get(kind, namespace, name);
    const entry = { at: now, value };
    this.shared.set(key, entry);
    // A failed read is not kept: the next pass reads again.
    value.catch(() => {
      if (this.shared.get(key) === entry) this.shared.delete(key);
    });
    return value;
  }
}

/**
 * Wire JSON of a cached object. Watch events carry wire JSON already; a list through a
 * typed client-node API (pods) yields class instances with Date fields, turned back here.
 */
function wire(obj: unknown): unknown {
  if (typeof obj !== 'object' || obj === null) return obj;
  if (Object.getPrototypeOf(obj) === Object.prototype) return obj;
  return JSON.parse(JSON.stringify(obj));
}
