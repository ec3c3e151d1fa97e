import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';

import { AppError } from '../../common/errors';
import type { Persona } from './persona-records';
import { toPersona, type PersonaRecords } from './persona-records';
import type { RecordContext } from './record-context';
import type { RecordOp, RecordReader } from './record-db';
import { checkIdentity, checkRecordId, checkTtlMs } from './record-input';
import {
  personaIndexKey,
  personaIndexPrefix,
  sessionKey,
  sessionTokenKey,
  Tag,
} from './record-keys';
import { idSchema, sessionSchema, type StoredSession } from './record-schemas';
import { decodeValue, encodeValue } from './record-values';

/** Default session lifetime: 12 hours. */
export const DEFAULT_SESSION_TTL_MS = 12 * 60 * 60 * 1000;
/** Longest session lifetime: 30 days. */
export const MAX_SESSION_TTL_MS = 30 * 24 * 60 * 60 * 1000;

/**
 * Bearer tokens are `pcs_` followed by 32 random bytes in base64url (43 characters): 256
 * bits of entropy, so an unsalted SHA-256 is enough to store them (nobody can enumerate
 * the space), and the prefix lets secret scanners spot a leaked token.
 */
const TOKEN_PREFIX = 'pcs_';
const TOKEN_BYTES = 32;
const TOKEN_PATTERN = /^pcs_[A-Za-z0-9_-]{43}$/;

/** A session as callers see it: never the token, never its hash. */
export interface Session {
  readonly id: string;
  readonly personaId: string;
  readonly createdAtMs: number;
  readonly expiresAtMs: number;
  /** When it was revoked, or null. */
  readonly revokedAtMs: number | null;
  /** The identity that minted it; null for a session recorded before minters were. */
  readonly mintedBy: string | null;
}

/** What a presented token proves: a live session and the persona it belongs to. */
export interface Authenticated {
  readonly session: Session;
  readonly persona: Persona;
}

/**
 * API sessions. Only the SHA-256 of a token is stored (in the session record and as the
 * `session-token:` index key); the plaintext exists once, in the value
 * {@link SessionRecords.create} returns. Nothing here logs, and no message or detail
 * carries a token or its hash.
 */
export class SessionRecords {
  constructor(
    private readonly ctx: RecordContext,
    private readonly personas: PersonaRecords,
  ) {}

  /**
   * Opens a session for the persona. The returned `token` is the only copy: hand it to
   * the client; it cannot be read back.
   *
   * `mintedBy`, the identity that mints it, is recorded with it. Minting never changes
   * the persona: its roles are set by {@link PersonaRecords.setRoles} alone.
   *
   * @throws AppError `invalid_argument` for a bad id, `mintedBy` or `ttlMs` (default
   *   {@link DEFAULT_SESSION_TTL_MS}, at most {@link MAX_SESSION_TTL_MS}); `not_found`
   *   when the persona does not exist.
   */
  async create(
    personaId: string,
    options: { readonly mintedBy: string; readonly ttlMs?: number },
  ): Promise<{ session: Session; token: string }> {
    const ownerId = checkRecordId(personaId, 'persona');
    const mintedBy = checkMinter(options.mintedBy);
    const ttlMs = checkTtlMs(options.ttlMs, 'session', DEFAULT_SESSION_TTL_MS, MAX_SESSION_TTL_MS);
    return this.ctx.db.exclusive(async () => {
      await this.personas.load(ownerId);
      const id = checkRecordId(this.ctx.newId(), 'session');
      const token = TOKEN_PREFIX + randomBytes(TOKEN_BYTES).toString('base64url');
      const tokenHash = hashToken(token).toString('hex');
      const now = this.ctx.nowMs();
      const stored: StoredSession = {
        id,
        personaId: ownerId,
        tokenHash,
        createdAtMs: now,
        expiresAtMs: now + ttlMs,
        revokedAtMs: null,
        mintedBy,
      };
      await this.ctx.db.write([
        putSession(stored),
        { type: 'put', key: sessionTokenKey(tokenHash), value: encodeValue(id) },
        { type: 'put', key: personaIndexKey(Tag.PersonaSession, ownerId, id), value: 'null' },
      ]);
      return { session: toSession(stored), token };
    });
  }

  /**
   * Checks a presented bearer token: it must name a session that is neither revoked nor
   * expired, of a persona that still exists.
   *
   * @throws AppError `unauthenticated` when the token is malformed, unknown, revoked or
   *   expired (the message says which and to sign in again; it never quotes the token);
   *   `data_loss` when the stored session is unreadable.
   */
  async authenticate(token: string): Promise<Authenticated> {
    if (typeof token !== 'string' || !TOKEN_PATTERN.test(token)) {
      throw unauthenticated(
        'the bearer token is malformed (expected "pcs_" and 43 more characters)',
      );
    }
    const presented = hashToken(token);
    // One snapshot: a prune or persona delete landing between the index read and the
    // record read must not look like a corrupt index.
    return this.ctx.db.snapshot(async (reader) => {
      const indexText = await reader.get(sessionTokenKey(presented.toString('hex')));
      if (indexText === undefined) {
        throw unauthenticated(
          'the bearer token is unknown (never issued, or its persona was deleted)',
        );
      }
      const sessionId = decodeValue(idSchema, indexText, 'session-token:(a token hash)');
      const stored = await this.find(sessionId, reader);
      // The index is a lookup aid; the session record is the authority. Compare in constant
      // time so the answer's timing says nothing about how much of a hash matched.
      if (
        stored === undefined ||
        !timingSafeEqual(Buffer.from(stored.tokenHash, 'hex'), presented)
      ) {
        throw new AppError(
          'data_loss',
          `the token index points at session ${sessionId}, which does not hold that token; ` +
            'restore the state volume from a backup',
          { details: { record: 'session', sessionId } },
        );
      }
      const details = { record: 'session', sessionId, personaId: stored.personaId };
      if (stored.revokedAtMs !== null) {
        throw unauthenticated(
          `session ${sessionId} was revoked at ${iso(stored.revokedAtMs)}`,
          details,
        );
      }
      if (this.ctx.nowMs() >= stored.expiresAtMs) {
        throw unauthenticated(
          `session ${sessionId} expired at ${iso(stored.expiresAtMs)}`,
          details,
        );
      }
      const persona = await this.personas.find(stored.personaId, reader);
      if (persona === undefined) {
        throw unauthenticated(`the persona of session ${sessionId} no longer exists`, details);
      }
      return { session: toSession(stored), persona: toPersona(persona) };
    });
  }

