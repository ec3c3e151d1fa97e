import { AppError } from '../../common/errors';
import { credentialAad, openSealed, sealSecret } from './credential-seal';
import type { PersonaRecords } from './persona-records';
import type { RecordContext } from './record-context';
import type { RecordOp, RecordReader } from './record-db';
import { checkKind, checkName, checkRecordId } from './record-input';
import { credentialKey, personaIndexKey, personaIndexPrefix, Tag } from './record-keys';
import { credentialSchema, type StoredCredential } from './record-schemas';
import { decodeValue, encodeValue } from './record-values';

/** Largest secret value: 64 KiB (API keys and tokens are far smaller). */
export const MAX_CREDENTIAL_SECRET_BYTES = 64 * 1024;

/** A credential's metadata. The secret is only ever returned by `reveal`. */
export interface Credential {
  readonly id: string;
  readonly personaId: string;
  /** What sort of secret, as a slug: `api-key`, `oauth-token`, ... */
  readonly kind: string;
  /** A human name, e.g. "GitHub token for CI". */
  readonly label: string;
  readonly createdAtMs: number;
  /** Key id of the records key that sealed it (records-key.ts). */
  readonly keyId: string;
}

/** Input of {@link CredentialRecords.create}. */
export interface NewCredential {
  readonly personaId: string;
  readonly kind: string;
  readonly label: string;
  /** The secret: bytes, or text stored as UTF-8. */
  readonly secret: Uint8Array | string;
}

/**
 * Secrets a persona holds for tools. The value is sealed with AES-256-GCM under the
 * records key, bound to the credential id and persona (credential-seal.ts); metadata is
 * stored in the clear so it can be listed without the key. Credentials are immutable:
 * to rotate a secret, create a new credential and delete the old one.
 */
export class CredentialRecords {
  constructor(
    private readonly ctx: RecordContext,
    private readonly personas: PersonaRecords,
  ) {}

  /**
   * Stores a credential for the persona.
   *
   * @throws AppError `invalid_argument` for a bad id, kind or label, or a secret that is
   *   empty or larger than {@link MAX_CREDENTIAL_SECRET_BYTES}; `not_found` when the
   *   persona does not exist.
   */
  async create(input: NewCredential): Promise<Credential> {
    const personaId = checkRecordId(input.personaId, 'persona');
    const kind = checkKind(input.kind);
    const label = checkName(input.label, 'credential', 'label');
    const secret = checkSecret(input.secret);
    return this.ctx.db.exclusive(async () => {
      await this.personas.load(personaId);
      const id = checkRecordId(this.ctx.newId(), 'credential');
      const stored: StoredCredential = {
        id,
        personaId,
        kind,
        label,
        createdAtMs: this.ctx.nowMs(),
        keyId: this.ctx.key.keyId,
        sealed: sealSecret(this.ctx.key.sealKey, secret, credentialAad(id, personaId)),
      };
      await this.ctx.db.write([
        { type: 'put', key: credentialKey(id), value: encodeValue(stored) },
        { type: 'put', key: personaIndexKey(Tag.PersonaCredential, personaId, id), value: 'null' },
      ]);
      return toCredential(stored);
    });
  }

  /**
   * The credential's metadata.
   *
   * @throws AppError `invalid_argument`; `not_found`; `data_loss`.
   */
  async get(credentialId: string): Promise<Credential> {
    return toCredential(await this.load(checkRecordId(credentialId, 'credential')));
  }

  /**
   * The credential's metadata and its secret in the clear. The only way to read a secret:
   * call it where the secret is needed, and do not log the result.
   *
   * @throws AppError `invalid_argument`; `not_found`; `data_loss` when the sealed value was
   *   changed, or sealed under another records key (the message names both key ids).
   */
  async reveal(credentialId: string): Promise<{ credential: Credential; secret: Uint8Array }> {
    const id = checkRecordId(credentialId, 'credential');
    const stored = await this.load(id);
    const where = `credential ${id} of persona ${stored.personaId}`;
    if (stored.keyId !== this.ctx.key.keyId) {
      throw new AppError(
        'data_loss',
        `${where} was sealed under records key ${stored.keyId}, but this state plane holds ` +
          `key ${this.ctx.key.keyId}; mount the key it was sealed with, or store the ` +
          'credential again',
        {
          details: {
            record: 'credential',
            credentialId: id,
            keyId: stored.keyId,
            currentKeyId: this.ctx.key.keyId,
          },
        },
      );
    }
    const secret = openSealed(
      this.ctx.key.sealKey,
      stored.sealed,
      credentialAad(stored.id, stored.personaId),
      where,
    );
    return { credential: toCredential(stored), secret };
  }

  /**
   * The persona's credentials (metadata only) in id order.
   *
   * @throws AppError `invalid_argument`; `not_found` when the persona does not exist.
   */
  async listByPersona(personaId: string): Promise<Credential[]> {
    const ownerId = checkRecordId(personaId, 'persona');
    return this.ctx.db.snapshot(async (reader) => {
      await this.personas.load(ownerId, reader);
      const prefix = personaIndexPrefix(Tag.PersonaCredential, ownerId);
      const credentials: Credential[] = [];
      for (const [key] of await reader.scan(prefix)) {
        credentials.push(toCredential(await this.load(key.slice(prefix.length), reader)));
      }
      return credentials;
    });
  }

  /**
   * Deletes the credential and its index entry.
   *
   * @throws AppError `invalid_argument`; `not_found`.
   */
  async delete(credentialId: string): Promise<void> {
    const id = checkRecordId(credentialId, 'credential');
    await this.ctx.db.exclusive(async () => {
      const stored = await this.load(id);
      const ops: RecordOp[] = [
        { type: 'del', key: credentialKey(id) },
        { type: 'del', key: personaIndexKey(Tag.PersonaCredential, stored.personaId, id) },
      ];
      await this.ctx.db.write(ops);
    });
  }

  private async load(
    credentialId: string,
    reader: RecordReader = this.ctx.db,
  ): Promise<StoredCredential> {
    const key = credentialKey(credentialId);
    const text = await reader.get(key);
    if (text === undefined) {
      throw new AppError('not_found', `credential ${credentialId} does not exist; check the id`, {
        details: { record: 'credential', credentialId },
      });
    }
    return decodeValue(credentialSchema, text, key);
  }
}

function toCredential(stored: StoredCredential): Credential {
  return {
    id: stored.id,
    personaId: stored.personaId,
    kind: stored.kind,
    label: stored.label,
    createdAtMs: stored.createdAtMs,
    keyId: stored.keyId,
  };
}

function checkSecret(value: unknown): Uint8Array {
  const bytes =
    typeof value === 'string'
      ? new Uint8Array(Buffer.from(value, 'utf8'))
      : value instanceof Uint8Array
        ? value
        : undefined;
  if (bytes === undefined) {
    throw new AppError('invalid_argument', 'credential secret must be bytes or text', {
      details: { record: 'credential', field: 'secret' },
    });
  }
  if (bytes.length === 0 || bytes.length > MAX_CREDENTIAL_SECRET_BYTES) {
    throw new AppError(
      'invalid_argument',
      `credential secret is ${String(bytes.length)} bytes; give 1 to ` +
        `${String(MAX_CREDENTIAL_SECRET_BYTES)} bytes`,
      { details: { record: 'credential', field: 'secret', bytes: bytes.length } },
    );
  }
  return bytes;
}
