import { describe, expect, it } from '@jest/globals';
import { apiToolName } from './tool-names';

describe('apiToolName', () => {
  it.each([
    ['calculator', 'calculator'],
    ['github/create_issue', 'github__create_issue'],
    ['files/read.file', 'files__read_file'],
    ['srv/' + 'a'.repeat(70), `srv__${'a'.repeat(50)}_`],
  ])('%s → %s…', (name, prefix) => {
    const alias = apiToolName(name);
    expect(alias.startsWith(prefix)).toBe(true);
    expect(alias).toMatch(/^[a-zA-Z0-9_-]{1,64}$/u);
    expect(apiToolName(name)).toBe(alias);
  });
});