  /**
   * The session `sessionId`.
   *
   * @throws AppError `invalid_argument`; `not_found`; `data_loss`.
   */
  async get(sessionId: string): Promise<Session> {
    return toSession(await this.load(checkRecordId(sessionId, 'session')));
  }

  /**
   * Revokes the session: its token stops working at once. Revoking a revoked session
   * changes nothing.
   *
   * @throws AppError `invalid_argument`; `not_found`.
   */
  async revoke(sessionId: string): Promise<Session> {
    const id = checkRecordId(sessionId, 'session');
    return this.ctx.db.exclusive(async () => {
      const stored = await this.load(id);
      if (stored.revokedAtMs !== null) return toSession(stored);
      // The token index stays, so a later lookup can say "revoked" rather than "unknown".
      const next: StoredSession = { ...stored, revokedAtMs: this.ctx.nowMs() };
      await this.ctx.db.write([putSession(next)]);
      return toSession(next);
    });
  }

  /**
   * The persona's sessions (live, expired and revoked) in id order.
   *
   * @throws AppError `invalid_argument`; `not_found` when the persona does not exist.
   */
  async listByPersona(personaId: string): Promise<Session[]> {
    const ownerId = checkRecordId(personaId, 'persona');
    return this.ctx.db.snapshot(async (reader) => {
      await this.personas.load(ownerId, reader);
      const prefix = personaIndexPrefix(Tag.PersonaSession, ownerId);
      const sessions: Session[] = [];
      for (const [key] of await reader.scan(prefix)) {
        sessions.push(toSession(await this.load(key.slice(prefix.length), reader)));
      }
      return sessions;
    });
  }

  /**
   * Deletes sessions that expired or were revoked before `beforeMs` (default: now), with
   * their index entries; returns how many. Run it now and then: expired sessions keep
   * answering "expired" until they are pruned, then "unknown".
   */
  async prune(beforeMs?: number): Promise<number> {
    return this.ctx.db.exclusive(async () => {
      const cutoff = beforeMs ?? this.ctx.nowMs();
      const ops: RecordOp[] = [];
      for (const [key, text] of await this.ctx.db.scan(Tag.Session)) {
        const stored = decodeValue(sessionSchema, text, key);
        const endedAtMs = Math.min(stored.expiresAtMs, stored.revokedAtMs ?? Infinity);
        if (endedAtMs >= cutoff) continue;
        ops.push(
          { type: 'del', key },
          { type: 'del', key: sessionTokenKey(stored.tokenHash) },
          { type: 'del', key: personaIndexKey(Tag.PersonaSession, stored.personaId, stored.id) },
        );
      }
      await this.ctx.db.write(ops);
      return ops.length / 3;
    });
  }

  private async find(
    sessionId: string,
    reader: RecordReader = this.ctx.db,
  ): Promise<StoredSession | undefined> {
    const key = sessionKey(sessionId);
    const text = await reader.get(key);
    return text === undefined ? undefined : decodeValue(sessionSchema, text, key);
  }

  private async load(
    sessionId: string,
    reader: RecordReader = this.ctx.db,
  ): Promise<StoredSession> {
    const stored = await this.find(sessionId, reader);
    if (stored !== undefined) return stored;
    throw new AppError('not_found', `session ${sessionId} does not exist; check the id`, {
      details: { record: 'session', sessionId },
    });
  }
}

function hashToken(token: string): Buffer {
  return createHash('sha256').update(token, 'utf8').digest();
}

function putSession(stored: StoredSession): RecordOp {
  return { type: 'put', key: sessionKey(stored.id), value: encodeValue(stored) };
}

function toSession(stored: StoredSession): Session {
  return {
    id: stored.id,
    personaId: stored.personaId,
    createdAtMs: stored.createdAtMs,
    expiresAtMs: stored.expiresAtMs,
    revokedAtMs: stored.revokedAtMs,
    mintedBy: stored.mintedBy,
  };
}

/**
 * Who mints: an identity, required so that every session says who opened it.
 *
 * @throws AppError `invalid_argument`.
 */
function checkMinter(value: unknown): string {
  if (value === undefined || value === '') {
    throw new AppError(
      'invalid_argument',
      'a session needs mintedBy, the identity that mints it (provider:external_id)',
      { details: { record: 'session', field: 'mintedBy' } },
    );
  }
  return checkIdentity(value);
}

function unauthenticated(
  problem: string,
  details: Readonly<Record<string, string>> = { record: 'session' },
): AppError {
  return new AppError('unauthenticated', `${problem}; sign in again to get a new token`, {
    details,
  });
}

function iso(ms: number): string {
  return new Date(ms).toISOString();
}
