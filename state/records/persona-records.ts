import { AppError } from '../../common/errors';
import type { RecordContext } from './record-context';
import type { RecordOp, RecordReader } from './record-db';
import {
  checkExpectedVersion,
  checkIdentity,
  checkLimit,
  checkName,
  checkRecordId,
  quoteValue,
} from './record-input';
import { identityKey, personaKey, Tag } from './record-keys';
import { personaSchema, type StoredPersona } from './record-schemas';
import { Role } from '../../common/persona-roles';
import { decodeValue, encodeValue } from './record-values';
import {
  checkRoles,
  checkServiceAccountAdmin,
  checkSetter,
  checkVersion,
  indexMismatch,
} from './persona-checks';
import { ownedRecordDeletions } from './persona-deletion';
import { identityOwner, putIdentity, requireFreeIdentity } from './identity-index';

/** Most identities one persona may link; a bound keeps the record small. */
export const MAX_IDENTITIES_PER_PERSONA = 64;

/**
 * A persona: the person behind one or more identities, with roles that decide what it may
 * do. `version` starts at 1 and grows by one on every change; pass it back as
 * `expectedVersion` to change only what you read.
 */
export interface Persona {
  readonly id: string;
  readonly displayName: string;
  /** Linked identities, sorted. An identity links to at most one persona. */
  readonly identities: readonly string[];
  /** In the order of {@link Role}, without repeats. */
  readonly roles: readonly Role[];
  readonly version: number;
  readonly createdAtMs: number;
  readonly updatedAtMs: number;
  /** The identity that last set the roles ({@link PersonaRecords.setRoles}), or null. */
  readonly rolesSetBy: string | null;
  /** When it did, or null. */
  readonly rolesSetAtMs: number | null;
}

/** Input of {@link PersonaRecords.create}. */
export interface NewPersona {
  readonly displayName: string;
  /** @default [Role.Member] */
  readonly roles?: readonly Role[];
  /** Identities to link at once; each must be free. @default [] */
  readonly identities?: readonly string[];
  /** The identity giving the roles, recorded as `rolesSetBy` (with the time); @default none */
  readonly rolesSetBy?: string;
}

/** Optimistic concurrency for a change: omit `expectedVersion` to skip the check. */
export interface ChangeOptions {
  readonly expectedVersion?: number;
}

/** Options of {@link PersonaRecords.setRoles}: who sets them is recorded. */
export interface SetRolesOptions extends ChangeOptions {
  /** The identity that sets the roles. */
  readonly setBy: string;
}

/**
 * Persona records and the identity index. Every change is one synced batch that also
 * updates `identity:` entries, under the records' single-writer section, so two callers
 * linking the same identity cannot both succeed.
 */
export class PersonaRecords {
  constructor(private readonly ctx: RecordContext) {}

  /**
   * Creates a persona, linking `identities` in the same batch.
   *
   * @throws AppError `invalid_argument` for a bad display name, role or identity, or
   *   repeated identities; `already_exists` when an identity is linked to another persona;
   *   `resource_exhausted` for more than {@link MAX_IDENTITIES_PER_PERSONA} identities.
   */
  async create(input: NewPersona): Promise<Persona> {
    const displayName = checkName(input.displayName, 'persona', 'displayName');
    const roles = checkRoles(input.roles ?? [Role.Member]);
    const identities = (input.identities ?? []).map(checkIdentity);
    const unique = [...new Set(identities)].sort();
    if (unique.length !== identities.length) {
      throw new AppError(
        'invalid_argument',
        'persona identities repeat an identity; list each identity once',
        { details: { record: 'persona', field: 'identities' } },
      );
    }
    checkIdentityCount(unique.length, 'new persona');
    checkServiceAccountAdmin(unique, roles, 'a new persona');
    const rolesSetBy = input.rolesSetBy === undefined ? null : checkSetter(input.rolesSetBy);
    return this.ctx.db.exclusive(async () => {
      const id = checkRecordId(this.ctx.newId(), 'persona');
      for (const identity of unique) await this.requireFree(identity, id);
      const now = this.ctx.nowMs();
      const persona: StoredPersona = {
        id,
        displayName,
        identities: unique,
        roles,
        version: 1,
        createdAtMs: now,
        updatedAtMs: now,
        rolesSetBy,
        rolesSetAtMs: rolesSetBy === null ? null : now,
      };
      await this.ctx.db.write([
        putPersona(persona),
        ...unique.map((identity) => putIdentity(identity, id)),
      ]);
      return toPersona(persona);
    });
  }

  /**
   * The persona `personaId`.
   *
   * @throws AppError `invalid_argument` for a malformed id; `not_found` when there is no
   *   such persona; `data_loss` when its record is unreadable.
   */
  async get(personaId: string): Promise<Persona> {
    return toPersona(await this.load(checkRecordId(personaId, 'persona')));
  }

