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

/**
 * The excised positions, told apart by their records: those repair excised as unreadable,
 * and those an admin erased (`erased`, a subset of `excised`; docs/journal-format.md,
 * "Erasure").
 */
export function excisionLines(excised: readonly number[], erased: readonly number[]): string {
  const repaired = excised.filter((p) => !erased.includes(p));
  return (
    (repaired.length === 0
      ? ''
      : `  excised by repair (checked by their kept leaf digests): ${repaired.join(', ')}\n`) +
    (erased.length === 0
      ? ''
      : `  erased on request, by an admin's erasure or a memory clear (checked by their kept leaf digests; content gone): ${erased.join(', ')}\n`)
  );
}

/** The excised and erased positions, and whether a checkpoint was checked. */
export function checkpointNote(
  checked: boolean,
  excised: readonly number[],
  erased: readonly number[] = [],
): string {
  return (
    excisionLines(excised, erased) +
    (checked
      ? '  checkpoint: checked\n'
      : '  no checkpoint was checked: a journal cut short would pass; pass --checkpoint N:ROOTHEX\n')
  );
}
