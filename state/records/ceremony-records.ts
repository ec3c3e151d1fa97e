import { createHmac, randomInt, timingSafeEqual } from 'node:crypto';

import { AppError } from '../../common/errors';
import { toPersona, type Persona, type PersonaRecords } from './persona-records';
import type { RecordContext } from './record-context';
import type { RecordOp, RecordReader } from './record-db';
import { checkIdentity, checkRecordId, checkTtlMs, quoteValue } from './record-input';
import { ceremonyKey, personaIndexKey, personaIndexPrefix, Tag } from './record-keys';
import { CeremonyKind, ceremonySchema, CeremonyState, type StoredCeremony } from './record-schemas';
import { decodeValue, encodeValue } from './record-values';

/** Default time to enter a code: 10 minutes. */
export const DEFAULT_CEREMONY_TTL_MS = 10 * 60 * 1000;
/** Longest a ceremony may stay open: 1 hour. */
export const MAX_CEREMONY_TTL_MS = 60 * 60 * 1000;
/** Default number of tries before a ceremony fails. */
export const DEFAULT_CEREMONY_MAX_ATTEMPTS = 5;
/** Most tries a ceremony may allow. */
export const MAX_CEREMONY_ATTEMPTS = 10;

/**
 * Codes are 8 decimal digits (easy to type from a message; 10^8 values). With at most
 * {@link MAX_CEREMONY_ATTEMPTS} tries, online guessing succeeds with probability 10^-7;
 * offline guessing needs the records key because the stored value is an HMAC.
 */
const CODE_DIGITS = 8;
const CODE_PATTERN = /^[0-9]{8}$/;
const CODE_DOMAIN = 'polychrome/records/ceremony-code/v1';

/** A ceremony as callers see it: never the code, never its MAC. */
export interface Ceremony {
  readonly id: string;
  readonly kind: CeremonyKind;
  readonly personaId: string;
  readonly identity: string;
  /**
   * A pending ceremony past its expiry reads as `expired` even before anyone tries to
   * complete it (reads never write; the next `complete` records it).
   */
  readonly state: CeremonyState;
  /** Completion attempts so far, right or wrong. */
  readonly attempts: number;
  readonly maxAttempts: number;
  readonly createdAtMs: number;
  readonly expiresAtMs: number;
  /** When it left `pending`, or null. */
  readonly endedAtMs: number | null;
  /** Why it failed or expired, or null. */
  readonly failureReason: string | null;
}

/** Input of {@link CeremonyRecords.start}. */
export interface NewCeremony {
  readonly kind: CeremonyKind;
  readonly personaId: string;
  /** The identity the ceremony is about (for `link-identity`, the one to link). */
  readonly identity: string;
  /** @default DEFAULT_CEREMONY_TTL_MS */
  readonly ttlMs?: number;
  /** @default DEFAULT_CEREMONY_MAX_ATTEMPTS */
  readonly maxAttempts?: number;
}

const kinds: readonly string[] = Object.values(CeremonyKind);

/**
 * Short multi-step flows proven with a one-time code. Today: `link-identity`, where the
 * code goes to the identity (by the edge, e.g. as a chat message) and whoever types it
 * back proves control of it; completing links the identity in the same batch that marks
 * the ceremony completed.
 */
export class CeremonyRecords {
  constructor(
    private readonly ctx: RecordContext,
    private readonly personas: PersonaRecords,
  ) {}

  /**
   * Starts a ceremony. The returned `code` is the only copy: deliver it to the identity;
   * it cannot be read back.
   *
   * @throws AppError `invalid_argument` for a bad kind, id, identity, `ttlMs` or
   *   `maxAttempts`; `not_found` when the persona does not exist; `already_exists` when
   *   the identity is linked to another persona; `failed_precondition` when the persona
   *   already holds it.
   */
  async start(input: NewCeremony): Promise<{ ceremony: Ceremony; code: string }> {
    const kind = checkKind(input.kind);
    const personaId = checkRecordId(input.personaId, 'persona');
    const identity = checkIdentity(input.identity);
    const ttlMs = checkTtlMs(input.ttlMs, 'ceremony', DEFAULT_CEREMONY_TTL_MS, MAX_CEREMONY_TTL_MS);
    const maxAttempts = checkMaxAttempts(input.maxAttempts);
    return this.ctx.db.exclusive(async () => {
      const persona = await this.personas.load(personaId);
      if (persona.identities.includes(identity)) {
        throw new AppError(
          'failed_precondition',
          `identity ${quoteValue(identity)} is already linked to persona ${personaId}; there ` +
            'is nothing to prove',
          { details: { record: 'ceremony', personaId, identity } },
        );
      }
      await this.personas.requireFree(identity, personaId);
      const id = checkRecordId(this.ctx.newId(), 'ceremony');
      const code = String(randomInt(0, 10 ** CODE_DIGITS)).padStart(CODE_DIGITS, '0');
      const now = this.ctx.nowMs();
      const stored: StoredCeremony = {
        id,
        kind,
        personaId,
        identity,
        state: CeremonyState.Pending,
        codeMac: this.codeMac(id, code).toString('hex'),
        attempts: 0,
        maxAttempts,
        createdAtMs: now,
        expiresAtMs: now + ttlMs,
        endedAtMs: null,
        failureReason: null,
      };
      await this.ctx.db.write([
        putCeremony(stored),
        { type: 'put', key: personaIndexKey(Tag.PersonaCeremony, personaId, id), value: 'null' },
      ]);
      return { ceremony: this.toCeremony(stored), code };
    });
  }

