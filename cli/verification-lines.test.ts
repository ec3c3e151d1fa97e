import { describe, expect, it } from '@jest/globals';

import { checkpointNote, failureLines } from './verification-lines';

describe('failureLines', () => {
  it('prints the message, then what was expected and found', () => {
    expect(
      failureLines({
        position: 8,
        reason: 'root_mismatch',
        expected: 'aa11',
        found: 'bb22',
        message: 'the root at position 8 does not match',
      }),
    ).toBe('  the root at position 8 does not match\n  expected: aa11\n  found:    bb22\n');
  });

  it('leaves out what is not known', () => {
    expect(
      failureLines({ position: 0, reason: 'malformed', expected: '', found: '', message: 'm' }),
    ).toBe('  m\n');
  });
});

describe('checkpointNote', () => {
  it('says whether a checkpoint was checked, and lists excised positions', () => {
    expect(checkpointNote(true, [])).toBe('  checkpoint: checked\n');
    expect(checkpointNote(false, [3, 5])).toBe(
      '  excised by repair (checked by their kept leaf digests): 3, 5\n' +
        '  no checkpoint was checked: a journal cut short would pass; pass --checkpoint N:ROOTHEX\n',
    );
  });

  it('lists erased positions apart from those repair excised', () => {
    expect(checkpointNote(true, [3, 5, 8], [5, 8])).toBe(
      '  excised by repair (checked by their kept leaf digests): 3\n' +
        "  erased on request, by an admin's erasure or a memory clear (checked by their kept leaf digests; content gone): 5, 8\n" +
        '  checkpoint: checked\n',
    );
  });
});
