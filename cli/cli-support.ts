import { once } from 'node:events';
import type { Writable } from 'node:stream';
import { parseArgs, type ParseArgsConfig } from 'node:util';

import { AppError, isAppError } from '../common/errors';
import { ApiCallError } from './api-errors';

/*
 * What every `polychrome` command shares: exit codes, where output goes, argument
 * parsing with usage errors, and the output format flags.
 */

/** Exit codes: scripts and CI branch on them. */
export const ExitCode = {
  /** The command did what was asked; a verification passed; a turn settled (or waits for a person). */
  Ok: 0,
  /** A verification ran and failed: the journal does not verify. */
  VerifyFailed: 1,
  /** The same code for a turn that settled quarantined (ambiguous): an admin must act. */
  TurnQuarantined: 1,
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
  /**
   * Stops a command that waits (the entry aborts it on SIGINT): `stream` then ends with
   * exit 0, a request in flight is abandoned. @default never
   */
  readonly signal?: AbortSignal;
}

/** A wrong command line: exit 2 with the message and the usage. */
export class UsageError extends AppError {
  override readonly name: string = 'UsageError';
  constructor(message: string) {
    super('invalid_argument', message);
  }
}

/** Parsed flags and positionals of one command. */
export interface ParsedArgs {
  values: Record<string, string | boolean | (string | boolean)[] | undefined>;
  positionals: string[];
}

/**
 * node:util parseArgs, strict, positionals allowed (`--` ends the flags).
 * @throws UsageError for an unknown flag or a flag without its value.
 */
export function parse(args: readonly string[], options: ParseArgsConfig['options']): ParsedArgs {
  try {
    const parsed = parseArgs({ args: [...args], options, allowPositionals: true, strict: true });
    return { values: parsed.values, positionals: parsed.positionals };
  } catch (error) {
    throw new UsageError(error instanceof Error ? error.message : String(error));
  }
}

export function stringValue(value: unknown): string | undefined {
  return typeof value === 'string' ? value : undefined;
}

/** @throws UsageError when `command` got more positionals than `what` it takes. */
export function noExtra(extra: readonly string[], command: string, what: string): void {
  if (extra.length > 0) {
    throw new UsageError(`${command} takes ${what}, got extra ${extra.join(' ')}`);
  }
}

/** Writes `text`, waiting for the stream to drain when it is full. */
export async function write(out: Writable, text: string): Promise<void> {
  if (!out.write(text)) await once(out, 'drain');
}

export const Format = { Json: 'json', Text: 'text' } as const;
export type Format = (typeof Format)[keyof typeof Format];

/** The output flags every command that prints results takes: `--format json|text`, `--json`. */
export const formatOptions = {
  format: { type: 'string' },
  json: { type: 'boolean' },
} as const;

/**
 * The output format from `--format json|text` and `--json` (short for `--format json`).
 * @throws UsageError for another format, or `--json` with `--format text`.
 */
export function parseFormat(values: Record<string, unknown>): Format {
  const value = stringValue(values.format);
  const json = values.json === true;
  if (value !== undefined && value !== Format.Text && value !== Format.Json) {
    throw new UsageError(`--format must be json or text, got ${JSON.stringify(value)}`);
  }
  if (json && value === Format.Text) {
    throw new UsageError('--json means --format json; it cannot go with --format text');
  }
  return json || value === Format.Json ? Format.Json : Format.Text;
}

/**
 * The exit code and the stderr line of a command that threw: a usage error prints the
 * usage (exit 2); anything else its message, with the API's code, HTTP status and request
 * id when the API answered (exit 3).
 */
export async function reportFailure(
  error: unknown,
  io: CliIo,
  how: { readonly program: string; readonly usage: string },
): Promise<ExitCode> {
  if (error instanceof UsageError) {
    await write(io.stderr, `${how.program}: ${error.message}\n\n${how.usage}`);
    return ExitCode.Usage;
  }
  const message = isAppError(error)
    ? error.message
    : error instanceof Error
      ? error.message
      : String(error);
  const answer =
    error instanceof ApiCallError
      ? ` (${error.code}${error.status === 0 ? '' : `, HTTP ${String(error.status)}`}` +
        `${error.requestId === undefined ? '' : `, request id ${error.requestId}`})`
      : '';
  await write(io.stderr, `${how.program}: ${message}${answer}\n`);
  return ExitCode.Error;
}
