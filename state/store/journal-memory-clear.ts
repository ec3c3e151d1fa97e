/**
 * A person's memory clear (docs/state-plane.md, "Memory clears"; docs/turns.md, "Memory"):
 * the `memory_cleared` event and the erasure of the `memory_set` events it names
 * (`set_positions`), in one atomic batch: the `memory_cleared`, one signed `excision` record
 * marked `erased` per `memory_set` (journal-repair.ts excisionEvents, as an erasure writes
 * them), the closing `signed_root`, and the excised markers that keep the leaf digests. So
 * the clear and its erasure are committed together or not at all.
 *
 * A clear is a writer's call, not an erasure's: the state plane itself checks that every
 * named position is a readable `memory_set` of the cleared key (any key for a clear of all)
 * in this partition, and refuses anything else before it writes, so the right to clear
 * memory is never a right to erase other content.
 */
import { AppError } from '../../common/errors';
import { decodePayload, EventKind } from '../../common/event-kinds';
import { assertPartitionName } from '../../common/partition-name';
import type { MemoryCleared } from '../../proto/gen/polychrome/events/v1/events';
import { assertAppendable, validateEvents } from './journal-append';
import { assertPosition, noEvents, throwIfAborted } from './journal-checks';
import { erasePositionsOf, namedEntries, writeErasure } from './journal-erase';
import type { ExcisionContext } from './journal-excisions';
import { repairRequestOf, type RepairRequest } from './journal-repair';
import type { ClearMemoryOptions, ClearMemoryResult } from './journal-store-types';
import type { KvStore } from './level-kv';
import type { PartitionState } from './recover-partition';
import { decodeEventValue, eventKey } from './store-keys';

/** A clear's payload, decoded, and the `memory_set` positions it names, sorted. */
interface ClearRequest extends RepairRequest {
  readonly key: string;
  readonly positions: readonly number[];
}

/** The reason each excision record of a clear gives. */
export function memoryClearReason(key: string): string {
  return key === '' ? 'memory clear of every key' : `memory clear of ${JSON.stringify(key)}`;
}

/**
 * The checked request of a clear whose `memory_cleared` payload is `payload`.
 *
 * @throws AppError `invalid_argument` for a payload that does not decode, a clear by
 *   nobody, or bad `set_positions` (none, repeated, too many).
 */
function clearRequestOf(
  partition: string,
  payload: Uint8Array,
  options: ClearMemoryOptions,
): ClearRequest {
  let cleared: MemoryCleared;
  try {
    cleared = decodePayload(EventKind.MemoryCleared, payload);
  } catch (error) {
    throw new AppError(
      'invalid_argument',
      `${partition}: the memory clear's payload is not a MemoryCleared message; send the encoded event`,
      { details: { partition, field: 'memory_cleared' }, cause: error },
    );
  }
  if (cleared.setPositions.length === 0) {
    throw new AppError(
      'invalid_argument',
      `${partition}: a memory clear names the memory_set positions it erases (set_positions), ` +
        'and this one names none; clear only what memory holds',
      { details: { partition, field: 'set_positions' } },
    );
  }
  const positions = erasePositionsOf(partition, cleared.setPositions);
  const request = repairRequestOf(
    partition,
    {
      actor: cleared.attribution?.caller ?? '',
      reason: memoryClearReason(cleared.key),
      fencingToken: options.fencingToken,
      signal: options.signal,
      now: options.now,
    },
    'a memory clear (attribution.caller is its actor)',
  );
  return { ...request, key: cleared.key, positions };
}

