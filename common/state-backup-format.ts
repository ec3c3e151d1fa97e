import { createHash, type Hash } from 'node:crypto';

import { AppError } from './errors';

/**
 * The state plane's backup file (docs/state-plane.md, "Backup and restore"): every key and
 * value of the journal database and of the records database, as the state plane's `Backup`
 * RPC streamed them from one LevelDB snapshot each. `polychrome state backup` writes it,
 * `polychrome state restore` reads it; the state plane's RPC computes the same digest over
 * the same encoding, so the client checks what it received end to end. Pure (no I/O).
 *
 *   magic      "POLYCHROME-STATE-BACKUP\n" (24 bytes)
 *   version    u32 big-endian (1)
 *   entries    per entry: u8 database (1 journal, 2 records), u32 key length, key,
 *              u32 value length, value; journal entries first, each database in key order
 *   end        u8 0
 *   manifest   u32 length, then UTF-8 JSON {@link BackupManifest}
 *   trailer    "END-POLYCHROME-STATE-BACKUP\n"
 *
 * The manifest's `sha256` covers the entries' bytes exactly as laid out (the end byte
 * excluded). A file without its trailer was cut short; a digest or count that disagrees
 * means it changed after it was written: restore refuses both before writing anything.
 */

/** The first bytes of every backup file. */
export const BACKUP_MAGIC = Buffer.from('POLYCHROME-STATE-BACKUP\n', 'latin1');
/** The last bytes of a whole backup file. */
export const BACKUP_TRAILER = Buffer.from('END-POLYCHROME-STATE-BACKUP\n', 'latin1');
/** The format version this code writes and the only one it reads. */
export const BACKUP_FORMAT_VERSION = 1;
/** The manifest's `format` tag. */
export const BACKUP_FORMAT = 'polychrome-state-backup';

/** Which database an entry belongs to (its byte in the file, and the proto enum's number). */
export const BackupDatabase = { Journal: 1, Records: 2 } as const;
export type BackupDatabase = (typeof BackupDatabase)[keyof typeof BackupDatabase];

/** One key and value of one database. */
export interface BackupEntry {
  readonly database: BackupDatabase;
  readonly key: Uint8Array;
  readonly value: Uint8Array;
}

/** What the file says about itself, after the entries. */
export interface BackupManifest {
  readonly format: typeof BACKUP_FORMAT;
  readonly version: number;
  /** When the state plane took its snapshots (RFC 3339). */
  readonly takenAt: string;
  readonly journalEntries: number;
  readonly recordsEntries: number;
  /** SHA-256 of the entries' bytes, hex. */
  readonly sha256: string;
  /** The signing key ids the state plane held: restore needs those keys (or their successors). */
  readonly signingKeyIds: readonly string[];
}

/** The file's first bytes: magic and version. */
export function backupHeader(): Buffer {
  const version = Buffer.alloc(4);
  version.writeUInt32BE(BACKUP_FORMAT_VERSION);
  return Buffer.concat([BACKUP_MAGIC, version]);
}

/** One entry's bytes in the file (and in the digest). */
export function encodeBackupEntry(entry: BackupEntry): Buffer {
  const out = Buffer.allocUnsafe(9 + entry.key.length + entry.value.length);
  out.writeUInt8(entry.database, 0);
  out.writeUInt32BE(entry.key.length, 1);
  out.set(entry.key, 5);
  out.writeUInt32BE(entry.value.length, 5 + entry.key.length);
  out.set(entry.value, 9 + entry.key.length);
  return out;
}

/** The bytes after the entries: the end byte, the manifest, the trailer. */
export function backupFooter(manifest: BackupManifest): Buffer {
  const json = Buffer.from(JSON.stringify(manifest), 'utf8');
  const length = Buffer.alloc(4);
  length.writeUInt32BE(json.length);
  return Buffer.concat([Buffer.of(0), length, json, BACKUP_TRAILER]);
}

/** Counts and hashes entries as the file lays them out: the RPC and both CLI commands use it. */
export class BackupTally {
  private readonly hash: Hash = createHash('sha256');
  journalEntries = 0;
  recordsEntries = 0;

  /** Adds one entry; returns its encoding. */
  add(entry: BackupEntry): Buffer {
    const bytes = encodeBackupEntry(entry);
    this.hash.update(bytes);
    if (entry.database === BackupDatabase.Journal) this.journalEntries += 1;
    else this.recordsEntries += 1;
    return bytes;
  }

  /** The digest so far is final after this; call once. */
  digest(): Buffer {
    return this.hash.digest();
  }
}

/** A refused backup file: what is wrong, and what to do. */
function damaged(what: string, details: Record<string, unknown> = {}): AppError {
  return new AppError(
    'data_loss',
    `the backup file is not usable: ${what}; nothing was restored. Use another backup ` +
      '(take a new one with `polychrome state backup`), or copy this one again if a copy ' +
      'cut it short',
    { details: { reason: 'backup_damaged', ...details } },
  );
}

/** Reads exact byte counts from a stream of chunks. */
class ByteReader {
  private buffer: Buffer = Buffer.alloc(0);
  private offset = 0;
  private readonly source: AsyncIterator<Uint8Array>;
  /** Bytes consumed so far. */
  position = 0;

