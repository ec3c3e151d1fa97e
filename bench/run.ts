/*
 * Runs every bench/*.bench.ts in sequence (one process each, so one cannot warm or slow
 * the next) and passes their lines through. `make bench` runs this.
 *
 * Leading arguments that are part of a bench's file name select those benches only
 * (`npx tsx bench/run.ts turns` runs turns.bench.ts); the arguments after them are passed
 * to each bench that runs, as before.
 */
import { spawnSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';

const all = readdirSync(__dirname)
  .filter((name) => name.endsWith('.bench.ts'))
  .sort();
const args = process.argv.slice(2);
const filters: string[] = [];
for (let next = args[0]; next !== undefined && next !== ''; next = args[0]) {
  const filter = next;
  if (!all.some((name) => name.includes(filter))) break;
  filters.push(filter);
  args.shift();
}
const benches =
  filters.length === 0 ? all : all.filter((name) => filters.some((f) => name.includes(f)));
let failed = 0;
for (const name of benches) {
  console.log(`# ${name}`);
  const run = spawnSync(process.execPath, ['--import', 'tsx', join(__dirname, name), ...args], {
    stdio: 'inherit',
  });
  if (run.status !== 0) failed += 1;
}
process.exit(failed === 0 ? 0 : 1);
