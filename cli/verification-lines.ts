/*
 * The text lines a verification prints beside its verdict (`state verify`, `journal
 * verify`, `conversation verify`): the first failure, and what was checked.
 */

/** The failure's message, and what was expected and found when they are known. */
export function failureLines(failure: {
  position: number;
  reason: string;
  expected: string;
  found: string;
  message: string;
}): string {
  return (
    `  ${failure.message}\n` +
    (failure.expected === '' ? '' : `  expected: ${failure.expected}\n`) +
    (failure.found === '' ? '' : `  found:    ${failure.found}\n`)
  );
}

/** The excised positions, and whether a checkpoint was checked. */
export function checkpointNote(checked: boolean, excised: readonly number[]): string {
  return (
    (excised.length === 0
      ? ''
      : `  excised by repair (checked by their kept leaf digests): ${excised.join(', ')}\n`) +
    (checked
      ? '  checkpoint: checked\n'
      : '  no checkpoint was checked: a journal cut short would pass; pass --checkpoint N:ROOTHEX\n')
  );
}
