/*
 * Builds one large partition, then retires it, printing `built <head>` before and
 * `retired` after: journal-store-crash.test.ts SIGKILLs it while the retirement's one batch
 * is being written. A partition already built (a second run) is only retired.
 *
 * Usage: node --import tsx retire-worker.ts <database directory> <batches>
 */
import { EventKind } from '../../../common/event-kinds';
import { JournalStore } from '../journal-store';
import { RetirePolicy } from '../retirement-types';
import { filler, message, RETIRE_WORKER_PARTITION, testSigner } from './fixtures';

async function main(): Promise<void> {
  const [location, batches] = process.argv.slice(2);
  if (location === undefined || batches === undefined) {
    throw new Error('usage: retire-worker.ts <database directory> <batches>');
  }
  const store = new JournalStore({ location, signer: testSigner(0) });
  await store.open();
  const partition = RETIRE_WORKER_PARTITION;
  let head = store.head(partition).head;
  const toBuild = head === 0 ? Number(batches) : 0;
  for (let b = 0; b < toBuild; b++) {
    const events = [
      message(`batch ${String(b)}`),
      ...Array.from({ length: 30 }, (_, i) => filler(EventKind.ToolResult, 2048, b + i)),
    ];
    head = (await store.append(partition, head, events)).head;
  }
  process.stdout.write(`built ${String(head)}\n`);
  await store.retire(partition, {
    policy: RetirePolicy.Checkpoint,
    actor: 'crash-test',
    reason: 'SIGKILL mid-retire',
  });
  process.stdout.write('retired\n');
  await store.close();
}

main().catch((error: unknown) => {
  process.stderr.write(`${String(error)}\n`);
  process.exit(1);
});
