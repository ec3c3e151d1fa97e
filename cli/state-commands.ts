import { createWriteStream } from 'node:fs';
import { once } from 'node:events';
import { writeFile } from 'node:fs/promises';

import { z } from 'zod';

import { envInt, envOptionalString, envString, parseConfig, type Env } from '../common/config';
import { exportFileLines, type ExportCheckpoint } from '../common/journal-export-format';
import { isPartitionName } from '../common/partition-name';
import { loadStateClientTls, type StateClientOptions } from '../common/state-channel';
import { StateCallError } from '../common/state-call-errors';
import { StateClient } from '../common/state-client';
import { formatRetirementJson } from '../common/retirement-json';
import { checkpointOf, checkpointOption } from './checkpoint-flag';
import {
  ExitCode,
  Format,
  formatOptions,
  parse,
  parseFormat,
  stringValue,
  UsageError,
  write,
  type CliIo,
} from './cli-support';
import { checkpointNote, failureLines } from './verification-lines';

/*
 * `polychrome state verify`, `state export` and `state retirement`: a journal on the state plane, over gRPC with
 * a verifier certificate (docs/state-plane.md, "CLI"), with the connection flags or the
 * POLYCHROME_STATE_* environment.
 */

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

/** The flags naming the state plane and the client certificate (docs/kubectl.md). */
export const connectionOptions = {
  address: { type: 'string' },
  ca: { type: 'string' },
  cert: { type: 'string' },
  key: { type: 'string' },
  'server-name': { type: 'string' },
  'timeout-ms': { type: 'string' },
} as const;

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

/**
 * The state plane's address and the client's TLS files, from the connection flags or the
 * POLYCHROME_STATE_* environment. @throws UsageError for a missing file or a bad timeout.
 */
export async function stateConnectionOf(
  values: Record<string, unknown>,
  env: Env | undefined,
): Promise<StateClientOptions> {
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
  return {
    address: stringValue(values.address) ?? config.address,
    tls,
    callTimeoutMs: timeoutMs,
    ...(serverName === undefined ? {} : { serverName }),
  };
}

async function connect(
  values: Record<string, unknown>,
  env: Env | undefined,
): Promise<StateClient> {
  return new StateClient(await stateConnectionOf(values, env));
}

/** Verifies one partition on the state plane and prints the outcome; true when it verifies. */
async function verifyOne(
  client: StateClient,
  partition: string,
  checkpoint: ReturnType<typeof checkpointOf>,
  format: Format,
  io: CliIo,
): Promise<boolean> {
  const result = await client.verify(partition, checkpoint === undefined ? {} : { checkpoint });
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
        excised: result.excised,
        erased: result.erased,
        checkpointChecked: result.checkpointChecked,
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
      `${partition}: OK: ${String(result.events)} events, ${String(result.signedRoots)} signed roots verified\n` +
        checkpointNote(result.checkpointChecked, result.excised, result.erased),
    );
  }
  return ok;
}

/**
 * `state verify conv-<id>`: the state plane replays the journal and checks it; with
 * `--all`, every partition it holds (after a restore), one line (or JSON line) each.
 */
export async function stateVerify(
  args: readonly string[],
  env: Env | undefined,
  io: CliIo,
): Promise<ExitCode> {
  const { values, positionals } = parse(args, {
    ...connectionOptions,
    ...formatOptions,
    ...checkpointOption,
    all: { type: 'boolean' },
  });
  const format = parseFormat(values);
  const all = values.all === true;
  if (all && (positionals.length > 0 || values.checkpoint !== undefined)) {
    throw new UsageError('state verify --all takes no partition and no --checkpoint');
  }
  const partition = all ? undefined : onePartition(positionals, 'state verify');
  const checkpoint = checkpointOf(values);
  const client = await connect(values, env);
  try {
    const partitions = partition === undefined ? await client.listPartitions() : [partition];
    let failed = 0;
    for (const name of partitions) {
      if (!(await verifyOne(client, name, checkpoint, format, io))) failed += 1;
    }
    if (all && format !== Format.Json) {
      await write(
        io.stdout,
        `${String(partitions.length)} partitions, ${String(failed)} failed verification\n`,
      );
    }
    return failed === 0 ? ExitCode.Ok : ExitCode.VerifyFailed;
  } finally {
    client.close();
  }
}

/** `state export conv-<id>`: the journal as an export file. */
export async function stateExport(
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
  // The state plane's own checkpoint, taken before the export starts, so the export holds
  // at least it; a refused partition has none and still exports.
  let checkpoint: ExportCheckpoint | undefined;
  try {
    const head = await client.head(partition);
    if (head.signedRoot !== undefined) {
      checkpoint = { head: head.head, root: head.signedRoot.root, keyId: head.signedRoot.keyId };
    }
  } catch (error) {
    if (!(error instanceof StateCallError) || !error.fromServer) {
      client.close();
      throw error;
    }
  }
  const file = stringValue(values.output);
  const out =
    file === undefined || file === '-' ? io.stdout : createWriteStream(file, { flags: 'w' });
  let events = 0;
  try {
    for await (const line of exportFileLines(partition, client.export(partition), { checkpoint })) {
      await write(out, line);
      events += 1;
    }
    // The header is one of the lines.
    events -= 1;
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

/** `state retirement conv-<id>`: the retirement record of a retired partition, as JSON. */
export async function stateRetirement(
  args: readonly string[],
  env: Env | undefined,
  io: CliIo,
): Promise<ExitCode> {
  const { values, positionals } = parse(args, {
    ...connectionOptions,
    output: { type: 'string', short: 'o' },
  });
  const partition = onePartition(positionals, 'state retirement');
  const client = await connect(values, env);
  let text: string;
  try {
    text = formatRetirementJson(await client.retirement(partition));
  } finally {
    client.close();
  }
  const file = stringValue(values.output);
  if (file === undefined || file === '-') {
    await write(io.stdout, text);
    return ExitCode.Ok;
  }
  await writeFile(file, text);
  await write(io.stderr, `${partition}: retirement record written to ${file}\n`);
  return ExitCode.Ok;
}