  /**
   * Completes a pending ceremony with the code. Every call with a well-formed code counts
   * as an attempt; the attempt that uses up `maxAttempts` with a wrong code fails the
   * ceremony. A call after expiry marks it `expired`. On success a `link-identity`
   * ceremony links its identity in the same batch.
   *
   * @throws AppError `invalid_argument` for a bad id or a code that is not 8 digits (not
   *   counted); `not_found`; `permission_denied` for a wrong code (details:
   *   `attemptsLeft`; at 0 the ceremony has failed); `failed_precondition` when the
   *   ceremony has expired or is no longer pending; `already_exists` when the identity
   *   was linked to another persona meanwhile (the ceremony fails).
   */
  async complete(
    ceremonyId: string,
    code: string,
  ): Promise<{ ceremony: Ceremony; persona: Persona }> {
    const id = checkRecordId(ceremonyId, 'ceremony');
    if (typeof code !== 'string' || !CODE_PATTERN.test(code)) {
      throw new AppError(
        'invalid_argument',
        `the code for ceremony ${id} must be ${String(CODE_DIGITS)} digits; check what was typed`,
        { details: { record: 'ceremony', ceremonyId: id, field: 'code' } },
      );
    }
    return this.ctx.db.exclusive(async () => {
      const stored = await this.load(id);
      const details = { record: 'ceremony', ceremonyId: id, personaId: stored.personaId };
      if (stored.state !== CeremonyState.Pending) {
        throw new AppError(
          'failed_precondition',
          `ceremony ${id} is ${stored.state}, not pending; start a new ceremony`,
          { details: { ...details, state: stored.state } },
        );
      }
      const now = this.ctx.nowMs();
      if (now >= stored.expiresAtMs) {
        await this.ctx.db.write([
          putCeremony(end(stored, CeremonyState.Expired, now, 'expired before completion')),
        ]);
        throw new AppError(
          'failed_precondition',
          `ceremony ${id} expired at ${new Date(stored.expiresAtMs).toISOString()}; start a ` +
            'new ceremony to get a new code',
          { details: { ...details, state: CeremonyState.Expired } },
        );
      }
      const attempts = stored.attempts + 1;
      const matches = timingSafeEqual(Buffer.from(stored.codeMac, 'hex'), this.codeMac(id, code));
      if (!matches) {
        const attemptsLeft = stored.maxAttempts - attempts;
        const next =
          attemptsLeft > 0
            ? { ...stored, attempts }
            : end({ ...stored, attempts }, CeremonyState.Failed, now, 'too many wrong codes');
        await this.ctx.db.write([putCeremony(next)]);
        throw new AppError(
          'permission_denied',
          attemptsLeft > 0
            ? `the code for ceremony ${id} is wrong; ${String(attemptsLeft)} attempt(s) left`
            : `the code for ceremony ${id} is wrong and that was the last of ` +
                `${String(stored.maxAttempts)} attempts; the ceremony has failed, start a new one`,
          { details: { ...details, attemptsLeft, state: next.state } },
        );
      }
      const persona = await this.personas.load(stored.personaId);
      let link: Awaited<ReturnType<PersonaRecords['linkOps']>>;
      try {
        link = await this.personas.linkOps(persona, stored.identity);
      } catch (error) {
        // The code was right but the link cannot be made (taken meanwhile, or the persona
        // is full): the ceremony cannot succeed any more, so it fails for the record.
        const reason = error instanceof AppError ? error.code : 'internal';
        await this.ctx.db.write([
          putCeremony(
            end({ ...stored, attempts }, CeremonyState.Failed, now, `link failed: ${reason}`),
          ),
        ]);
        throw error;
      }
      const done = end({ ...stored, attempts }, CeremonyState.Completed, now, null);
      await this.ctx.db.write([putCeremony(done), ...(link?.ops ?? [])]);
      return { ceremony: this.toCeremony(done), persona: toPersona(link?.persona ?? persona) };
    });
  }

