import { createWriteStream } from 'node:fs';
import { once } from 'node:events';
import type { Writable } from 'node:stream';
import { parseArgs, type ParseArgsConfig } from 'node:util';

import { z } from 'zod';

import { envInt, envOptionalString, envString, parseConfig, type Env } from '../common/config';
import { AppError, isAppError } from '../common/errors';
import { loadStateClientTls, StateClient } from '../common/state-client';
import { isPartitionName } from '../state/store/partition-name';
import { formatExportEvent, formatExportHeader, type ExportPublicKey } from './export-file';
import { verifyExportFile } from './journal-verify';

/** Exit codes: scripts and CI branch on them. */
export const ExitCode = {
  /** The command did what was asked; a verification passed. */
  Ok: 0,
  /** A verification ran and failed: the journal does not verify. */
  VerifyFailed: 1,
  /** The command line is wrong (unknown command or flag, missing argument). */
  Usage: 2,
  /** The command could not run: no connection, refused, not found, unreadable file. */
  Error: 3,
} as const;
export type ExitCode = (typeof ExitCode)[keyof typeof ExitCode];

/** Where the CLI writes; the entry passes the process's streams, tests their own. */
export interface CliIo {
  readonly stdout: Writable;
  readonly stderr: Writable;
}

export const USAGE = `usage: polychrome <command>

  polychrome state verify conv-<id> [--format json|text] [connection flags]
      Ask the state plane to replay the journal and check every root and signature.
      Exit 0 when every root verifies, 1 when one does not (the failing position is named).

  polychrome state export conv-<id> [-o FILE] [connection flags]
      Write the journal as JSON lines: a header with the public keys, then one line per
      event ({position, kind, payload (base64)}). Default: standard output.

  polychrome journal verify FILE [--public-key KEY]... [--format json|text]
      Verify an export offline, with no server. KEY is the raw ed25519 public key, 64 hex
      digits or base64; without it the keys in the file's header are trusted.

connection flags (or environment variables):
  --address HOST:PORT   POLYCHROME_STATE_ADDRESS   default localhost:7443
  --ca FILE             POLYCHROME_STATE_CA        the Polychrome CA certificate (PEM)
  --cert FILE           POLYCHROME_STATE_CERT      this client's certificate (PEM)
  --key FILE            POLYCHROME_STATE_KEY       this client's key (PEM)
  --server-name NAME    POLYCHROME_STATE_SERVER_NAME  name to check the server certificate against
  --timeout-ms N        POLYCHROME_STATE_TIMEOUT_MS   default 60000

exit codes: 0 ok, 1 verification failed, 2 usage error, 3 could not run
`;

class UsageError extends AppError {
  override readonly name: string = 'UsageError';
  constructor(message: string) {
    super('invalid_argument', message);
  }
}

const envSchema = z
  .object({
    POLYCHROME_STATE_ADDRESS: envString({ default: 'localhost:7443' }),
    POLYCHROME_STATE_CA: envOptionalString(),
    POLYCHROME_STATE_CERT: envOptionalString(),
    POLYCHROME_STATE_KEY: envOptionalString(),
    POLYCHROME_STATE_SERVER_NAME: envOptionalString(),
    POLYCHROME_STATE_TIMEOUT_MS: envInt({ default: 60_000, min: 1, max: 3_600_000 }),
  })
  .transform((env) => ({
    address: env.POLYCHROME_STATE_ADDRESS,
    ca: env.POLYCHROME_STATE_CA,
    cert: env.POLYCHROME_STATE_CERT,
    key: env.POLYCHROME_STATE_KEY,
    serverName: env.POLYCHROME_STATE_SERVER_NAME,
    timeoutMs: env.POLYCHROME_STATE_TIMEOUT_MS,
  }));

const connectionOptions = {
  address: { type: 'string' },
  ca: { type: 'string' },
  cert: { type: 'string' },
  key: { type: 'string' },
  'server-name': { type: 'string' },
  'timeout-ms': { type: 'string' },
} as const;

const Format = { Json: 'json', Text: 'text' } as const;
type Format = (typeof Format)[keyof typeof Format];

function parseFormat(value: string | undefined): Format {
  if (value === undefined || value === Format.Text) return Format.Text;
  if (value === Format.Json) return Format.Json;
  throw new UsageError(`--format must be json or text, got ${JSON.stringify(value)}`);
}

function parse(
  args: readonly string[],
  options: ParseArgsConfig['options'],
): {
  values: Record<string, string | boolean | (string | boolean)[] | undefined>;
  positionals: string[];
} {
  try {
    const parsed = parseArgs({ args: [...args], options, allowPositionals: true, strict: true });
    return { values: parsed.values, positionals: parsed.positionals };
  } catch (error) {
    throw new UsageError(error instanceof Error ? error.message : String(error));
  }
}

