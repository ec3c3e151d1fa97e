import { readFile } from 'node:fs/promises';

import { AppError } from '../common/errors';
import { parseRetirementJson, type ParsedRetirement } from '../common/retirement-json';
import { stringValue, UsageError } from './cli-support';

/*
 * `--retirement RECORD` of `journal verify`: the retirement record file (`state retirement`)
 * of a partition retired with policy checkpoint, which an export taken before must match.
 */

/** The flag's parse option. */
export const retirementOption = { retirement: { type: 'string' } } as const;

/**
 * The record in the file given, if any.
 *
 * @throws AppError `not_found` when the file cannot be read; UsageError when it is not a
 *   checkpoint retirement record.
 */
export async function retirementOf(
  values: Record<string, unknown>,
): Promise<ParsedRetirement | undefined> {
  const file = stringValue(values.retirement);
  if (file === undefined) return undefined;
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (cause) {
    throw new AppError('not_found', `cannot read the retirement record ${file}; check the path`, {
      details: { file },
      cause,
    });
  }
  const parsed = parseRetirementJson(text);
  if (typeof parsed === 'string') {
    throw new UsageError(
      `--retirement ${file}: ${parsed}; write one with \`polychrome state retirement conv-<id> -o FILE\``,
    );
  }
  return parsed;
}