  /**
   * The persona `identity` is linked to, or `undefined` when it is linked to none.
   *
   * @throws AppError `invalid_argument` for a malformed identity; `data_loss` when the
   *   index and the persona disagree.
   */
  async findByIdentity(identity: string): Promise<Persona | undefined> {
    const checked = checkIdentity(identity);
    return this.ctx.db.snapshot(async (reader) => {
      const personaId = await identityOwner(reader, checked);
      if (personaId === undefined) return undefined;
      const persona = await this.find(personaId, reader);
      if (persona?.identities.includes(checked) !== true) throw indexMismatch(checked, personaId);
      return toPersona(persona);
    });
  }

  /**
   * Personas in id order: at most `limit` (default 100, at most 1000), after the id
   * `after` when given (pass the last id of a page to get the next).
   *
   * @throws AppError `invalid_argument` for a bad `after` or `limit`.
   */
  async list(options: { after?: string; limit?: number } = {}): Promise<Persona[]> {
    const limit = checkLimit(options.limit);
    const after = options.after === undefined ? undefined : checkRecordId(options.after, 'persona');
    const entries = await this.ctx.db.scan(Tag.Persona, {
      ...(after === undefined ? {} : { after }),
      limit,
    });
    return entries.map(([key, value]) => toPersona(decodeValue(personaSchema, value, key)));
  }

  /**
   * Links `identity` to the persona. Linking an identity the persona already holds
   * changes nothing and returns the persona as it is.
   *
   * @throws AppError `invalid_argument`; `not_found`; `conflict` (details: `version`) when
   *   `expectedVersion` is not the current version; `already_exists` (details:
   *   `linkedPersonaId`) when the identity is linked to another persona;
   *   `resource_exhausted` beyond {@link MAX_IDENTITIES_PER_PERSONA}.
   */
  async linkIdentity(
    personaId: string,
    identity: string,
    options: ChangeOptions = {},
  ): Promise<Persona> {
    const id = checkRecordId(personaId, 'persona');
    const checked = checkIdentity(identity);
    const expected = checkExpectedVersion(options.expectedVersion, 'persona');
    return this.ctx.db.exclusive(async () => {
      const persona = await this.load(id);
      checkVersion(persona, expected);
      const ops = await this.linkOps(persona, checked);
      if (ops === undefined) return toPersona(persona);
      await this.ctx.db.write(ops.ops);
      return toPersona(ops.persona);
    });
  }

  /**
   * Unlinks `identity` from the persona.
   *
   * @throws AppError `invalid_argument`; `not_found` when the persona does not exist or
   *   does not hold `identity`; `conflict` on a stale `expectedVersion`.
   */
  async unlinkIdentity(
    personaId: string,
    identity: string,
    options: ChangeOptions = {},
  ): Promise<Persona> {
    const id = checkRecordId(personaId, 'persona');
    const checked = checkIdentity(identity);
    const expected = checkExpectedVersion(options.expectedVersion, 'persona');
    return this.ctx.db.exclusive(async () => {
      const persona = await this.load(id);
      checkVersion(persona, expected);
      if (!persona.identities.includes(checked)) {
        throw new AppError(
          'not_found',
          `identity ${quoteValue(checked)} is not linked to persona ${id}; nothing to unlink`,
          { details: { record: 'persona', personaId: id, identity: checked } },
        );
      }
      const next = this.bump(persona, {
        identities: persona.identities.filter((held) => held !== checked),
      });
      await this.ctx.db.write([putPersona(next), { type: 'del', key: identityKey(checked) }]);
      return toPersona(next);
    });
  }

  /**
   * Replaces the persona's roles (an empty list leaves it with none), recording who set
   * them (`setBy`) and when.
   *
   * @throws AppError `invalid_argument` for an unknown role or a bad `setBy`; `not_found`;
   *   `conflict` on a stale `expectedVersion`; `failed_precondition` for `admin` on a
   *   persona that links a ServiceAccount.
   */
  async setRoles(
    personaId: string,
    roles: readonly Role[],
    options: SetRolesOptions,
  ): Promise<Persona> {
    const id = checkRecordId(personaId, 'persona');
    const checked = checkRoles(roles);
    const setBy = checkSetter(options.setBy);
    const expected = checkExpectedVersion(options.expectedVersion, 'persona');
    return this.ctx.db.exclusive(async () => {
      const persona = await this.load(id);
      checkVersion(persona, expected);
      checkServiceAccountAdmin(persona.identities, checked, `persona ${id}`);
      const next = this.bump(persona, {
        roles: checked,
        rolesSetBy: setBy,
        rolesSetAtMs: this.ctx.nowMs(),
      });
      await this.ctx.db.write([putPersona(next)]);
      return toPersona(next);
    });
  }

