/**
 * What the journal store's open() reads (state/store/README.md, "Open"): the format
 * marker, the partitions the database holds, and each partition's tail as
 * recover-partition.ts checks it. The store keeps what this returns.
 */
import { AppError } from '../../common/errors';
import type { Sha256 } from '../journal/sha256';
import type { OpenReport } from './journal-store-types';
import type { KvStore } from './level-kv';
import { isPartitionName } from '../../common/partition-name';
import { recoverPartition, type PartitionState } from './recover-partition';
import { loadRetirements } from './retired-partitions';
import type { PartitionRetirement } from './retirement-types';
import {
  ALL_PARTITIONS,
  FORMAT_KEY,
  partitionOfKey,
  partitionRange,
  STORE_FORMAT,
} from './store-keys';

const RECOVERY_CONCURRENCY = 16;
const utf8 = new TextEncoder();

/** The partitions open() found. */
export interface OpenedPartitions {
  readonly partitions: Map<string, PartitionState>;
  /** Partitions refused for damage, with the error their calls get. */
  readonly refused: Map<string, AppError>;
  /** Partitions whose never-acknowledged tail was deleted. */
  readonly droppedTails: { partition: string; events: number; nodes: number }[];
  /** Retired partitions (retired-partitions.ts), an unreadable retirement as its error. */
  readonly retired: Map<string, PartitionRetirement | AppError>;
}

/**
 * Checks the format marker of the database at `location` (writing it into an empty one).
 *
 * @throws AppError `failed_precondition` when the database is another format, or not
 *   empty and not a journal store.
 */
async function checkFormat(kv: KvStore, location: string): Promise<void> {
  const stored = await kv.get(FORMAT_KEY);
  if (stored !== undefined) {
    const format = Buffer.from(stored).toString('utf8');
    if (format === STORE_FORMAT) return;
    throw new AppError(
      'failed_precondition',
      `the database at ${location} is format ${JSON.stringify(format)}, not ` +
        `${STORE_FORMAT}; this state plane cannot read it`,
      { details: { format } },
    );
  }
  for await (const key of kv.keys({ limit: 1 })) {
    void key;
    throw new AppError(
      'failed_precondition',
      `the database at ${location} is not empty and has no journal-store format ` +
        'marker; point the state plane at its own volume',
    );
  }
  await kv.write([{ type: 'put', key: FORMAT_KEY, value: utf8.encode(STORE_FORMAT) }], true);
}

/** Every partition name with at least one record: one seek per partition. */
async function discoverPartitions(kv: KvStore): Promise<string[]> {
  const names: string[] = [];
  let bound: { gte: Uint8Array } | { gt: Uint8Array } = { gte: ALL_PARTITIONS.gte };
  for (;;) {
    let found: Uint8Array | undefined;
    for await (const key of kv.keys({ ...bound, lt: ALL_PARTITIONS.lt, limit: 1 })) found = key;
    if (found === undefined) return names;
    const name = partitionOfKey(found);
    if (name === undefined) {
      bound = { gt: found };
      continue;
    }
    names.push(name);
    bound = { gte: partitionRange(name).lt };
  }
}

/** Checks the tails of `names`, a few partitions at a time, into `into`. */
async function recoverPartitions(
  kv: KvStore,
  hash: Sha256,
  names: readonly string[],
  into: OpenedPartitions,
): Promise<void> {
  for (let i = 0; i < names.length; i += RECOVERY_CONCURRENCY) {
    const chunk = names.slice(i, i + RECOVERY_CONCURRENCY);
    const outcomes = await Promise.all(
      chunk.map((name) =>
        isPartitionName(name) ? recoverPartition(kv, hash, name) : Promise.resolve(undefined),
      ),
    );
    chunk.forEach((name, j) => {
      const outcome = outcomes[j];
      if (outcome === undefined) {
        into.refused.set(
          name,
          new AppError(
            'data_loss',
            `the database holds records under ${JSON.stringify(name)}, which is not a partition name`,
          ),
        );
      } else if (outcome.status === 'refused') {
        into.refused.set(name, outcome.error);
      } else {
        into.partitions.set(name, outcome.state);
        if (outcome.droppedEvents + outcome.droppedNodes > 0) {
          const { droppedEvents: events, droppedNodes: nodes } = outcome;
          into.droppedTails.push({ partition: name, events, nodes });
        }
      }
    });
  }
}

/**
 * Opens the database at `location`, checks its format marker, finds its partitions and
 * checks each one's tail (a never-acknowledged tail is deleted; a damaged partition is
 * refused). On failure the database is closed again.
 *
 * @throws AppError `unavailable` when the database cannot be opened (another process
 *   holds its lock, or the directory is unusable); `failed_precondition` when it is not a
 *   journal store of this format.
 */
export async function openStore(
  kv: KvStore,
  hash: Sha256,
  location: string,
): Promise<OpenedPartitions> {
  try {
    await kv.open();
  } catch (cause) {
    throw new AppError(
      'unavailable',
      `the journal database at ${location} cannot be opened; another process may ` +
        'hold its lock, or the volume is not writable',
      { cause },
    );
  }
  try {
    await checkFormat(kv, location);
    const names = await discoverPartitions(kv);
    const opened: OpenedPartitions = {
      partitions: new Map(),
      refused: new Map(),
      droppedTails: [],
      retired: await loadRetirements(kv),
    };
    await recoverPartitions(kv, hash, names, opened);
    return opened;
  } catch (error) {
    await kv.close().catch(() => undefined);
    throw error;
  }
}

/** What open() reports of `opened`. */
export function openReport(opened: OpenedPartitions): OpenReport {
  return {
    partitions: opened.partitions.size,
    droppedTails: opened.droppedTails,
    refused: [...opened.refused].map(([partition, error]) => ({
      partition,
      problem: error.message,
    })),
  };
}
