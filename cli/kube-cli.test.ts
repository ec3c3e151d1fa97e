import { describe, expect, it } from '@jest/globals';
import { PassThrough } from 'node:stream';

import { parseAllDocuments } from 'yaml';

import { ExitCode } from './cli-support';
import { completions } from './kube-completion';
import { runKubectlPolychrome, translateOutput, yamlWriter } from './kube-cli';

function io() {
  const stdout = new PassThrough();
  const stderr = new PassThrough();
  const text = { out: '', err: '' };
  stdout.on('data', (c: Buffer) => (text.out += c.toString()));
  stderr.on('data', (c: Buffer) => (text.err += c.toString()));
  return { io: { stdout, stderr }, text };
}

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
    const yaml = yamlWriter(out);
    yaml.write('{"a":1}\n{"b":');
    yaml.write('[1,2]}\n');
    await new Promise<void>((resolve) => yaml.end(resolve));
    expect(parseAllDocuments(text).map((d) => d.toJS() as unknown)).toEqual([
      { a: 1 },
      { b: [1, 2] },
    ]);
  });
});

describe('runKubectlPolychrome', () => {
  it('answers an unknown verb and a bad name with a usage error (exit 2)', async () => {
    const a = io();
    expect(await runKubectlPolychrome(['frobnicate'], a.io)).toBe(ExitCode.Usage);
    expect(a.text.err).toContain('kubectl polychrome: unknown verb "frobnicate"');
    const b = io();
    expect(await runKubectlPolychrome(['transcript', 'Not_A_Name'], b.io)).toBe(ExitCode.Usage);
    expect(b.text.err).toContain('is not a Conversation name');
    const c = io();
    expect(await runKubectlPolychrome(['replay', 'hello'], c.io)).toBe(ExitCode.Usage);
    expect(c.text.err).toContain('--actor is required');
  });

  it('names the kubeconfig to set when there is none (exit 3)', async () => {
    const a = io();
    const code = await runKubectlPolychrome(['transcript', 'hello'], a.io, {
      KUBECONFIG: '/nonexistent/kubeconfig',
    });
    expect(code).toBe(ExitCode.Error);
    expect(a.text.err).toContain(
      'no kubeconfig: /nonexistent/kubeconfig (from KUBECONFIG) does not exist',
    );
  });
});

describe('completions', () => {
  it('completes verbs, and sessions actions', async () => {
    expect(await completions(['a'])).toEqual(['approve', 'answer', 'accept-rollback']);
    expect(await completions(['sessions', ''])).toEqual(['create', 'revoke']);
    expect(await completions(['send', 'hello', ''])).toEqual([]);
  });

  it('offers no names when the kubeconfig cannot be read', async () => {
    expect(await completions(['get', ''], { KUBECONFIG: '/nonexistent' })).toEqual([]);
  });
});