function stringValue(value: unknown): string | undefined {
  return typeof value === 'string' ? value : undefined;
}

function onePartition(positionals: readonly string[], command: string): string {
  const [partition, ...extra] = positionals;
  if (partition === undefined) throw new UsageError(`${command} needs a partition: conv-<id>`);
  if (extra.length > 0)
    throw new UsageError(`${command} takes one partition, got extra ${extra.join(' ')}`);
  if (!isPartitionName(partition)) {
    throw new UsageError(
      `${JSON.stringify(partition)} is not a partition name: expected conv-<conversation uid> ` +
        '(a-z, 0-9 and "-", up to 63 characters after "conv-")',
    );
  }
  return partition;
}

async function connect(
  values: Record<string, unknown>,
  env: Env | undefined,
): Promise<StateClient> {
  const config = parseConfig('polychrome CLI', envSchema, env);
  const pick = (flag: string, fromEnv: string | undefined, variable: string): string => {
    const value = stringValue(values[flag]) ?? fromEnv;
    if (value === undefined) {
      throw new UsageError(`no ${flag} file: pass --${flag} FILE or set ${variable}`);
    }
    return value;
  };
  const tls = await loadStateClientTls({
    ca: pick('ca', config.ca, 'POLYCHROME_STATE_CA'),
    cert: pick('cert', config.cert, 'POLYCHROME_STATE_CERT'),
    key: pick('key', config.key, 'POLYCHROME_STATE_KEY'),
  });
  const timeoutText = stringValue(values['timeout-ms']);
  const timeoutMs = timeoutText === undefined ? config.timeoutMs : Number(timeoutText);
  if (!Number.isSafeInteger(timeoutMs) || timeoutMs <= 0) {
    throw new UsageError(
      `--timeout-ms must be a positive whole number, got ${JSON.stringify(timeoutText)}`,
    );
  }
  const serverName = stringValue(values['server-name']) ?? config.serverName;
  return new StateClient({
    address: stringValue(values.address) ?? config.address,
    tls,
    callTimeoutMs: timeoutMs,
    ...(serverName === undefined ? {} : { serverName }),
  });
}

async function write(out: Writable, text: string): Promise<void> {
  if (!out.write(text)) await once(out, 'drain');
}

function failureLines(failure: {
  position: number;
  reason: string;
  expected: string;
  found: string;
  message: string;
}): string {
  return (
    `  ${failure.message}\n` +
    (failure.expected === '' ? '' : `  expected: ${failure.expected}\n`) +
    (failure.found === '' ? '' : `  found:    ${failure.found}\n`)
  );
}

async function stateVerify(
  args: readonly string[],
  env: Env | undefined,
  io: CliIo,
): Promise<ExitCode> {
  const { values, positionals } = parse(args, { ...connectionOptions, format: { type: 'string' } });
  const format = parseFormat(stringValue(values.format));
  const partition = onePartition(positionals, 'state verify');
  const client = await connect(values, env);
  try {
    const result = await client.verify(partition);
    // Events no root covers cannot be verified; the state plane never acknowledges them.
    const ok = result.ok && result.unsealed === 0;
    if (format === Format.Json) {
      await write(
        io.stdout,
        `${JSON.stringify({
          partition,
          ok,
          events: result.events,
          signedRoots: result.signedRoots,
          unsealed: result.unsealed,
          failure: result.failure ?? null,
        })}\n`,
      );
    } else if (result.failure !== undefined) {
      await write(
        io.stdout,
        `${partition}: FAILED at position ${String(result.failure.position)} (${result.failure.reason})\n` +
          failureLines(result.failure),
      );
    } else if (!ok) {
      await write(
        io.stdout,
        `${partition}: FAILED: ${String(result.unsealed)} events after the last signed root are not covered by any root\n`,
      );
    } else {
      await write(
        io.stdout,
        `${partition}: OK: ${String(result.events)} events, ${String(result.signedRoots)} signed roots verified\n`,
      );
    }
    return ok ? ExitCode.Ok : ExitCode.VerifyFailed;
  } finally {
    client.close();
  }
}

