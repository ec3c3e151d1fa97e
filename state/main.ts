import type { Logger } from 'pino';
import { Registry } from 'prom-client';
import { collectProcessMetrics } from '../common/process-metrics';

import { isAppError } from '../common/errors';
import { HealthServer } from '../common/health-server';
import { componentLogger, createRootLogger, LogComponent } from '../common/log';
import { startTracing } from '../common/tracing';
import { restoreCommand } from './backup/restore-command';
import { loadStateConfig, type StateConfig } from './config';
import { DiskMonitor, registerDiskMetrics } from './disk-monitor';
import { loadStateTls, registerTlsMetrics, serverTlsOf } from './tls-reload';
import { loadRecordsKey } from './records/records-key';
import { RecordsDatabase } from './server/records-database';
import { StateServer } from './server/state-server';
import { createStateMetrics, registerStateReadiness } from './server/state-metrics';
import { JournalStore } from './store/journal-store';
import { loadSigningKey } from './store/signing-key';
import { SignatureVerifyPool } from './verify-pool';

/*
 * The state plane: load config, open the journal store and the records database (each in
 * its own directory: LevelDB allows one instance per directory), serve the Journal and
 * Records services over mutual TLS, report health on the side port. On SIGTERM: not
 * ready, stop accepting, let appends and record changes in flight become durable, close
 * both databases, exit 0.
 *
 * Ready means: both databases are open and the gRPC listener is bound. The health server starts
 * first so liveness answers while a large store runs its tail checks.
 */

async function run(config: Readonly<StateConfig>, logger: Logger): Promise<void> {
  const log = componentLogger(logger, LogComponent.Main);
  // The SDK loads only when OTEL_* asks for it (docs/observability.md).
  const tracing = await startTracing('polychrome-state', (message) => log.warn(message));
  const tls = await loadStateTls(config.tls, log);
  const active = await loadSigningKey(config.signingKeyFile);
  const previous = await Promise.all(config.previousSigningKeyFiles.map((f) => loadSigningKey(f)));
  log.info(
    { keyId: active.keyId, previousKeyIds: previous.map((k) => k.keyId) },
    'signing keys loaded',
  );

  // Read before anything opens: a missing Secret fails the start with its path.
  const recordsKey = await loadRecordsKey(config.recordsKeyFile);
  log.info({ recordsKeyId: recordsKey.keyId }, 'records key loaded');

  const store = new JournalStore({
    location: config.dataDir,
    signer: active.signer,
    previousSigners: previous.map((k) => k.signer),
  });
  const recordsDb = new RecordsDatabase(config.recordsDir, recordsKey);
  const registry = new Registry();
  collectProcessMetrics(registry);
  const metrics = createStateMetrics(registry, () => store.stats());
  const pool =
    config.verifyWorkers > 0
      ? new SignatureVerifyPool({ workers: config.verifyWorkers })
      : undefined;
  const server = new StateServer({
    store,
    records: recordsDb.records,
    backupRecords: () => recordsDb.backupEntries(),
    tls: serverTlsOf(tls.pair),
    logger,
    host: config.host,
    port: config.port,
    metrics,
    publicKeys: [active, ...previous].map((k) => ({
      keyId: k.keyId,
      publicKey: k.signer.publicKey,
    })),
    ...(pool === undefined ? {} : { checkSignatures: (checks) => pool.verify(checks) }),
    ...(config.faultAppendDelay === undefined ? {} : { faultAppendDelay: config.faultAppendDelay }),
  });
  if (config.faultAppendDelay !== undefined) {
    logger.warn(
      { faultAppendDelay: config.faultAppendDelay },
      'STATE_FAULT_APPEND_DELAY is set: appends are held on purpose (crash tests only)',
    );
  }
  let storeOpen = false;
  let recordsOpen = false;
  const disk = new DiskMonitor({
    path: config.dataDir,
    minFreeBytes: config.disk.minFreeBytes,
    intervalMs: config.disk.checkIntervalMs,
    store,
    log,
  });
  registerDiskMetrics(registry, disk, config.disk.minFreeBytes);
  registerTlsMetrics(registry, tls);
  tls.onChange((pair) => {
    try {
      server.useTls(serverTlsOf(pair));
      log.info('TLS certificate, key and CA bundle in use for new connections');
    } catch (error) {
      log.error({ err: error }, 'the reloaded TLS files do not load; the old ones stay');
    }
  });
  const isReady = (): boolean =>
    storeOpen && recordsOpen && server.isServing() && disk.fault() === undefined;
  registerStateReadiness(registry, isReady);
  const health = new HealthServer({
    host: config.host,
    port: config.healthPort,
    registry,
    isReady,
    notReadyReason: () => disk.notReadyReason(),
  });
  const healthAddress = await health.start();
  log.info({ port: healthAddress.port }, 'health server listening');

  let stopping: Promise<void> | undefined;
  const stop = (signal: string): Promise<void> => {
    stopping ??= (async () => {
      log.info({ signal }, 'shutting down');
      await server.close(config.shutdownGraceMs);
      tls.stop();
      await disk.stop();
      await store.close();
      await recordsDb.close();
      await pool?.close();
      await health.close();
      await tracing?.shutdown().catch(() => undefined);
      log.info('stopped');
    })();
    return stopping;
  };
  const onSignal = (signal: NodeJS.Signals): void => {
    stop(signal).then(
      () => process.exit(0),
      (error: unknown) => {
        log.error({ err: error }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  process.once('SIGTERM', onSignal);
  process.once('SIGINT', onSignal);

  const report = await store.open();
  storeOpen = true;
  await disk.start();
  for (const dropped of report.droppedTails) {
    log.warn(dropped, 'dropped a never-acknowledged tail');
  }
  for (const refused of report.refused) {
    log.error(refused, 'partition refused: it is damaged; run verify and restore it');
  }
  log.info(
    { partitions: report.partitions, refused: report.refused.length, keyId: store.signingKeyId },
    'journal store open',
  );
  if (stopping !== undefined) return;
  try {
    await recordsDb.open();
  } catch (error) {
    // A SIGTERM meanwhile closed the database under the open: that is the shutdown.
    if (stopping !== undefined) return;
    throw error;
  }
  recordsOpen = true;
  log.info({ location: config.recordsDir }, 'records database open');
  // A SIGTERM during the tail checks: shutdown is under way, so do not bind.
  if (stopping !== undefined) return;
  const port = await server.start();
  tls.start();
  // One line tests and scripts can wait for; the log has the same facts.
  log.info({ port, healthPort: healthAddress.port }, 'state plane ready');
}

function main(): void {
  let config: Readonly<StateConfig>;
  try {
    config = loadStateConfig();
  } catch (error) {
    console.error(isAppError(error) ? error.message : String(error));
    process.exit(2);
  }
  const logger = createRootLogger({ service: 'state', level: config.logLevel });
  run(config, logger).catch((error: unknown) => {
    logger.fatal(
      { err: error, code: isAppError(error) ? error.code : undefined },
      'state plane failed to start',
    );
    process.exit(1);
  });
}

// `main.js restore FILE` restores a backup instead of serving (backup/restore-command.ts).
if (process.argv[2] === 'restore') {
  void restoreCommand(process.argv.slice(3), process.env, (line) => console.error(line)).then(
    (code) => process.exit(code),
  );
} else {
  main();
}
