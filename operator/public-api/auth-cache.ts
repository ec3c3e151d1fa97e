import { createHash } from 'node:crypto';
import type { Caller } from '../turns/turn-service';

/**
 * Resolves a bearer token to the caller it belongs to.
 *
 * @throws AppError `unauthenticated` for an unknown, expired or revoked token;
 *   `unavailable` when it cannot be checked now.
 */
export type Authenticate = (token: string) => Promise<Caller>;

/** How long a successful authentication is reused. @default 10000 */
export const DEFAULT_AUTH_CACHE_MS = 10_000;
/** Most tokens remembered at once; the oldest is forgotten first. @default 10000 */
export const DEFAULT_AUTH_CACHE_ENTRIES = 10_000;

/** Options of {@link AuthCache}. */
export interface AuthCacheOptions {
  readonly authenticate: Authenticate;
  /** 0 disables reuse (every request asks). @default {@link DEFAULT_AUTH_CACHE_MS} */
  readonly ttlMs?: number;
  /** @default {@link DEFAULT_AUTH_CACHE_ENTRIES} */
  readonly maxEntries?: number;
  /** Milliseconds clock. @default Date.now */
  readonly now?: () => number;
}

/**
 * Successful authentications, reused for `ttlMs` so that clients reconnecting streams
 * often do not ask the state plane each time. The price: a token revoked (or expired)
 * meanwhile is still honoured until its entry expires, at most `ttlMs`. Failures are never
 * cached. Concurrent checks of one token share one call. Keys are SHA-256 digests, so the
 * process never keeps a token it was sent.
 */
export class AuthCache {
  private readonly authenticateToken: Authenticate;
  private readonly ttlMs: number;
  private readonly maxEntries: number;
  private readonly now: () => number;
  /** Insertion order is age order: the first entry is the oldest. */
  private readonly entries = new Map<string, { caller: Caller; expiresAtMs: number }>();
  private readonly pending = new Map<string, Promise<Caller>>();

  constructor(options: AuthCacheOptions) {
    this.authenticateToken = options.authenticate;
    this.ttlMs = options.ttlMs ?? DEFAULT_AUTH_CACHE_MS;
    this.maxEntries = Math.max(1, options.maxEntries ?? DEFAULT_AUTH_CACHE_ENTRIES);
    this.now = options.now ?? Date.now;
  }

  /** Number of tokens remembered (metrics, tests). */
  get size(): number {
    return this.entries.size;
  }

  /**
   * The caller for `token`, from the cache while its entry is fresh.
   *
   * @throws whatever the authenticator throws.
   */
  async authenticate(token: string): Promise<Caller> {
    const key = createHash('sha256').update(token).digest('hex');
    const entry = this.entries.get(key);
    if (entry !== undefined) {
      if (entry.expiresAtMs > this.now()) return entry.caller;
      this.entries.delete(key);
    }
    const inFlight = this.pending.get(key);
    if (inFlight !== undefined) return inFlight;
    const call = this.authenticateToken(token);
    this.pending.set(key, call);
    try {
      const caller = await call;
      if (this.ttlMs > 0) this.remember(key, caller);
      return caller;
    } finally {
      this.pending.delete(key);
    }
  }

  /** Forgets every token (e.g. after a persona's roles changed). */
  clear(): void {
    this.entries.clear();
  }

  private remember(key: string, caller: Caller): void {
    this.entries.delete(key);
    this.entries.set(key, { caller, expiresAtMs: this.now() + this.ttlMs });
    while (this.entries.size > this.maxEntries) {
      const oldest = this.entries.keys().next();
      if (oldest.done === true) break;
      this.entries.delete(oldest.value);
    }
  }
}