  /**
   * Changes the persona's display name.
   *
   * @throws AppError `invalid_argument`; `not_found`; `conflict` on a stale
   *   `expectedVersion`.
   */
  async rename(
    personaId: string,
    displayName: string,
    options: ChangeOptions = {},
  ): Promise<Persona> {
    const id = checkRecordId(personaId, 'persona');
    const name = checkName(displayName, 'persona', 'displayName');
    const expected = checkExpectedVersion(options.expectedVersion, 'persona');
    return this.ctx.db.exclusive(async () => {
      const persona = await this.load(id);
      checkVersion(persona, expected);
      const next = this.bump(persona, { displayName: name });
      await this.ctx.db.write([putPersona(next)]);
      return toPersona(next);
    });
  }

  /**
   * Deletes the persona and, in the same batch, everything that hangs off it: its
   * identity links, sessions (so its tokens stop working at once), credentials and
   * ceremonies.
   *
   * @throws AppError `invalid_argument`; `not_found`; `conflict` on a stale
   *   `expectedVersion`.
   */
  async delete(personaId: string, options: ChangeOptions = {}): Promise<void> {
    const id = checkRecordId(personaId, 'persona');
    const expected = checkExpectedVersion(options.expectedVersion, 'persona');
    await this.ctx.db.exclusive(async () => {
      const persona = await this.load(id);
      checkVersion(persona, expected);
      const ops: RecordOp[] = [
        { type: 'del', key: personaKey(id) },
        ...persona.identities.map((identity): RecordOp => ({
          type: 'del',
          key: identityKey(identity),
        })),
        ...(await ownedRecordDeletions(this.ctx, id)),
      ];
      await this.ctx.db.write(ops);
    });
  }

  // --- For the other record kinds; callers hold the exclusive section. ---

  /**
   * The stored persona `personaId` (already checked), read through `reader` (default: the
   * live database).
   *
   * @throws AppError `not_found`; `data_loss`.
   */
  async load(personaId: string, reader: RecordReader = this.ctx.db): Promise<StoredPersona> {
    const persona = await this.find(personaId, reader);
    if (persona !== undefined) return persona;
    throw new AppError(
      'not_found',
      `persona ${personaId} does not exist; create it first or check the id`,
      { details: { record: 'persona', personaId } },
    );
  }

  /**
   * The stored persona `personaId` (already checked), or `undefined`.
   *
   * @throws AppError `data_loss`.
   */
  async find(
    personaId: string,
    reader: RecordReader = this.ctx.db,
  ): Promise<StoredPersona | undefined> {
    const key = personaKey(personaId);
    const text = await reader.get(key);
    return text === undefined ? undefined : decodeValue(personaSchema, text, key);
  }

  /**
   * The ops that link `identity` (already checked) to `persona`, and the persona after
   * them; `undefined` when the persona already holds it.
   *
   * @throws AppError `already_exists` when another persona holds it; `resource_exhausted`.
   */
  async linkOps(
    persona: StoredPersona,
    identity: string,
  ): Promise<{ ops: RecordOp[]; persona: StoredPersona } | undefined> {
    if (persona.identities.includes(identity)) {
      const owner = await identityOwner(this.ctx.db, identity);
      if (owner !== persona.id) throw indexMismatch(identity, persona.id);
      return undefined;
    }
    await this.requireFree(identity, persona.id);
    checkIdentityCount(persona.identities.length + 1, `persona ${persona.id}`);
    checkServiceAccountAdmin([identity], persona.roles, `persona ${persona.id}`);
    const next = this.bump(persona, { identities: [...persona.identities, identity].sort() });
    return { ops: [putPersona(next), putIdentity(identity, persona.id)], persona: next };
  }

  /**
   * Throws unless no persona holds `identity`.
   *
   * @throws AppError `already_exists` naming the holder in details.
   */
  async requireFree(identity: string, forPersonaId: string): Promise<void> {
    await requireFreeIdentity(this.ctx.db, identity, forPersonaId);
  }

  private bump(persona: StoredPersona, change: Partial<StoredPersona>): StoredPersona {
    return {
      ...persona,
      ...change,
      version: persona.version + 1,
      updatedAtMs: this.ctx.nowMs(),
    };
  }
}

/** The op that stores `persona`. */
export function putPersona(persona: StoredPersona): RecordOp {
  return { type: 'put', key: personaKey(persona.id), value: encodeValue(persona) };
}

/** A copy for callers: stored arrays are never shared. */
export function toPersona(stored: StoredPersona): Persona {
  return { ...stored, identities: [...stored.identities], roles: [...stored.roles] };
}
function checkIdentityCount(count: number, what: string): void {
  if (count <= MAX_IDENTITIES_PER_PERSONA) return;
  throw new AppError(
    'resource_exhausted',
    `${what} would hold ${String(count)} identities, more than the ` +
      `${String(MAX_IDENTITIES_PER_PERSONA)} allowed; unlink some first`,
    { details: { record: 'persona', identities: count, max: MAX_IDENTITIES_PER_PERSONA } },
  );
}
