import { describe, expect, it } from '@jest/globals';
import { isAppError } from '../../common/errors';
import {
  acceptedAsLost,
  checkJournal,
  JournalRolledBackError,
  type EntryAtCheckpoint,
} from './journal-checkpoint';

const ROOT = 'ab'.repeat(32);
const OTHER = 'cd'.repeat(32);
const checkpoint = { head: 96, lastSignedRoot: ROOT, keyId: 'k1' };
const signed = (root: string, keyId = 'k1'): EntryAtCheckpoint => ({
  kind: 'signed_root',
  root,
  keyId,
});

describe('checkJournal', () => {
  it.each([
    ['no checkpoint', undefined, 0, undefined, { kind: 'holds' }],
    [
      'a checkpoint of an empty journal',
      { ...checkpoint, head: 0 },
      0,
      undefined,
      { kind: 'holds' },
    ],
    ['the journal at the checkpoint', checkpoint, 96, signed(ROOT), { kind: 'holds' }],
    ['the journal past the checkpoint', checkpoint, 120, signed(ROOT), { kind: 'holds' }],
    [
      'a checkpoint without a key id',
      { ...checkpoint, keyId: '' },
      96,
      signed(ROOT, 'k2'),
      { kind: 'holds' },
    ],
    [
      'a shorter journal',
      checkpoint,
      73,
      undefined,
      {
        kind: 'rolled_back',
        rollback: { checkpointHead: 96, checkpointRoot: ROOT, journalHead: 73 },
      },
    ],
    [
      'an empty journal',
      checkpoint,
      0,
      undefined,
      {
        kind: 'rolled_back',
        rollback: { checkpointHead: 96, checkpointRoot: ROOT, journalHead: 0 },
      },
    ],
    [
      'another root at the checkpoint (rewritten, then grown past it)',
      checkpoint,
      110,
      signed(OTHER),
      {
        kind: 'rolled_back',
        rollback: {
          checkpointHead: 96,
          checkpointRoot: ROOT,
          journalHead: 110,
          journalRoot: OTHER,
        },
      },
    ],
    [
      'the same root under another key',
      checkpoint,
      96,
      signed(ROOT, 'k9'),
      {
        kind: 'rolled_back',
        rollback: { checkpointHead: 96, checkpointRoot: ROOT, journalHead: 96, journalRoot: ROOT },
      },
    ],
    [
      'no signed_root at the checkpoint',
      checkpoint,
      100,
      { kind: 'other', eventKind: 'message_received' },
      {
        kind: 'rolled_back',
        rollback: { checkpointHead: 96, checkpointRoot: ROOT, journalHead: 100 },
      },
    ],
    [
      'an excised entry at the checkpoint',
      checkpoint,
      100,
      { kind: 'other', eventKind: 'excised' },
      {
        kind: 'rolled_back',
        rollback: { checkpointHead: 96, checkpointRoot: ROOT, journalHead: 100 },
      },
    ],
  ] as const)('%s', (_name, cp, head, entry, expected) => {
    expect(checkJournal(cp, head, entry)).toEqual(expected);
  });
});

describe('JournalRolledBackError', () => {
  it('is a failed_precondition that names both heads and both ways out', () => {
    const error = new JournalRolledBackError('c-1', {
      checkpointHead: 96,
      checkpointRoot: ROOT,
      journalHead: 73,
    });
    expect(isAppError(error) && error.code).toBe('failed_precondition');
    expect(error.details).toEqual({
      reason: 'journal_rolled_back',
      conversationId: 'c-1',
      checkpointHead: 96,
      journalHead: 73,
    });
    expect(error.message).toBe(
      `the journal of conversation c-1 was rolled back or rewritten: the state plane holds 73 entries, but status.journal records 96 (last signed root ${ROOT}); no turn is appended until it is restored. Restore the state volume from a backup that holds entry 95, or, to go on from the journal as it is and record the loss, an admin runs polychrome conversation accept-rollback c-1 --head 73 --reason TEXT`,
    );
  });

  it('names the root it found when the journal differs at the checkpoint', () => {
    const error = new JournalRolledBackError('c-1', {
      checkpointHead: 96,
      checkpointRoot: ROOT,
      journalHead: 110,
      journalRoot: OTHER,
    });
    expect(error.message).toContain(
      `the state plane holds 110 entries, but its signed root at head 96 is ${OTHER}, not ${ROOT}`,
    );
  });
});

describe('acceptedAsLost', () => {
  it.each([
    ['no checkpoint', undefined, [{ head: 96, root: ROOT }], false],
    ['no decision', checkpoint, [], false],
    ['a decision for this checkpoint', checkpoint, [{ head: 96, root: ROOT }], true],
    [
      'a decision among others',
      checkpoint,
      [
        { head: 40, root: OTHER },
        { head: 96, root: ROOT },
      ],
      true,
    ],
    ['a decision for another head', checkpoint, [{ head: 95, root: ROOT }], false],
    ['a decision for another root at this head', checkpoint, [{ head: 96, root: OTHER }], false],
  ])('%s: %s', (_name, at, losses, expected) => {
    expect(acceptedAsLost(at, losses)).toBe(expected);
  });
});