  /**
   * The ceremony `ceremonyId`.
   *
   * @throws AppError `invalid_argument`; `not_found`; `data_loss`.
   */
  async get(ceremonyId: string): Promise<Ceremony> {
    return this.toCeremony(await this.load(checkRecordId(ceremonyId, 'ceremony')));
  }

  /**
   * The persona's ceremonies in id order.
   *
   * @throws AppError `invalid_argument`; `not_found` when the persona does not exist.
   */
  async listByPersona(personaId: string): Promise<Ceremony[]> {
    const ownerId = checkRecordId(personaId, 'persona');
    return this.ctx.db.snapshot(async (reader) => {
      await this.personas.load(ownerId, reader);
      const prefix = personaIndexPrefix(Tag.PersonaCeremony, ownerId);
      const ceremonies: Ceremony[] = [];
      for (const [key] of await reader.scan(prefix)) {
        ceremonies.push(this.toCeremony(await this.load(key.slice(prefix.length), reader)));
      }
      return ceremonies;
    });
  }

  /** HMAC of `code`, bound to the ceremony id so a MAC is worthless for any other one. */
  private codeMac(ceremonyId: string, code: string): Buffer {
    return createHmac('sha256', this.ctx.key.codeKey)
      .update(`${CODE_DOMAIN}\u0000${ceremonyId}\u0000${code}`, 'utf8')
      .digest();
  }

  private async load(
    ceremonyId: string,
    reader: RecordReader = this.ctx.db,
  ): Promise<StoredCeremony> {
    const key = ceremonyKey(ceremonyId);
    const text = await reader.get(key);
    if (text === undefined) {
      throw new AppError(
        'not_found',
        `ceremony ${ceremonyId} does not exist (or its persona was deleted); start a new one`,
        { details: { record: 'ceremony', ceremonyId } },
      );
    }
    return decodeValue(ceremonySchema, text, key);
  }

  private toCeremony(stored: StoredCeremony): Ceremony {
    const lapsed = stored.state === CeremonyState.Pending && this.ctx.nowMs() >= stored.expiresAtMs;
    return {
      id: stored.id,
      kind: stored.kind,
      personaId: stored.personaId,
      identity: stored.identity,
      state: lapsed ? CeremonyState.Expired : stored.state,
      attempts: stored.attempts,
      maxAttempts: stored.maxAttempts,
      createdAtMs: stored.createdAtMs,
      expiresAtMs: stored.expiresAtMs,
      endedAtMs: stored.endedAtMs,
      failureReason: stored.failureReason,
    };
  }
}

function end(
  stored: StoredCeremony,
  state: CeremonyState,
  nowMs: number,
  failureReason: string | null,
): StoredCeremony {
  return { ...stored, state, endedAtMs: nowMs, failureReason };
}

function putCeremony(stored: StoredCeremony): RecordOp {
  return { type: 'put', key: ceremonyKey(stored.id), value: encodeValue(stored) };
}

function checkKind(value: unknown): CeremonyKind {
  for (const kind of Object.values(CeremonyKind)) if (kind === value) return kind;
  throw new AppError(
    'invalid_argument',
    `ceremony kind ${quoteValue(value)} is unknown; kinds are ${kinds.join(', ')}`,
    { details: { record: 'ceremony', field: 'kind' } },
  );
}

function checkMaxAttempts(value: unknown): number {
  if (value === undefined) return DEFAULT_CEREMONY_MAX_ATTEMPTS;
  if (
    typeof value === 'number' &&
    Number.isSafeInteger(value) &&
    value >= 1 &&
    value <= MAX_CEREMONY_ATTEMPTS
  ) {
    return value;
  }
  throw new AppError(
    'invalid_argument',
    `ceremony maxAttempts ${quoteValue(value)} is not valid: give a whole number from 1 to ` +
      `${String(MAX_CEREMONY_ATTEMPTS)}, or omit it for ${String(DEFAULT_CEREMONY_MAX_ATTEMPTS)}`,
    { details: { record: 'ceremony', field: 'maxAttempts' } },
  );
}
