/**
 * Per-caller limits of the public API and the Kubernetes door (docs/api.md, "Limits per
 * caller"): how many conversations a caller may own, how many streams it may hold open on
 * one replica, and how many requests a second it may send to one replica. A caller is the
 * identity the authentication produced (`Caller.identity`: the persona's first identity,
 * or `kubernetes:<user>` on the door), never an address. Each refusal is a
 * {@link LimitError}: 429 `resource_exhausted` with `Retry-After`, naming the limit, the
 * count and the setting that changes it.
 *
 * The state here is this replica's, in memory, and bounded: stream counts exist only while
 * streams are open, conversation reservations only while a create is in flight, and rate
 * buckets only until they fill up again (token-buckets.ts).
 */
import type { ErrorDetails } from '../../common/errors';
import { Role } from '../../common/persona-roles';
import type { Caller } from '../turns/turn-service';
import { ApiError } from './api-error';
import { DEFAULT_MAX_BUCKETS, TokenBuckets } from './token-buckets';

/** The limits, as `limit` labels and `details.limit` values. */
export const LimitName = {
  Conversations: 'conversations',
  Streams: 'streams',
  Requests: 'requests',
} as const;
export type LimitName = (typeof LimitName)[keyof typeof LimitName];

/** The environment variable of each setting (operator/config.ts reads them). */
export const LimitSetting = {
  conversations: 'POLYCHROME_LIMIT_CONVERSATIONS',
  streams: 'POLYCHROME_LIMIT_STREAMS',
  requestsPerSecond: 'POLYCHROME_LIMIT_REQUESTS_PER_SECOND',
  burst: 'POLYCHROME_LIMIT_REQUEST_BURST',
  edgeScale: 'POLYCHROME_LIMIT_EDGE_SCALE',
} as const;

/** The settings; 0 turns a limit off. */
export interface LimitSettings {
  /** Conversations one caller may own at once (in the namespace the API creates them in). */
  readonly conversations: number;
  /** Streams one caller may hold open on one replica. */
  readonly streams: number;
  /** Requests a second one caller may send to one replica, on average. */
  readonly requestsPerSecond: number;
  /** Requests one caller may send at once after a quiet time (the bucket's size). */
  readonly burst: number;
  /**
   * A caller with the `edge` role (a chat bot, a web front end) speaks for many people:
   * each of its limits is this many times the above.
   */
  readonly edgeScale: number;
}

/** @default 20 conversations, 10 streams, 20 requests a second in bursts of 60, edges ×50 */
export const DEFAULT_LIMITS: LimitSettings = Object.freeze({
  conversations: 20,
  streams: 10,
  requestsPerSecond: 20,
  burst: 60,
  edgeScale: 50,
});

/** Retry-After of a conversation refusal: the count drops only when one is deleted. */
export const CONVERSATIONS_RETRY_AFTER_S = 60;
/** Retry-After of a stream refusal: a slot frees as soon as the caller closes a stream. */
export const STREAMS_RETRY_AFTER_S = 5;

/** A request refused by a per-caller limit: 429 with `Retry-After`. */
export class LimitError extends ApiError {
  override readonly name: string = 'LimitError';
  readonly limit: LimitName;
  readonly retryAfterSeconds: number;

  constructor(
    limit: LimitName,
    message: string,
    facts: {
      readonly current: number;
      readonly max: number;
      readonly setting: string;
      readonly retryAfterSeconds: number;
    } & ErrorDetails,
  ) {
    super('resource_exhausted', message, {
      details: {
        limit,
        scope: limit === LimitName.Conversations ? 'caller' : 'caller, per replica',
        ...facts,
      },
      headers: { 'retry-after': String(facts.retryAfterSeconds) },
    });
    this.limit = limit;
    this.retryAfterSeconds = facts.retryAfterSeconds;
  }
}

/** Options of {@link CallerLimits}. */
export interface CallerLimitsOptions {
  /** @default {@link DEFAULT_LIMITS} */
  readonly settings?: LimitSettings;
  /**
   * How many conversations `identity` owns now, from the control plane's informer cache
   * ({@link countOwnedConversations}). None: only creates in flight on this replica count.
   */
  readonly ownedConversations?: (identity: string) => number;
  /** Rate buckets remembered at once. @default 100000 */
  readonly maxCallers?: number;
  /** Milliseconds clock of the rate buckets. @default Date.now */
  readonly now?: () => number;
}

/** One replica's per-caller limits. */
export class CallerLimits {
  private readonly settings: LimitSettings;
  private readonly ownedConversations: (identity: string) => number;
  private readonly now: () => number;
  private readonly buckets: TokenBuckets;
  private readonly streams = new Map<string, number>();
  /** Creates in flight per caller: how many, and the count the cache showed at the first. */
  private readonly creating = new Map<string, { pending: number; baseline: number }>();

  constructor(options: CallerLimitsOptions = {}) {
    this.settings = options.settings ?? DEFAULT_LIMITS;
    this.ownedConversations = options.ownedConversations ?? (() => 0);
    this.now = options.now ?? Date.now;
    this.buckets = new TokenBuckets(options.maxCallers ?? DEFAULT_MAX_BUCKETS);
  }

  /** Streams open on this replica for `caller` (tests). */
  streamsOf(caller: Pick<Caller, 'identity'>): number {
    return this.streams.get(caller.identity) ?? 0;
  }

  /** Callers with a rate bucket now (tests: idle ones are forgotten). */
  get trackedCallers(): number {
    return this.buckets.size;
  }

