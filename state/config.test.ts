import { describe, expect, it } from '@jest/globals';

import { ConfigError } from '../common/config';
import { loadStateConfig } from './config';

const base = {
  STATE_TLS_CA_FILE: 'ca.crt',
  STATE_TLS_CERT_FILE: 'tls.crt',
  STATE_TLS_KEY_FILE: 'tls.key',
  STATE_SIGNING_KEY_FILE: 'signing-key',
  STATE_DATA_DIR: 'vol/journal',
  STATE_RECORDS_KEY_FILE: 'records-key',
};

function problems(env: Record<string, string>): string[] {
  try {
    loadStateConfig(env);
  } catch (error) {
    if (error instanceof ConfigError) return error.issues.map((i) => i.variable);
    throw error;
  }
  throw new Error('expected the configuration to be refused');
}

describe('loadStateConfig: records storage', () => {
  it.each([
    [
      'a sibling named after the journal directory',
      'vol/journal',
      undefined,
      'vol/journal-records',
    ],
    ['the same, ignoring a trailing slash', 'vol/journal/', undefined, 'vol/journal-records'],
    ['STATE_RECORDS_DIR when given', 'vol/journal', 'vol/records', 'vol/records'],
  ])('puts the records in %s', (_label, dataDir, recordsDir, expected) => {
    const config = loadStateConfig({
      ...base,
      STATE_DATA_DIR: dataDir,
      ...(recordsDir === undefined ? {} : { STATE_RECORDS_DIR: recordsDir }),
    });
    expect(config.recordsDir).toBe(expected);
    expect(config.recordsKeyFile).toBe('records-key');
  });

  it.each([
    ['the journal directory itself', 'vol/journal'],
    ['a directory inside the journal', 'vol/journal/records'],
    ['a directory holding the journal', 'vol'],
  ])('refuses %s as the records directory', (_label, recordsDir) => {
    expect(problems({ ...base, STATE_RECORDS_DIR: recordsDir })).toEqual(['STATE_RECORDS_DIR']);
  });

  it('requires the records key file', () => {
    const { STATE_RECORDS_KEY_FILE: _omitted, ...rest } = base;
    expect(problems(rest)).toEqual(['STATE_RECORDS_KEY_FILE']);
  });
});

describe('loadStateConfig: fault injection', () => {
  it('is off unless set, and parses <kind>:<ms>', () => {
    expect(loadStateConfig(base).faultAppendDelay).toBeUndefined();
    expect(
      loadStateConfig({ ...base, STATE_FAULT_APPEND_DELAY: 'turn_complete:2500' }).faultAppendDelay,
    ).toEqual({ kind: 'turn_complete', ms: 2500 });
  });

  it('names the shape it wants when the value is malformed', () => {
    expect(() => loadStateConfig({ ...base, STATE_FAULT_APPEND_DELAY: 'soon' })).toThrow(
      /STATE_FAULT_APPEND_DELAY: must be <event kind>:<milliseconds>, e.g. turn_complete:3000, got "soon"/,
    );
  });
});

describe('loadStateConfig: disk space', () => {
  it('defaults to 256 MiB checked every 5 s, and reads bytes with Ki, Mi or Gi', () => {
    expect(loadStateConfig(base).disk).toEqual({
      minFreeBytes: 256 * 1024 * 1024,
      checkIntervalMs: 5000,
    });
    const read = (value: string): number =>
      loadStateConfig({ ...base, STATE_DISK_MIN_FREE_BYTES: value }).disk.minFreeBytes;
    expect(read('0')).toBe(0);
    expect(read('1048576')).toBe(1048576);
    expect(read('512Ki')).toBe(512 * 1024);
    expect(read('64Mi')).toBe(64 * 1024 * 1024);
    expect(read('2Gi')).toBe(2 * 1024 ** 3);
  });

  it.each(['ten', '-5', '1.5Gi', '64MB', '64 Mi', '9999999999999999Gi'])(
    'refuses %j, naming the shape it wants',
    (value) => {
      expect(() => loadStateConfig({ ...base, STATE_DISK_MIN_FREE_BYTES: value })).toThrow(
        /STATE_DISK_MIN_FREE_BYTES: must be a size in bytes, a whole number optionally followed by Ki, Mi or Gi/,
      );
    },
  );
});
