import { overlaps, recordsDirOf } from './store/data-dirs';

import { z } from 'zod';

import {
  envEnum,
  envInt,
  envList,
  envOptionalString,
  envPort,
  envString,
  parseConfig,
  type Env,
} from '../common/config';
import { DEFAULT_HEALTH_PORT } from '../common/health-server';
import { LogLevel } from '../common/log';
import { DEFAULT_STATE_PORT } from './server/state-server';

/** 256 MiB: room for LevelDB to flush its memtable (4 MiB) and compact, on a 10 GiB volume. */
const DEFAULT_DISK_MIN_FREE = 256 * 1024 * 1024;

const BYTE_UNITS: Readonly<Record<string, number>> = {
  '': 1,
  Ki: 1024,
  Mi: 1024 ** 2,
  Gi: 1024 ** 3,
};

/** A size in bytes: a whole number, optionally with `Ki`, `Mi` or `Gi`; unset gives `fallback`. */
function envBytes(fallback: number) {
  return envOptionalString().transform((raw, ctx): number => {
    if (raw === undefined) return fallback;
    const match = /^(\d{1,15})(Ki|Mi|Gi)?$/u.exec(raw);
    const bytes = match === null ? NaN : Number(match[1]) * (BYTE_UNITS[match[2] ?? ''] ?? NaN);
    if (!Number.isSafeInteger(bytes)) {
      ctx.addIssue({
        code: 'custom',
        message: `must be a size in bytes, a whole number optionally followed by Ki, Mi or Gi (e.g. 268435456 or 256Mi), got ${JSON.stringify(raw)}`,
      });
      return z.NEVER;
    }
    return bytes;
  });
}

/**
 * The state plane's configuration, from environment variables the StatefulSet sets (TLS
 * material and signing keys are mounted Secrets; the variables name the files):
 *
 * | variable | meaning | default |
 * |---|---|---|
 * | `STATE_LISTEN_HOST` | gRPC and side-port address | `0.0.0.0` |
 * | `STATE_PORT` | gRPC port (mutual TLS only) | 7443 |
 * | `STATE_HEALTH_PORT` | `/healthz`, `/readyz`, `/metrics` | 9090 |
 * | `STATE_TLS_CA_FILE` | the Polychrome CA (PEM): client certificates must chain to it | required |
 * | `STATE_TLS_CERT_FILE`, `STATE_TLS_KEY_FILE` | the server certificate and key (PEM) | required |
 * | `STATE_TLS_RELOAD_INTERVAL_MS` | how often the three TLS files are read again (they are also read shortly after their directory changes) | 60000 |
 * | `STATE_SIGNING_KEY_FILE` | the active journal signing key (raw 32-byte seed or PKCS#8 PEM) | required |
 * | `STATE_PREVIOUS_SIGNING_KEY_FILES` | comma-separated earlier keys, kept until every partition was handed over | none |
 * | `STATE_DATA_DIR` | the journal's LevelDB directory on the state volume | required |
 * | `STATE_RECORDS_DIR` | the records' LevelDB directory (its own database: LevelDB allows one instance per directory); neither inside `STATE_DATA_DIR` nor holding it | `STATE_DATA_DIR` + `-records` |
 * | `STATE_RECORDS_KEY_FILE` | the records key: 32 random bytes, raw, hex or base64 (state/records/records-key.ts) | required |
 * | `STATE_VERIFY_WORKERS` | worker threads for Verify's signature checks (0: on the event loop) | 1 |
 * | `STATE_SHUTDOWN_GRACE_MS` | how long SIGTERM lets open calls finish after in-flight appends | 10000 |
 * | `STATE_DISK_MIN_FREE_BYTES` | free space on the journal volume under which appends are refused and the state plane is not ready: bytes, or a whole number with `Ki`, `Mi` or `Gi` | `256Mi` |
 * | `STATE_DISK_CHECK_INTERVAL_MS` | how often the volume's free space is read (statfs) | 5000 |
 * | `STATE_LOG_LEVEL` | debug, info, warn, error, silent | info |
 * | `STATE_FAULT_APPEND_DELAY` | fault injection for crash tests only: `<kind>:<ms>` holds every append whose batch has an event of that kind for ms before it is written (the process logs a warning when set) | none |
 */