/** Why the entry stored at `position` is not a `memory_set` of `key` (any when empty). */
function notMemorySetOf(
  partition: string,
  position: number,
  value: Uint8Array | undefined,
  key: string,
): string | undefined {
  if (value === undefined) return 'there is no entry there';
  let stored: { kind: string; payload: Uint8Array; excisedLeaf?: Uint8Array };
  try {
    stored = decodeEventValue(value, partition, position);
  } catch {
    return 'the stored entry is damaged';
  }
  if (stored.excisedLeaf !== undefined) return 'it is excised already';
  if (stored.kind !== EventKind.MemorySet) {
    return `it is a ${JSON.stringify(stored.kind.slice(0, 64))} entry`;
  }
  let setKey: string;
  try {
    setKey = decodePayload(EventKind.MemorySet, stored.payload).key;
  } catch {
    return 'it does not decode as a memory_set';
  }
  if (key !== '' && setKey !== key) {
    return `it sets ${JSON.stringify(setKey.slice(0, 128))}, not ${JSON.stringify(key)}`;
  }
  return undefined;
}

/**
 * Refuses a clear that names anything but `memory_set`s of its key in `partition`.
 *
 * @throws AppError `permission_denied` naming each such position and why.
 */
async function assertMemorySets(
  kv: KvStore,
  partition: string,
  request: ClearRequest,
): Promise<void> {
  const values = await kv.getMany(request.positions.map((p) => eventKey(partition, p)));
  const refused = request.positions.flatMap((position, i) => {
    const why = notMemorySetOf(partition, position, values[i], request.key);
    return why === undefined ? [] : [`position ${String(position)}: ${why}`];
  });
  if (refused.length === 0) return;
  const what = request.key === '' ? 'any key' : JSON.stringify(request.key);
  throw new AppError(
    'permission_denied',
    `${partition}: a memory clear erases only memory_set entries of the key it clears ` +
      `(${what}), and nothing else; nothing was written: ${refused.join('; ')}. ` +
      'Erasing other content is an erasure (the erase role)',
    { details: { partition, field: 'set_positions' } },
  );
}

/** Checks and writes the clear's batch of `partition` (its lock held). */
async function writeClear(
  context: ExcisionContext,
  partition: string,
  state: PartitionState,
  payload: Uint8Array,
  request: ClearRequest,
): Promise<ClearMemoryResult> {
  await assertMemorySets(context.parts.kv, partition, request);
  const erased = await namedEntries(context.parts, partition, state.head, request.positions);
  const lead = [{ kind: EventKind.MemoryCleared, payload }];
  const written = await writeErasure(context.parts, partition, state, erased, request, lead);
  return { ...context.apply(partition, state, written), erased };
}

/**
 * {@link JournalStore.clearMemory}: appends the `memory_cleared` (payload `payload`) at
 * `expectedHead` and erases the `memory_set` entries it names, in one atomic batch, once
 * the journal with them erased is shown to verify.
 *
 * @throws AppError `invalid_argument` (bad name, head, payload or positions);
 *   `permission_denied` when a named position is not a `memory_set` of the cleared key;
 *   `not_found` (no events); `failed_precondition` from the erasure's checks (not below
 *   the head, unreadable); `data_loss` when the journal would not verify; `fenced`,
 *   `conflict`, `cancelled`, `unavailable` as for append.
 */
export async function clearMemoryPartition(
  context: ExcisionContext,
  partition: string,
  expectedHead: number,
  payload: Uint8Array,
  options: ClearMemoryOptions = {},
): Promise<ClearMemoryResult> {
  context.life.assertOpen();
  assertPartitionName(partition);
  assertPosition(expectedHead, 'expected head', partition);
  validateEvents(partition, [{ kind: EventKind.MemoryCleared, payload }], context.limits);
  const request = clearRequestOf(partition, payload, options);
  throwIfAborted(request.signal, `memory clear of ${partition}`);
  return context.life.locked(partition, async () => {
    const state = context.table.healthy(partition);
    if (state === undefined) throw noEvents(partition);
    const { fencingToken } = request;
    assertAppendable(partition, state, expectedHead, {
      fencingToken,
      expectedRoot: options.expectedRoot,
    });
    return writeClear(context, partition, state, payload, request);
  });
}