  /**
   * Counts one request of `caller` against its rate.
   *
   * @throws LimitError `requests` when its bucket is empty; Retry-After is when it holds
   *   one request again.
   */
  admitRequest(caller: Caller): void {
    const perSecond = this.scaled(caller, this.settings.requestsPerSecond);
    const burst = this.scaled(caller, this.settings.burst);
    const take = this.buckets.take(caller.identity, { capacity: burst, perSecond }, this.now());
    if (take.allowed) return;
    const retryAfterSeconds = Math.ceil(take.retryAfterMs / 1000);
    throw new LimitError(
      LimitName.Requests,
      `${caller.identity} sent more requests than this replica takes from one caller: ` +
        `${String(perSecond)} a second, in bursts of at most ${String(burst)} ` +
        `(${this.settingText(caller, LimitSetting.requestsPerSecond, this.settings.requestsPerSecond)}, ` +
        `${this.settingText(caller, LimitSetting.burst, this.settings.burst)}); ` +
        `retry after ${String(retryAfterSeconds)} s, and send fewer requests`,
      {
        // The bucket is empty: the whole burst is used.
        current: burst,
        max: burst,
        perSecond,
        setting: LimitSetting.requestsPerSecond,
        burstSetting: LimitSetting.burst,
        retryAfterSeconds,
      },
    );
  }

  /**
   * Takes one of `caller`'s stream slots on this replica; the returned function gives it
   * back (call it on every way the stream ends; a second call does nothing).
   *
   * @throws LimitError `streams` when the caller holds its limit already.
   */
  openStream(caller: Caller): () => void {
    const key = caller.identity;
    const max = this.scaled(caller, this.settings.streams);
    const current = this.streams.get(key) ?? 0;
    if (max > 0 && current >= max) {
      throw new LimitError(
        LimitName.Streams,
        `${key} has ${String(current)} streams open on this replica, the most one caller may hold ` +
          `(${this.settingText(caller, LimitSetting.streams, this.settings.streams)}); close one ` +
          `(its place frees at once) and retry, or ask the operator to raise ${LimitSetting.streams}`,
        { current, max, setting: LimitSetting.streams, retryAfterSeconds: STREAMS_RETRY_AFTER_S },
      );
    }
    this.streams.set(key, current + 1);
    return once(() => {
      const left = (this.streams.get(key) ?? 1) - 1;
      if (left <= 0) this.streams.delete(key);
      else this.streams.set(key, left);
    });
  }

  /**
   * Reserves one conversation for `caller` before it is created; the returned function
   * ends the reservation once the create has finished, created or not (a second call does
   * nothing). The count is the larger of what the informer cache shows and what it showed
   * at the first create in flight plus the creates in flight, so two concurrent creates on
   * this replica cannot both take the last place, and a created conversation already in
   * the cache is not counted twice.
   *
   * @throws LimitError `conversations` when the caller owns its limit already.
   */
  reserveConversation(caller: Caller): () => void {
    const key = caller.identity;
    const max = this.scaled(caller, this.settings.conversations);
    if (max <= 0) return () => undefined;
    const owned = this.ownedConversations(key);
    const inFlight = this.creating.get(key);
    const current =
      inFlight === undefined ? owned : Math.max(owned, inFlight.baseline + inFlight.pending);
    if (current >= max) {
      throw new LimitError(
        LimitName.Conversations,
        `${key} owns ${String(current)} conversations, the most one caller may own ` +
          `(${this.settingText(caller, LimitSetting.conversations, this.settings.conversations)}); ` +
          'a conversation stops counting once it is deleted (after its retention, docs/operator.md), ' +
          `or ask the operator to raise ${LimitSetting.conversations}`,
        {
          current,
          max,
          setting: LimitSetting.conversations,
          retryAfterSeconds: CONVERSATIONS_RETRY_AFTER_S,
        },
      );
    }
    if (inFlight === undefined) this.creating.set(key, { pending: 1, baseline: owned });
    else inFlight.pending += 1;
    return once(() => {
      const entry = this.creating.get(key);
      if (entry === undefined) return;
      entry.pending -= 1;
      if (entry.pending <= 0) this.creating.delete(key);
    });
  }

  private scaled(caller: Caller, base: number): number {
    return caller.roles.includes(Role.Edge) ? base * this.settings.edgeScale : base;
  }

  /** `NAME=value`, and for an edge the scale that multiplies it. */
  private settingText(caller: Caller, name: string, base: number): string {
    return caller.roles.includes(Role.Edge)
      ? `${name}=${String(base)} times ${LimitSetting.edgeScale}=${String(this.settings.edgeScale)} for an edge`
      : `${name}=${String(base)}`;
  }
}

/** The shape of a Conversation object this module reads (an informer cache entry). */
export interface OwnedObject {
  readonly metadata?: { readonly namespace?: string; readonly deletionTimestamp?: unknown };
  readonly spec?: unknown;
}

/**
 * How many of `objects` in `namespace` name `identity` as `spec.owner` and are not being
 * deleted: what a caller owns, as the public API records it (it writes `spec.owner` when it
 * creates a conversation in its namespace).
 */
export function countOwnedConversations(
  objects: Iterable<OwnedObject>,
  namespace: string,
  identity: string,
): number {
  let count = 0;
  for (const object of objects) {
    if (object.metadata?.namespace !== namespace) continue;
    if (object.metadata.deletionTimestamp !== undefined) continue;
    const spec = object.spec;
    const owner: unknown =
      typeof spec === 'object' && spec !== null ? Reflect.get(spec, 'owner') : undefined;
    if (owner === identity) count += 1;
  }
  return count;
}

function once(action: () => void): () => void {
  let done = false;
  return () => {
    if (done) return;
    done = true;
    action();
  };
}
