import { describe, expect, it } from '@jest/globals';
import { AppError } from '../../common/errors';
import { needsApproval } from '../../common/approval-rules';
import { mergeApprovalRules, parseApprovalRules } from './approval-policy';

describe('parseApprovalRules', () => {
  it('splits on commas and whitespace, sorts and removes duplicates', () => {
    expect(parseApprovalRules(' github/*, files/delete\ncalculator  github/* ', 'ENV')).toEqual([
      'calculator',
      'files/delete',
      'github/*',
    ]);
  });

  it('empty text is no rules', () => {
    expect(parseApprovalRules('  , ', 'ENV')).toEqual([]);
  });

  it('names every bad entry at once and says the list only adds', () => {
    let caught: unknown;
    try {
      parseApprovalRules('github/*, !files/delete, Bad/x', 'POLYCHROME_REQUIRE_APPROVAL');
    } catch (error) {
      caught = error;
    }
    if (!(caught instanceof AppError)) throw new Error('expected an AppError');
    const error = caught;
    expect(error.code).toBe('invalid_argument');
    expect(error.message).toBe(
      'POLYCHROME_REQUIRE_APPROVAL: "!files/delete", "Bad/x" are not approval rules; each entry must be a builtin tool name, <mcpServer>/<tool> or <mcpServer>/*. This list can only add approvals; remove a rule by editing the list itself.',
    );
    expect(error.details).toEqual({
      source: 'POLYCHROME_REQUIRE_APPROVAL',
      invalid: '!files/delete,Bad/x',
    });
  });
});

describe('mergeApprovalRules', () => {
  it.each([
    { spec: [], env: [], merged: [] },
    { spec: ['github/create_issue'], env: [], merged: ['github/create_issue'] },
    { spec: [], env: ['files/*'], merged: ['files/*'] },
    {
      spec: ['github/create_issue', 'calculator'],
      env: ['files/*', 'calculator'],
      merged: ['calculator', 'files/*', 'github/create_issue'],
    },
  ])('spec $spec + env $env → $merged', ({ spec, env, merged }) => {
    expect(mergeApprovalRules(spec, env)).toEqual(merged);
  });

  it('never drops a rule of either list (the deployment list only adds)', () => {
    const spec = ['a/x', 'b/*', 'calculator'];
    const env = ['a/y', 'b/*'];
    const merged = mergeApprovalRules(spec, env);
    for (const rule of [...spec, ...env]) expect(merged).toContain(rule);
    for (const tool of ['a/x', 'a/y', 'b/anything', 'calculator']) {
      expect(needsApproval(tool, merged)).toBe(true);
    }
    expect(needsApproval('a/z', merged)).toBe(false);
  });

  it('rejects a malformed conversation rule', () => {
    expect(() => mergeApprovalRules(['ok/x', 'no good'], [])).toThrow(
      'spec.tools.requireApproval: "no good" is not an approval rule; each entry must be a builtin tool name, <mcpServer>/<tool> or <mcpServer>/*.',
    );
  });

  it('rejects a malformed deployment rule given as plain strings', () => {
    expect(() => mergeApprovalRules(['ok/x'], ['ok/*', '!ok/x'])).toThrow(
      'the deployment approval list: "!ok/x" is not an approval rule; each entry must be a builtin tool name, <mcpServer>/<tool> or <mcpServer>/*.',
    );
  });

  it('returns a frozen list', () => {
    expect(Object.isFrozen(mergeApprovalRules(['a/x'], []))).toBe(true);
  });
});
