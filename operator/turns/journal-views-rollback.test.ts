/**
 * JournalViews refuses to start from, or append to, a journal that lost what the checkpoint
 * recorded (journal-checkpoint.ts). Two real stores (LevelDB in temporary directories, one
 * signing key) stand for the state volume before and after a restore: `restored` holds the
 * first batch only, or the first batch and a different second one.
 */
import { afterEach, describe, expect, it } from '@jest/globals';
import { EventKind } from '../../common/event-kinds';
import type { StateJournal } from '../../common/state-journal';
import { StoreJournal } from '../../test/support/store-journal';
import { JournalRolledBackError } from './journal-checkpoint';
import { partitionOf } from '../../common/partition-name';
import { JournalViews } from './journal-views';
import type { PlannedEvent } from './plan-common';

const UID = '5a4b3c2d-1e0f-4a9b-8c7d-6e5f4a3b2c1d';
const attribution = {
  caller: 'web:owner',
  participants: ['web:owner'],
  persona: 'p',
  session: '',
};
const message = (turnId: string, text: string): PlannedEvent => ({
  kind: EventKind.MessageReceived,
  payload: { turnId, idempotencyKey: turnId, text, attribution, receivedAtMs: 5 },
});

let stores: StoreJournal[] = [];
afterEach(async () => {
  await Promise.all(stores.map((s) => s.close()));
  stores = [];
});

async function store(): Promise<StoreJournal> {
  const opened = await StoreJournal.open();
  stores.push(opened);
  return opened;
}

/** The state plane as the control plane reaches it: whichever volume is mounted now. */
function mounted(initial: StateJournal): { state: StateJournal; mount: (s: StateJournal) => void } {
  let current = initial;
  return {
    mount: (s) => {
      current = s;
    },
    state: {
      append: (...args) => current.append(...args),
      read: (...args) => current.read(...args),
      head: (...args) => current.head(...args),
      clearMemory: (...args) => current.clearMemory(...args),
      export: (...args) => current.export(...args),
    },
  };
}

const lease = (fencingToken = 1) => ({
  fencingToken,
  signal: new AbortController().signal,
  conversation: { namespace: 'n', name: 'c', uid: UID },
  leaseName: `conv-${UID}`,
  holder: 'replica-a',
});

/** The checkpoint `status.journal` would record after `outcome`. */
function checkpointOf(outcome: Awaited<ReturnType<StateJournal['append']>>) {
  return {
    head: outcome.head,
    lastSignedRoot: Buffer.from(outcome.signedRoot.root).toString('hex'),
    keyId: outcome.signedRoot.keyId,
  };
}