async function stateExport(
  args: readonly string[],
  env: Env | undefined,
  io: CliIo,
): Promise<ExitCode> {
  const { values, positionals } = parse(args, {
    ...connectionOptions,
    output: { type: 'string', short: 'o' },
  });
  const partition = onePartition(positionals, 'state export');
  const client = await connect(values, env);
  const file = stringValue(values.output);
  const out =
    file === undefined || file === '-' ? io.stdout : createWriteStream(file, { flags: 'w' });
  let events = 0;
  try {
    const keys: ExportPublicKey[] = [];
    let headerWritten = false;
    for await (const entry of client.export(partition)) {
      if (entry.type === 'public_key') {
        keys.push({ keyId: entry.keyId, publicKey: entry.publicKey });
        continue;
      }
      if (!headerWritten) {
        await write(out, formatExportHeader(partition, keys));
        headerWritten = true;
      }
      await write(out, formatExportEvent(entry.event));
      events += 1;
    }
    if (!headerWritten) await write(out, formatExportHeader(partition, keys));
  } finally {
    client.close();
    if (out !== io.stdout) {
      out.end();
      await once(out, 'close');
    }
  }
  if (file !== undefined && file !== '-') {
    await write(io.stderr, `${partition}: exported ${String(events)} events to ${file}\n`);
  }
  return ExitCode.Ok;
}

function parsePublicKey(text: string): Uint8Array {
  const trimmed = text.trim();
  if (/^[0-9a-fA-F]{64}$/u.test(trimmed)) return new Uint8Array(Buffer.from(trimmed, 'hex'));
  const bytes = Buffer.from(trimmed, 'base64');
  if (bytes.length === 32 && bytes.toString('base64') === trimmed) return new Uint8Array(bytes);
  throw new UsageError(
    `--public-key ${JSON.stringify(trimmed.slice(0, 80))} is not a raw ed25519 public key: ` +
      'give 64 hex digits or the base64 of 32 bytes',
  );
}

async function journalVerify(args: readonly string[], io: CliIo): Promise<ExitCode> {
  const { values, positionals } = parse(args, {
    format: { type: 'string' },
    'public-key': { type: 'string', multiple: true },
  });
  const format = parseFormat(stringValue(values.format));
  const [file, ...extra] = positionals;
  if (file === undefined) throw new UsageError('journal verify needs an export FILE');
  if (extra.length > 0)
    throw new UsageError(`journal verify takes one FILE, got extra ${extra.join(' ')}`);
  const rawKeys = values['public-key'];
  const keys = (Array.isArray(rawKeys) ? rawKeys : [])
    .filter((k): k is string => typeof k === 'string')
    .map(parsePublicKey);
  const result = await verifyExportFile(file, keys);
  if (format === Format.Json) {
    await write(io.stdout, `${JSON.stringify({ ...result, failure: result.failure ?? null })}\n`);
  } else if (result.failure !== undefined) {
    await write(
      io.stdout,
      `${file} (${result.partition}): FAILED at position ${String(result.failure.position)} (${result.failure.reason})\n` +
        failureLines(result.failure),
    );
  } else {
    await write(
      io.stdout,
      `${file} (${result.partition}): OK: ${String(result.events)} events, ${String(result.signedRoots)} signed roots ` +
        `verified against ${result.trust === 'pinned' ? 'the pinned key(s)' : "the file header's key(s) (pin one with --public-key)"} ` +
        `${result.trustedKeyIds.join(', ')}\n`,
    );
  }
  return result.ok && result.unsealed === 0 ? ExitCode.Ok : ExitCode.VerifyFailed;
}

/**
 * Runs one CLI invocation. Never throws and never exits: returns the exit code, having
 * written results to stdout and problems to stderr.
 *
 * @param args the arguments after the program name.
 * @param env @default process.env (through common/config.ts)
 */
export async function runCli(args: readonly string[], io: CliIo, env?: Env): Promise<ExitCode> {
  const [group, command, ...rest] = args;
  try {
    if (group === undefined) throw new UsageError('no command given');
    if (group === 'help' || group === '--help' || group === '-h') {
      await write(io.stdout, USAGE);
      return ExitCode.Ok;
    }
    if (group === 'state' && command === 'verify') return await stateVerify(rest, env, io);
    if (group === 'state' && command === 'export') return await stateExport(rest, env, io);
    if (group === 'journal' && command === 'verify') return await journalVerify(rest, io);
    throw new UsageError(
      `unknown command ${JSON.stringify([group, command].filter((p) => p !== undefined).join(' '))}`,
    );
  } catch (error) {
    if (error instanceof UsageError) {
      await write(io.stderr, `polychrome: ${error.message}\n\n${USAGE}`);
      return ExitCode.Usage;
    }
    const message = isAppError(error)
      ? error.message
      : error instanceof Error
        ? error.message
        : String(error);
    await write(io.stderr, `polychrome: ${message}\n`);
    return ExitCode.Error;
  }
}
