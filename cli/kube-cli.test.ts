import { describe, expect, it } from '@jest/globals';
import { PassThrough } from 'node:stream';

import { ExitCode } from './cli-support';
import { completions } from './kube-completion';
import { runKubectlPolychrome } from './kube-cli';

function io() {
  const stdout = new PassThrough();
  const stderr = new PassThrough();
  const text = { out: '', err: '' };
  stdout.on('data', (c: Buffer) => (text.out += c.toString()));
  stderr.on('data', (c: Buffer) => (text.err += c.toString()));
  return { io: { stdout, stderr }, text };
}

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
