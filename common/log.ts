import pino from 'pino';
import type { DestinationStream, Logger } from 'pino';
import { traceLogFields } from './tracing';

/**
 * The root logger (STYLE.md §5). Each process's `main.ts` builds exactly one with
 * {@link createRootLogger} and passes children down; nothing logs through a global. A
 * message is a fixed phrase and values go in fields, so logs can be searched by field.
 */

/** The closed set of `component` values; a child logger names one. */
export const LogComponent = {
  Reconciler: 'reconciler',
  Api: 'api',
  Approvals: 'approvals',
  Journal: 'journal',
  Store: 'store',
  Turn: 'turn',
  Grpc: 'grpc',
  Health: 'health',
  Main: 'main',
} as const;
export type LogComponent = (typeof LogComponent)[keyof typeof LogComponent];

/** Log levels, lowest first. */
export const LogLevel = {
  Debug: 'debug',
  Info: 'info',
  Warn: 'warn',
  Error: 'error',
  Silent: 'silent',
} as const;
export type LogLevel = (typeof LogLevel)[keyof typeof LogLevel];

/** What replaces a redacted value. */
export const REDACTED = '[redacted]';

// Secret-bearing keys, at the top level and up to two objects deep (pino's `*` matches one
// level; a deeper secret must be logged under a path listed here or not at all).
const SECRET_KEYS = [
  'apiKey',
  'api_key',
  'anthropicApiKey',
  'authorization',
  'Authorization',
  'token',
  'authToken',
  'accessToken',
  'refreshToken',
  'password',
  'secret',
  'privateKey',
  'cookie',
  'x-api-key',
] as const;

function pathFor(prefix: string, key: string): string {
  return /^[A-Za-z_$][\w$]*$/u.test(key) ? `${prefix}${key}` : `${prefix}["${key}"]`;
}

/** The paths the root logger redacts (pino path syntax). */
export const REDACT_PATHS: readonly string[] = [
  ...SECRET_KEYS.flatMap((key) => [pathFor('', key), pathFor('*.', key), pathFor('*.*.', key)]),
  // Tool arguments may carry secrets the model was given; their hash is logged instead.
  'args',
  '*.args',
];

/** Options of {@link createRootLogger}. */
export interface RootLoggerOptions {
  /** The process: `harness`, `control-plane`, `state`. */
  readonly service: string;
  /** @default 'info' */
  readonly level?: LogLevel;
  /** Where lines go. @default stdout */
  readonly destination?: DestinationStream;
}

/**
 * Builds the process's one root logger: JSON lines, ISO times, `service` on every line,
 * secrets redacted by path ({@link REDACT_PATHS}), and `trace_id` and `span_id` of the
 * active span while tracing is on (common/tracing.ts).
 */
export function createRootLogger(options: RootLoggerOptions): Logger {
  const config = {
    level: options.level ?? LogLevel.Info,
    base: { service: options.service },
    timestamp: pino.stdTimeFunctions.isoTime,
    redact: { paths: [...REDACT_PATHS], censor: REDACTED },
    formatters: { level: (label: string) => ({ level: label }) },
    mixin: traceLogFields,
  };
  return options.destination === undefined ? pino(config) : pino(config, options.destination);
}

/** A child logger for one component, with any context fields (`turn`, `conversation`, ...). */
export function componentLogger(
  parent: Logger,
  component: LogComponent,
  fields: Readonly<Record<string, string | number | boolean>> = {},
): Logger {
  return parent.child({ component, ...fields });
}
