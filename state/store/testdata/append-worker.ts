/*
 * Appends to a journal store in a loop until killed, printing one line per acknowledged
 * append: `ack <partition> <firstPosition> <head> <events>`. journal-store-crash.test.ts
 * runs it with `node --import tsx` and SIGKILLs it mid-stream. stdout on a
 * pipe is synchronous on Linux, so a printed line was acknowledged before it left.
 *
 * Usage: node --import tsx append-worker.ts <database directory> <partitions>
 * Each batch i of k events holds messages whose text is "<partition> batch <i> of <k> item <j>".
 */
import { JournalStore } from '../journal-store';
import { message, testSigner } from './fixtures';

async function appendForever(store: JournalStore, partition: string): Promise<never> {
  let head = store.head(partition).head;
  for (let batch = head; ; batch++) {
    const k = 1 + (batch % 4);
    const events = Array.from({ length: k }, (_, j) =>
      message(`${partition} batch ${String(batch)} of ${String(k)} item ${String(j)}`),
    );
    const result = await store.append(partition, head, events);
    process.stdout.write(
      `ack ${partition} ${String(result.firstPosition)} ${String(result.head)} ${String(k)}\n`,
    );
    head = result.head;
  }
}

async function main(): Promise<void> {
  const [location, count] = process.argv.slice(2);
  if (location === undefined || count === undefined) {
    throw new Error('usage: append-worker.ts <database directory> <partitions>');
  }
  const store = new JournalStore({ location, signer: testSigner(0) });
  await store.open();
  const partitions = Array.from({ length: Number(count) }, (_, i) => `conv-crash-${String(i)}`);
  process.stdout.write('ready\n');
  await Promise.all(partitions.map((p) => appendForever(store, p)));
}

main().catch((error: unknown) => {
  process.stderr.write(`${String(error)}\n`);
  process.exit(1);
});