  constructor(chunks: AsyncIterable<Uint8Array>) {
    this.source = chunks[Symbol.asyncIterator]();
  }

  async take(n: number, what: string): Promise<Buffer> {
    while (this.buffer.length - this.offset < n) {
      const next = await this.source.next();
      if (next.done === true) {
        throw damaged(`it ends in the middle of ${what} at byte ${String(this.position)}`, {
          at: this.position,
        });
      }
      this.buffer = Buffer.concat([this.buffer.subarray(this.offset), next.value]);
      this.offset = 0;
    }
    const out = this.buffer.subarray(this.offset, this.offset + n);
    this.offset += n;
    this.position += n;
    return out;
  }

  async atEnd(): Promise<boolean> {
    while (this.buffer.length === this.offset) {
      const next = await this.source.next();
      if (next.done === true) return true;
      this.buffer = Buffer.from(next.value);
      this.offset = 0;
    }
    return false;
  }
}

async function readHeader(reader: ByteReader): Promise<void> {
  const magic = await reader.take(BACKUP_MAGIC.length, 'the header');
  if (!magic.equals(BACKUP_MAGIC)) {
    throw damaged('it is not a Polychrome state backup (its first bytes are not the format name)');
  }
  const version = (await reader.take(4, 'the header')).readUInt32BE(0);
  if (version !== BACKUP_FORMAT_VERSION) {
    throw damaged(
      `it is in format version ${String(version)}, and this polychrome reads version ` +
        `${String(BACKUP_FORMAT_VERSION)} only; restore it with the polychrome release that took it`,
      { version },
    );
  }
}

function parseManifest(bytes: Buffer): BackupManifest {
  let value: unknown;
  try {
    value = JSON.parse(bytes.toString('utf8'));
  } catch {
    throw damaged('its manifest is not JSON');
  }
  const m = value as Partial<BackupManifest> | null;
  const count = (n: unknown): boolean => Number.isSafeInteger(n) && (n as number) >= 0;
  if (
    m === null ||
    typeof m !== 'object' ||
    m.format !== BACKUP_FORMAT ||
    m.version !== BACKUP_FORMAT_VERSION ||
    typeof m.takenAt !== 'string' ||
    !count(m.journalEntries) ||
    !count(m.recordsEntries) ||
    typeof m.sha256 !== 'string' ||
    !Array.isArray(m.signingKeyIds)
  ) {
    throw damaged('its manifest lacks a field or has one of the wrong type');
  }
  return m as BackupManifest;
}

/**
 * Reads a backup file's bytes: yields every entry in order, and returns the manifest once
 * the end is reached and checked (trailer, counts, digest). Entries come before the checks
 * can pass: a caller that must not act on a damaged file reads it through once first.
 *
 * @throws AppError `data_loss` (`details.reason` `backup_damaged`) naming the problem: not
 *   a backup, another format version, cut short, a bad database byte, a manifest that
 *   does not parse, counts or a digest that disagree, bytes after the trailer.
 */
export async function* decodeBackup(
  chunks: AsyncIterable<Uint8Array>,
): AsyncGenerator<BackupEntry, BackupManifest> {
  const reader = new ByteReader(chunks);
  await readHeader(reader);
  const tally = new BackupTally();
  for (;;) {
    const database = (await reader.take(1, 'an entry'))[0];
    if (database === 0) break;
    if (database !== BackupDatabase.Journal && database !== BackupDatabase.Records) {
      throw damaged(`an entry at byte ${String(reader.position - 1)} names no database`);
    }
    const key = Buffer.from(
      await reader.take((await reader.take(4, 'an entry')).readUInt32BE(0), 'an entry'),
    );
    const valueLength = (await reader.take(4, 'an entry')).readUInt32BE(0);
    const value = Buffer.from(await reader.take(valueLength, 'an entry'));
    const entry = { database, key, value };
    tally.add(entry);
    yield entry;
  }
  const manifestLength = (await reader.take(4, 'the manifest')).readUInt32BE(0);
  const manifest = parseManifest(await reader.take(manifestLength, 'the manifest'));
  if (!(await reader.take(BACKUP_TRAILER.length, 'the trailer')).equals(BACKUP_TRAILER)) {
    throw damaged('its trailer is wrong');
  }
  if (!(await reader.atEnd())) throw damaged('there are bytes after its trailer');
  if (
    manifest.journalEntries !== tally.journalEntries ||
    manifest.recordsEntries !== tally.recordsEntries
  ) {
    throw damaged(
      `its manifest counts ${String(manifest.journalEntries)} journal and ` +
        `${String(manifest.recordsEntries)} records entries, the file holds ` +
        `${String(tally.journalEntries)} and ${String(tally.recordsEntries)}`,
    );
  }
  const digest = tally.digest().toString('hex');
  if (digest !== manifest.sha256) {
    throw damaged(
      `its entries hash to ${digest}, and its manifest says ${manifest.sha256}: they changed after it was written`,
    );
  }
  return manifest;
}
