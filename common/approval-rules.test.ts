import { describe, expect, it } from '@jest/globals';
import { isApprovalRule, needsApproval } from './approval-rules';

describe('isApprovalRule', () => {
  it.each([
    ['calculator', true],
    ['github/create_issue', true],
    ['github/*', true],
    ['files/read.file-v2', true],
    ['Github/create_issue', false], // server names are DNS labels
    ['github/', false],
    ['/tool', false],
    ['!github/create_issue', false],
    ['-calculator', true], // a valid builtin-style name, not a removal
    ['github/a/b', false],
    ['github/*x', false],
    ['x'.repeat(65), false],
    ['', false],
  ])('%s → %s', (rule, expected) => {
    expect(isApprovalRule(rule)).toBe(expected);
  });
});

describe('needsApproval', () => {
  const rules = ['github/create_issue', 'files/*', 'calculator'];
  it.each([
    ['github/create_issue', true],
    ['github/list_issues', false],
    ['files/delete', true],
    ['files/read.v2', true],
    ['files/a/b', true], // a tool name may hold "/": the server is what precedes the first
    ['filesystem/delete', false], // a wildcard names one server exactly, not a prefix
    ['file/delete', false],
    ['calculator', true],
    ['calculator/x', false], // a builtin rule is not a server
    ['text_stats', false],
    ['files', false], // the server's name alone is no tool of it
    ['/delete', false],
    ['*', false],
  ])('%s → %s', (tool, expected) => {
    expect(needsApproval(tool, rules)).toBe(expected);
  });

  it('needs no approval under no rules', () => {
    expect(needsApproval('files/delete', [])).toBe(false);
  });
});
