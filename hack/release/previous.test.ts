/**
 * The previous release's pin (hack/release/previous.json): the checked-in file reads, names
 * a commit of this repository's history when the clone has it, and a broken pin is refused
 * naming the field and what it must be.
 */
import { describe, expect, it } from '@jest/globals';
import { spawnSync } from 'node:child_process';
import { repoRoot } from '../lib/paths';
import { parsePreviousRelease, readPreviousRelease } from './previous';

const sha = 'c1b7c647dd30d770d41a1b42f389d843c26b814d';

describe('the previous release pin', () => {
  it('reads the checked-in pin; its commit is in the history when the clone is not shallow', () => {
    const pin = readPreviousRelease();
    expect(pin.version).toMatch(/^\d+\.\d+\.\d+/u);
    const shallow = spawnSync('git', ['rev-parse', '--is-shallow-repository'], {
      cwd: repoRoot,
      encoding: 'utf8',
    });
    if (shallow.stdout.trim() === 'false') {
      const found = spawnSync('git', ['cat-file', '-e', `${pin.commit}^{commit}`], {
        cwd: repoRoot,
      });
      expect({ commit: pin.commit, status: found.status }).toEqual({
        commit: pin.commit,
        status: 0,
      });
    }
  });

  it('takes a version and a full commit, and ignores a comment', () => {
    expect(
      parsePreviousRelease(JSON.stringify({ comment: 'x', version: '0.2.0', commit: sha })),
    ).toEqual({ version: '0.2.0', commit: sha });
  });

  it.each([
    ['not JSON', '{', /previous\.json is not JSON/u],
    ['not an object', '[]', /must be an object with "version" and "commit"/u],
    [
      'a tag as the version',
      JSON.stringify({ version: 'v0.2.0', commit: sha }),
      /"version" "v0\.2\.0" is not a semantic version/u,
    ],
    [
      'no version',
      JSON.stringify({ commit: sha }),
      /"version" undefined is not a semantic version/u,
    ],
    [
      'a short commit',
      JSON.stringify({ version: '0.2.0', commit: 'c1b7c64' }),
      /"commit" "c1b7c64" is not a full commit id .*git rev-parse/u,
    ],
    [
      'a tag as the commit',
      JSON.stringify({ version: '0.2.0', commit: 'v0.2.0' }),
      /"commit" "v0\.2\.0" is not a full commit id/u,
    ],
  ])('refuses %s, naming what is wrong', (_name, text, message) => {
    expect(() => parsePreviousRelease(text)).toThrow(message);
  });
});
