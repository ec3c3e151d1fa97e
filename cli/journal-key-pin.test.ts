import { describe, expect, it } from '@jest/globals';

import { isAppError } from '../common/errors';
import { journalKeyId } from '../common/journal-keys';
import {
  journalKeyLine,
  JournalKeySource,
  noPinnedKey,
  pinJournalKeys,
  StatusKeysFrom,
  type StatusKeys,
} from './journal-key-pin';

const status1 = new Uint8Array(32).fill(1);
const status2 = new Uint8Array(32).fill(2);
const flag = new Uint8Array(32).fill(3);
const b64 = (key: Uint8Array): string => Buffer.from(key).toString('base64');
const header = `${b64(status1)},${b64(status2)}`;
const SENDER = 'the control plane at http://127.0.0.1:1';
const answer = (keys: string | undefined): StatusKeys => ({
  keys,
  from: StatusKeysFrom.ExportAnswer,
});

describe('pinJournalKeys: which journal keys conversation verify and replay trust', () => {
  it.each([
    {
      name: '--public-key wins over the status',
      flags: [flag],
      sent: header,
      source: JournalKeySource.Flag,
      keys: [flag],
      statusKeys: [status1, status2],
    },
    {
      name: '--public-key with no status keys',
      flags: [flag],
      sent: undefined,
      source: JournalKeySource.Flag,
      keys: [flag],
      statusKeys: [],
    },
    {
      name: 'the status keys without --public-key',
      flags: [],
      sent: header,
      source: JournalKeySource.Status,
      keys: [status1, status2],
      statusKeys: [status1, status2],
    },
  ])('$name', ({ flags, sent, source, keys, statusKeys }) => {
    const pin = pinJournalKeys(flags, answer(sent), SENDER);
    expect(pin).toEqual({
      source,
      statusFrom: StatusKeysFrom.ExportAnswer,
      keys,
      keyIds: keys.map(journalKeyId),
      statusKeyIds: statusKeys.map(journalKeyId),
    });
  });

  it('pins nothing when there is neither a flag nor a status key (the header is never trusted)', () => {
    expect(pinJournalKeys([], answer(undefined), SENDER)).toBeUndefined();
    expect(pinJournalKeys([], answer(''), SENDER)).toBeUndefined();
    expect(
      pinJournalKeys([], { keys: undefined, from: StatusKeysFrom.Object }, SENDER),
    ).toBeUndefined();
    expect(noPinnedKey()).toMatchObject({ reason: 'no_pinned_key', position: 0 });
    expect(noPinnedKey().message).toContain('pass the state plane');
  });

  it('refuses status keys that do not read, naming the sender', () => {
    let caught: unknown;
    try {
      pinJournalKeys([], answer(`${b64(status1)},not-a-key`), SENDER);
    } catch (error) {
      caught = error;
    }
    expect(isAppError(caught) && caught.code).toBe('internal');
    expect(String(caught)).toContain(`${SENDER} sent journal keys that do not read`);
  });

  it('says where the keys came from, and when a pinned key differs from the status', () => {
    const fromStatus = pinJournalKeys([], answer(header), SENDER)!;
    expect(journalKeyLine(fromStatus)).toBe(
      `journal key(s): ${journalKeyId(status1)}, ${journalKeyId(status2)}, pinned from the Conversation status (sent by the control plane with the export; the export header's keys are not trusted)`,
    );
    const fromObject = pinJournalKeys([], { keys: header, from: StatusKeysFrom.Object }, SENDER)!;
    expect(journalKeyLine(fromObject)).toContain(
      "pinned from the Conversation status (read from the Conversation object; the export header's keys are not trusted)",
    );
    expect(journalKeyLine(pinJournalKeys([flag], answer(header), SENDER)!)).toBe(
      `journal key(s): ${journalKeyId(flag)}, pinned with --public-key; NOTE: the Conversation status records ${journalKeyId(status1)}, ${journalKeyId(status2)}`,
    );
    expect(journalKeyLine(pinJournalKeys([status1, status2], answer(header), SENDER)!)).toContain(
      'pinned with --public-key (the Conversation status records the same)',
    );
  });
});