const schema = z
  .object({
    STATE_LISTEN_HOST: envOptionalString(),
    STATE_PORT: envPort(DEFAULT_STATE_PORT),
    STATE_HEALTH_PORT: envPort(DEFAULT_HEALTH_PORT),
    STATE_TLS_CA_FILE: envString(),
    STATE_TLS_CERT_FILE: envString(),
    STATE_TLS_KEY_FILE: envString(),
    STATE_TLS_RELOAD_INTERVAL_MS: envInt({ default: 60_000, min: 100, max: 3_600_000 }),
    STATE_SIGNING_KEY_FILE: envString(),
    STATE_PREVIOUS_SIGNING_KEY_FILES: envList(),
    STATE_DATA_DIR: envString(),
    STATE_RECORDS_DIR: envOptionalString(),
    STATE_RECORDS_KEY_FILE: envString(),
    STATE_VERIFY_WORKERS: envInt({ default: 1, min: 0, max: 64 }),
    STATE_SHUTDOWN_GRACE_MS: envInt({ default: 10_000, min: 0, max: 600_000 }),
    STATE_DISK_MIN_FREE_BYTES: envBytes(DEFAULT_DISK_MIN_FREE),
    STATE_DISK_CHECK_INTERVAL_MS: envInt({ default: 5000, min: 100, max: 600_000 }),
    STATE_FAULT_APPEND_DELAY: envOptionalString().transform((raw, ctx) => {
      if (raw === undefined) return undefined;
      const match = /^([a-z_]+):(\d{1,6})$/u.exec(raw);
      if (match === null) {
        ctx.addIssue({
          code: 'custom',
          message: `must be <event kind>:<milliseconds>, e.g. turn_complete:3000, got ${JSON.stringify(raw)}`,
        });
        return z.NEVER;
      }
      return { kind: match[1] ?? '', ms: Number(match[2]) };
    }),
    STATE_LOG_LEVEL: envEnum(
      [LogLevel.Debug, LogLevel.Info, LogLevel.Warn, LogLevel.Error, LogLevel.Silent],
      LogLevel.Info,
    ),
  })
  .superRefine((env, ctx) => {
    const records = recordsDirOf(env.STATE_DATA_DIR, env.STATE_RECORDS_DIR);
    if (overlaps(env.STATE_DATA_DIR, records)) {
      ctx.addIssue({
        code: 'custom',
        path: ['STATE_RECORDS_DIR'],
        message:
          `${records} overlaps STATE_DATA_DIR ${env.STATE_DATA_DIR}; the records need a ` +
          'directory of their own beside the journal (e.g. a sibling on the same volume)',
      });
    }
  })
  .transform((env) => ({
    host: env.STATE_LISTEN_HOST ?? '0.0.0.0',
    port: env.STATE_PORT,
    healthPort: env.STATE_HEALTH_PORT,
    tls: {
      caFile: env.STATE_TLS_CA_FILE,
      certFile: env.STATE_TLS_CERT_FILE,
      keyFile: env.STATE_TLS_KEY_FILE,
      reloadIntervalMs: env.STATE_TLS_RELOAD_INTERVAL_MS,
    },
    signingKeyFile: env.STATE_SIGNING_KEY_FILE,
    previousSigningKeyFiles: env.STATE_PREVIOUS_SIGNING_KEY_FILES,
    dataDir: env.STATE_DATA_DIR,
    recordsDir: recordsDirOf(env.STATE_DATA_DIR, env.STATE_RECORDS_DIR),
    recordsKeyFile: env.STATE_RECORDS_KEY_FILE,
    verifyWorkers: env.STATE_VERIFY_WORKERS,
    shutdownGraceMs: env.STATE_SHUTDOWN_GRACE_MS,
    disk: {
      minFreeBytes: env.STATE_DISK_MIN_FREE_BYTES,
      checkIntervalMs: env.STATE_DISK_CHECK_INTERVAL_MS,
    },
    logLevel: env.STATE_LOG_LEVEL,
    faultAppendDelay: env.STATE_FAULT_APPEND_DELAY,
  }));

/** The parsed, frozen state-plane configuration. */
export type StateConfig = z.output<typeof schema>;

/**
 * Reads the state plane's configuration. Files are only named here; main.ts reads them,
 * so a missing Secret is reported with the file's path.
 *
 * @param env @default process.env (through common/config.ts)
 * @throws ConfigError listing every bad variable.
 */
export function loadStateConfig(env?: Env): Readonly<StateConfig> {
  return parseConfig('state plane', schema, env);
}
