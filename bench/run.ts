/*
 * Runs every bench/*.bench.ts in sequence (one process each, so one cannot warm or slow
 * the next) and passes their lines through. `make bench` runs this.
 */
import { spawnSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';

const benches = readdirSync(__dirname)
  .filter((name) => name.endsWith('.bench.ts'))
  .sort();
let failed = 0;
for (const name of benches) {
  console.log(`# ${name}`);
  const run = spawnSync(
    process.execPath,
    ['--import', 'tsx', join(__dirname, name), ...process.argv.slice(2)],
    {
      stdio: 'inherit',
    },
  );
  if (run.status !== 0) failed += 1;
}
process.exit(failed === 0 ? 0 : 1);
