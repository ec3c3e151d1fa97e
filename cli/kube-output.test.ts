import { PassThrough } from 'node:stream';

import { describe, expect, it } from '@jest/globals';
import { parseAllDocuments } from 'yaml';

import { translateOutput, yamlWriter } from './kube-output';

describe('translateOutput', () => {
  it.each([
    [['get', 'x', '-o', 'json'], ['get', 'x', '--format', 'json'], false],
    [['get', 'x', '-oyaml'], ['get', 'x', '--format', 'json'], true],
    [['get', 'x', '--output=yaml'], ['get', 'x', '--format', 'json'], true],
    [['get', 'x', '--output', 'text'], ['get', 'x', '--format', 'text'], false],
    [['send', 'x', '--', '-o', 'yaml'], ['send', 'x', '--', '-o', 'yaml'], false],
  ])('%j is %j', (args, out, yaml) => {
    expect(translateOutput(args)).toEqual({ args: out, yaml });
  });

  it('refuses another output, naming the ones it takes', () => {
    expect(() => translateOutput(['-o', 'wide'])).toThrow(
      '-o must be json, yaml or text, got "wide"',
    );
    expect(() => translateOutput(['-o'])).toThrow('-o needs a value');
  });
});

describe('yamlWriter', () => {
  it('writes one YAML document per JSON line, split anywhere', async () => {
    const out = new PassThrough();
    let text = '';
    out.on('data', (c: Buffer) => (text += c.toString()));
    const yaml = await yamlWriter(out);
    yaml.write('{"a":1}\n{"b":');
    yaml.write('[1,2]}\n');
    await new Promise<void>((resolve) => yaml.end(resolve));
    expect(parseAllDocuments(text).map((d) => d.toJS() as unknown)).toEqual([
      { a: 1 },
      { b: [1, 2] },
    ]);
  });
});