describe('JournalViews and a rolled-back journal', () => {
  it('starts from a journal that holds the checkpoint, at it or past it', async () => {
    const original = await store();
    const views = new JournalViews({ state: original, isBusy: () => false });
    const first = await views.append(UID, lease(), [message('t1', 'one')]);
    await views.append(UID, lease(), [message('t2', 'two')]);
    const fresh = new JournalViews({ state: original, isBusy: () => false });
    const signal = AbortSignal.timeout(5_000);
    const view = await fresh.inSync(UID, lease(), signal, checkpointOf(first.outcome));
    expect(view.head).toBe(4);
    expect(view.turns.map((t) => t.turnId)).toEqual(['t1', 't2']);
  });

  it('refuses a journal shorter than the checkpoint, naming both heads, and appends nothing', async () => {
    const original = await store();
    const restored = await store();
    const { state, mount } = mounted(original);
    const writer = new JournalViews({ state, isBusy: () => false });
    await writer.append(UID, lease(), [message('t1', 'one')]);
    const second = await writer.append(UID, lease(), [message('t2', 'two')]);
    await new JournalViews({ state: restored, isBusy: () => false }).append(UID, lease(), [
      message('t1', 'one'),
    ]);
    mount(restored);

    const reader = new JournalViews({ state, isBusy: () => false });
    const signal = AbortSignal.timeout(5_000);
    const refused = reader.inSync(UID, lease(), signal, checkpointOf(second.outcome));
    await expect(refused).rejects.toBeInstanceOf(JournalRolledBackError);
    await expect(refused).rejects.toMatchObject({
      code: 'failed_precondition',
      rollback: {
        checkpointHead: 4,
        checkpointRoot: checkpointOf(second.outcome).lastSignedRoot,
        journalHead: 2,
      },
    });
    expect(await restored.entries(partitionOf(UID))).toHaveLength(2);
    expect(reader.cached(UID)).toBeUndefined();
  });

  it('refuses a journal as long as the checkpoint but different at it, naming the root it found', async () => {
    const original = await store();
    const restored = await store();
    const { state, mount } = mounted(original);
    const writer = new JournalViews({ state, isBusy: () => false });
    await writer.append(UID, lease(), [message('t1', 'one')]);
    const second = await writer.append(UID, lease(), [message('t2', 'two')]);
    const other = new JournalViews({ state: restored, isBusy: () => false });
    await other.append(UID, lease(), [message('t1', 'one')]);
    const rewritten = await other.append(UID, lease(), [message('t2', 'not two')]);
    mount(restored);

    const reader = new JournalViews({ state, isBusy: () => false });
    await expect(
      reader.inSync(UID, lease(), AbortSignal.timeout(5_000), checkpointOf(second.outcome)),
    ).rejects.toMatchObject({
      rollback: {
        checkpointHead: 4,
        journalHead: 4,
        journalRoot: checkpointOf(rewritten.outcome).lastSignedRoot,
      },
    });
  });

  it('takes an append that finds the journal shorter than its view as a rollback, and reads it again after', async () => {
    const original = await store();
    const restored = await store();
    const { state, mount } = mounted(original);
    const views = new JournalViews({ state, isBusy: () => false });
    const first = await views.append(UID, lease(), [message('t1', 'one')]);
    const second = await views.append(UID, lease(), [message('t2', 'two')]);
    const copy = new JournalViews({ state: restored, isBusy: () => false });
    await copy.append(UID, lease(), [message('t1', 'one')]);
    mount(restored);

    await expect(views.append(UID, lease(), [message('t3', 'three')])).rejects.toMatchObject({
      code: 'failed_precondition',
      rollback: {
        checkpointHead: 4,
        checkpointRoot: checkpointOf(second.outcome).lastSignedRoot,
        journalHead: 2,
      },
    });
    expect(await restored.entries(partitionOf(UID))).toHaveLength(2);
    // The view was dropped: the next claim reads the journal again and checks it.
    const view = await views.inSync(
      UID,
      lease(),
      AbortSignal.timeout(5_000),
      checkpointOf(first.outcome),
    );
    expect(view.head).toBe(2);
  });

  it('takes an append that finds a journal as long as its view but ending in another root as a rollback', async () => {
    const original = await store();
    const replaced = await store();
    const { state, mount } = mounted(original);
    const views = new JournalViews({ state, isBusy: () => false });
    await views.append(UID, lease(), [message('t1', 'one')]);
    const second = await views.append(UID, lease(), [message('t2', 'two')]);
    const copy = new JournalViews({ state: replaced, isBusy: () => false });
    await copy.append(UID, lease(), [message('t1', 'one')]);
    const other = await copy.append(UID, lease(), [message('t2', 'not two')]);
    // Put in place while this replica's view is cached under an unbroken lease: the head
    // alone would let the next append through.
    mount(replaced);

    await expect(views.append(UID, lease(), [message('t3', 'three')])).rejects.toMatchObject({
      code: 'failed_precondition',
      rollback: {
        checkpointHead: 4,
        checkpointRoot: checkpointOf(second.outcome).lastSignedRoot,
        journalHead: 4,
        journalRoot: checkpointOf(other.outcome).lastSignedRoot,
      },
    });
    expect(await replaced.entries(partitionOf(UID))).toHaveLength(4);
  });
});
