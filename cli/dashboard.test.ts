import { PassThrough } from 'node:stream';

import { describe, expect, it } from '@jest/globals';

import { UsageError } from './cli-support';
import { dashboardCommand, openBrowser } from './dashboard';
import { runCli } from './run-cli';

function io(): { stdout: PassThrough; stderr: PassThrough; text: () => string } {
  const stdout = new PassThrough();
  const stderr = new PassThrough();
  let text = '';
  stderr.on('data', (chunk: Buffer) => (text += chunk.toString()));
  stdout.on('data', (chunk: Buffer) => (text += chunk.toString()));
  return { stdout, stderr, text: () => text };
}

describe('polychrome dashboard', () => {
  it('opens a browser only where there is a display', () => {
    expect(openBrowser('http://127.0.0.1:1/', {}, 'linux')).toBe(false);
    expect(openBrowser('http://127.0.0.1:1/', {}, 'win32')).toBe(false);
  });

  it('names a wrong port and a stray argument', async () => {
    await expect(dashboardCommand(['--port', 'http'], io(), {})).rejects.toThrow(UsageError);
    await expect(dashboardCommand(['--port', '70000'], io(), {})).rejects.toThrow(
      '--port must be a port number',
    );
    await expect(dashboardCommand(['extra'], io(), {})).rejects.toThrow('takes no arguments');
  });

  it('says which kubeconfig it could not use, through the CLI', async () => {
    const out = io();
    const code = await runCli(
      ['dashboard', '--kubeconfig', '/nonexistent/kubeconfig', '--no-open'],
      out,
      {},
    );
    expect(code).toBe(3);
    expect(out.text()).toContain('/nonexistent/kubeconfig');
  });
});
