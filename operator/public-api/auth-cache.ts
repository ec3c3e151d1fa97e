import { createHash } from 'node:crypto';
import { isAppError, type AppError } from '../../common/errors';
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
/** How long a refused token is refused without asking again. @default 5000 */
export const DEFAULT_AUTH_FAILURE_CACHE_MS = 5_000;

/** Options of {@link AuthCache}. */
export interface AuthCacheOptions {
  readonly authenticate: Authenticate;
  /** 0 disables reuse (every request asks). @default {@link DEFAULT_AUTH_CACHE_MS} */
  readonly ttlMs?: number;
  /** @default {@link DEFAULT_AUTH_CACHE_ENTRIES} */
  readonly maxEntries?: number;
  /**
   * How long an `unauthenticated` answer is given again without asking; 0: never.
   * @default {@link DEFAULT_AUTH_FAILURE_CACHE_MS}
   */
  readonly failureTtlMs?: number;
  /**
   * Most refused tokens remembered at once, apart from the successes (so a flood of bad
   * tokens never pushes out a good one). @default {@link DEFAULT_AUTH_CACHE_ENTRIES}
   */
  readonly maxFailures?: number;
  /** Milliseconds clock. @default Date.now */
  readonly now?: () => number;
}

/**
 * Successful authentications, reused for `ttlMs` so that clients reconnecting streams
 * often do not ask the state plane each time. The price: a token revoked (or expired)
 * meanwhile is still honoured until its entry expires, at most `ttlMs`.
 *
 * Refusals (`unauthenticated`: unknown, expired, revoked, or not accepted by
 * kube-apiserver's TokenReview) are given again for `failureTtlMs` without asking, so a
 * client repeating a bad token loads neither the state plane nor kube-apiserver. Nothing
 * else is remembered: `unavailable` (ask again, the backend may be back), and
 * `permission_denied` (a ServiceAccount no persona links yet: an admin may link it now).
 * Concurrent checks of one token share one call. Keys are SHA-256 digests, so the process
 * never keeps a token it was sent.
 */
export class AuthCache {
  private readonly authenticateToken: Authenticate;
  private readonly ttlMs: number;
  private readonly maxEntries: number;
  private readonly now: () => number;
  /** Insertion order is age order: the first entry is the oldest. */
  private readonly entries = new Map<string, { caller: Caller; expiresAtMs: number }>();
  private readonly failureTtlMs: number;
  private readonly maxFailures: number;
  /** Refused tokens; insertion order is age order, as above. */
  private readonly failures = new Map<string, { error: AppError; expiresAtMs: number }>();
  private readonly pending = new Map<string, Promise<Caller>>();

  constructor(options: AuthCacheOptions) {
    this.authenticateToken = options.authenticate;
    this.ttlMs = options.ttlMs ?? DEFAULT_AUTH_CACHE_MS;
    this.maxEntries = Math.max(1, options.maxEntries ?? DEFAULT_AUTH_CACHE_ENTRIES);
    this.now = options.now ?? Date.now;
    this.failureTtlMs = options.failureTtlMs ?? DEFAULT_AUTH_FAILURE_CACHE_MS;
    this.maxFailures = Math.max(1, options.maxFailures ?? DEFAULT_AUTH_CACHE_ENTRIES);
  }

  /** Number of tokens remembered as good (metrics, tests). */
  get size(): number {
    return this.entries.size;
  }

  /** Number of tokens remembered as refused (tests). */
  get failureCount(): number {
    return this.failures.size;
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
    const refused = this.failures.get(key);
    if (refused !== undefined) {
      if (refused.expiresAtMs > this.now()) throw refused.error;
      this.failures.delete(key);
    }
    const inFlight = this.pending.get(key);
    if (inFlight !== undefined) return inFlight;
    const call = this.authenticateToken(token);
    this.pending.set(key, call);
    try {
      const caller = await call;
      if (this.ttlMs > 0)
        remember(
          this.entries,
          key,
          { caller, expiresAtMs: this.now() + this.ttlMs },
          this.maxEntries,
        );
      return caller;
    } catch (error) {
      if (this.failureTtlMs > 0 && isAppError(error) && error.code === 'unauthenticated') {
        remember(
          this.failures,
          key,
          { error, expiresAtMs: this.now() + this.failureTtlMs },
          this.maxFailures,
        );
      }
      throw error;
    } finally {
      this.pending.delete(key);
    }
  }

  /** Forgets every token (e.g. after a persona's roles changed). */
  clear(): void {
    this.entries.clear();
    this.failures.clear();
  }
}

/** Sets `key` as the newest entry of `map`, forgetting the oldest past `max`. */
function remember<T>(map: Map<string, T>, key: string, value: T, max: number): void {
  map.delete(key);
  map.set(key, value);
  while (map.size > max) {
    const oldest = map.keys().next();
    if (oldest.done === true) break;
    map.delete(oldest.value);
  }
}
