import { parseArgs } from 'node:util';

import { isAppError } from '../../common/errors';
import { recordsDirOf } from '../store/data-dirs';
import { restoreBackup, restoredLine } from './restore-backup';

/**
 * `main.js restore FILE [--overwrite]`: the state plane's image restoring a backup into its
 * own directories (`STATE_DATA_DIR`, `STATE_RECORDS_DIR`) instead of serving, for a Job or
 * Pod that mounts the state volume while the StatefulSet is scaled to zero
 * (docs/operations.md, "Backup and restore"). The same restore as `polychrome state
 * restore`. Resolves with the exit code: 0 restored, 1 refused or failed, 2 usage.
 */
export async function restoreCommand(
  args: readonly string[],
  env: NodeJS.ProcessEnv,
  print: (line: string) => void,
): Promise<number> {
  let file: string | undefined;
  let overwrite = false;
  try {
    const parsed = parseArgs({
      args: [...args],
      options: { overwrite: { type: 'boolean' } },
      allowPositionals: true,
      strict: true,
    });
    if (parsed.positionals.length !== 1) throw new Error('restore takes one backup FILE');
    file = parsed.positionals[0];
    overwrite = parsed.values.overwrite === true;
  } catch (error) {
    print(`usage: main.js restore FILE [--overwrite]: ${(error as Error).message}`);
    return 2;
  }
  const dataDir = env.STATE_DATA_DIR;
  if (dataDir === undefined || dataDir === '' || file === undefined) {
    print('restore needs STATE_DATA_DIR: the journal directory to restore into');
    return 2;
  }
  const recordsDir = recordsDirOf(dataDir, env.STATE_RECORDS_DIR || undefined);
  try {
    const { manifest } = await restoreBackup({ file, dataDir, recordsDir, overwrite });
    print(restoredLine(manifest, dataDir, recordsDir));
    return 0;
  } catch (error) {
    print(isAppError(error) ? error.message : String(error));
    return 1;
  }
}
