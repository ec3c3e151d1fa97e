import { describe, expect, it } from '@jest/globals';
import type { ToolCallRequest } from '../turn/ports/tool-port';
import { builtinToolRunner, builtinTools, calculatorTool } from './builtin-tools';

const request = (name: string, input: ToolCallRequest['input']): ToolCallRequest => ({
  turnId: 't',
  toolCallId: 'c',
  name,
  input,
  argsJson: JSON.stringify(input),
  step: 2,
  maxSteps: 5,
});

const calc = (expression: string) =>
  calculatorTool.run({ expression }, request('calculator', { expression }));

describe('calculator', () => {
  it.each([
    ['1 + 2 * 3', '7'],
    ['(1 + 2) * 3', '9'],
    ['2 ^ 3 ^ 2', '512'],
    ['-2 ^ 2', '-4'],
    ['2 ^ -1', '0.5'],
    ['7 % 4 - 10 / 4', '0.5'],
    ['--3', '3'],
    ['1.5e3 + .5', '1500.5'],
    ['sqrt(16) + abs(-2) + max(1, 9, 3) - min(4, 2)', '13'],
    ['round(2.5) + floor(-1.5) + ceil(1.2)', '3'],
    ['0 * -1', '0'],
    ['  2*pi  ', String(2 * Math.PI)],
  ])('%s = %s', (expression, expected) => {
    expect(calc(expression)).toEqual({ content: expected, isError: false });
  });

  it.each([
    ['1 / 0', 'division by zero'],
    ['5 % 0', 'division by zero'],
    ['1 +', 'the expression ends too early'],
    ['(1 + 2', 'expected ")" at position 7'],
    ['2 3', 'unexpected "3" at position 3'],
    ['process.exit()', 'unknown name "process"'],
    ['sqrt(1, 2)', 'sqrt takes exactly one argument'],
    ['max()', 'max needs at least one argument'],
    ['sqrt 4', 'sqrt needs parentheses'],
    ['10 ^ 400', 'the result is not a finite number'],
    ['1; 2', 'unexpected ";" at position 2'],
    ['('.repeat(100) + '1' + ')'.repeat(100), 'the expression nests deeper than 64 levels'],
  ])('%s fails: %s', (expression, message) => {
    expect(calc(expression)).toEqual({ content: message, isError: true });
  });

  it('refuses a missing or overlong expression', () => {
    expect(calculatorTool.run({}, request('calculator', {}))).toEqual({
      content: 'calculator needs { expression: string }.',
      isError: true,
    });
    expect(calc('1+'.repeat(600) + '1')).toEqual({
      content: 'expression is longer than 1000 characters.',
      isError: true,
    });
  });
});

describe('builtinToolRunner', () => {
  const signal = new AbortController().signal;

  it('reports the step budget', async () => {
    await expect(
      builtinToolRunner.call(request('current_step', {}), { signal, timeoutMs: 1000 }),
    ).resolves.toEqual({ content: '{"step":2,"maxSteps":5,"stepsLeft":3}', isError: false });
  });

  it('counts text by code point, word and line', async () => {
    await expect(
      builtinToolRunner.call(request('text_stats', { text: 'héllo 😀 world\nsecond  line' }), {
        signal,
        timeoutMs: 1000,
      }),
    ).resolves.toEqual({ content: '{"characters":26,"words":5,"lines":2}', isError: false });
  });

  it('answers an unknown name with an error result', async () => {
    await expect(
      builtinToolRunner.call(request('rm', {}), { signal, timeoutMs: 1000 }),
    ).resolves.toEqual({ content: 'rm is not a built-in tool.', isError: true });
  });

  it('offers only pure tools that need no approval', () => {
    expect(builtinTools.map((t) => [t.name, t.effect, t.needsApproval])).toEqual([
      ['calculator', 'pure', false],
      ['current_step', 'pure', false],
      ['text_stats', 'pure', false],
    ]);
  });
});
