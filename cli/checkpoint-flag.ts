import type { ExportCheckpoint } from '../common/journal-export-format';
import { parseCheckpoint } from '../common/journal-export-parse';
import { stringValue, UsageError } from './cli-support';

/*
 * `--checkpoint N:ROOTHEX[:KEYID]` of `state verify` and `journal verify`: the head and last
 * signed root kept outside the journal, which catches a journal cut short or rolled back.
 */

/** The flag's parse option. */
export const checkpointOption = { checkpoint: { type: 'string' } } as const;

/** The checkpoint given, if any. @throws UsageError when it does not read. */
export function checkpointOf(values: Record<string, unknown>): ExportCheckpoint | undefined {
  const text = stringValue(values.checkpoint);
  if (text === undefined) return undefined;
  const checkpoint = parseCheckpoint(text);
  if (typeof checkpoint === 'string') {
    throw new UsageError(`--checkpoint ${JSON.stringify(text.slice(0, 120))}: ${checkpoint}`);
  }
  return checkpoint;
}
