import { afterAll, describe, expect, it } from '@jest/globals';
import { PassThrough } from 'node:stream';

import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { ExitCode } from './cli-support';
import { completions } from './kube-completion';
import { runKubectlPolychrome } from './kube-cli';
import { versionText } from './build-info';
import { KUBE_ACTOR_VERBS, KUBE_USAGE, KUBE_VERBS } from './kube-verbs';

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
    expect(await runKubectlPolychrome(['replay', 'hello', '--actor', 'dave'], c.io)).toBe(
      ExitCode.Usage,
    );
    expect(c.text.err).toContain('--actor "dave" is not an identity');
  });

  it('asks the cluster who you are when --actor is left out, so it needs a kubeconfig (exit 3)', async () => {
    for (const args of [
      ['replay', 'hello'],
      ['export', 'hello'],
      ['erase', 'hello', '3', '--reason', 'pii'],
    ]) {
      const a = io();
      const code = await runKubectlPolychrome(args, a.io, {
        KUBECONFIG: '/nonexistent/kubeconfig',
      });
      expect({ args, code, err: a.text.err }).toEqual({
        args,
        code: ExitCode.Error,
        err: expect.stringContaining('no kubeconfig: /nonexistent/kubeconfig') as unknown,
      });
    }
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

/** A kubeconfig that does not exist: a verb that reached for the cluster would exit 3. */
const noCluster = { KUBECONFIG: '/nonexistent/kubeconfig' };

describe('kubectl polychrome VERB --help', () => {
  const verbs = KUBE_VERBS.filter((v) => v !== 'help');

  it.each(verbs)('%s --help prints its own usage, reaching no cluster (exit 0)', async (verb) => {
    const a = io();
    expect(await runKubectlPolychrome([verb, '--help'], a.io, noCluster)).toBe(ExitCode.Ok);
    expect(a.text.err).toBe('');
    const lines = a.text.out.split('\n');
    expect(lines[0]).toBe(`usage: kubectl polychrome ${verb} ...`);
    // Its own entries of the usage, and no other verb's.
    const entries = lines.filter((l) => /^ {2}\S/u.test(l));
    expect(entries.length).toBeGreaterThan(0);
    for (const entry of entries) expect(entry).toMatch(new RegExp(`^ {2}${verb}( |$)`, 'u'));
    for (const entry of entries) expect(KUBE_USAGE).toContain(entry);
    expect(a.text.out).toContain('kube flags: --kubeconfig FILE');
    expect(a.text.out.includes('--actor defaults to you')).toBe(KUBE_ACTOR_VERBS.has(verb));
  });

  it('answers -h, and `help VERB`, the same; a name, flags or a bad name before it do not matter', async () => {
    const help = io();
    expect(await runKubectlPolychrome(['help', 'approve'], help.io)).toBe(ExitCode.Ok);
    for (const args of [
      ['approve', '-h'],
      ['approve', 'Not_A_Name', 'x', '--deny', '--help'],
      ['approve', '--help', '-o', 'yaml'],
    ]) {
      const a = io();
      expect(await runKubectlPolychrome(args, a.io, noCluster)).toBe(ExitCode.Ok);
      expect({ args, out: a.text.out }).toEqual({ args, out: help.text.out });
    }
    expect(help.text.out).toContain('--cancel: delete');
    expect(help.text.out).not.toContain('  send ');
  });

  it('takes --help after -- as text, and refuses help for a word that is not a verb', async () => {
    const a = io();
    expect(await runKubectlPolychrome(['send', 'hello', '--', '--help'], a.io, noCluster)).toBe(
      ExitCode.Error,
    );
    expect(a.text.err).toContain('no kubeconfig');
    const b = io();
    expect(await runKubectlPolychrome(['help', 'frobnicate'], b.io)).toBe(ExitCode.Usage);
    expect(b.text.err).toContain('unknown verb "frobnicate"');
    const c = io();
    expect(await runKubectlPolychrome(['help'], c.io)).toBe(ExitCode.Ok);
    expect(c.text.out).toBe(KUBE_USAGE);
    // The kube flags every verb takes are taken, and unused, by help and version.
    const d = io();
    expect(await runKubectlPolychrome(['help', '-n', 'team', '--context=x'], d.io)).toBe(
      ExitCode.Ok,
    );
    expect(d.text.out).toBe(KUBE_USAGE);
    const e = io();
    expect(await runKubectlPolychrome(['help', '-n', 'team', 'send'], e.io)).toBe(ExitCode.Ok);
    expect(e.text.out).toContain('  send NAME TEXT...');
    const f = io();
    expect(await runKubectlPolychrome(['help', 'send', 'get'], f.io)).toBe(ExitCode.Usage);
    expect(f.text.err).toContain('help takes one verb, got send get');
  });
});

describe('kubectl polychrome version', () => {
  const dirs: string[] = [];
  afterAll(() => {
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });
  /** A built layout: package.json at the root, the compiled cli/ and build-info.json in dist/. */
  function built(version: string, info: string | undefined): string {
    const root = mkdtempSync(join(tmpdir(), 'polychrome-version-'));
    dirs.push(root);
    mkdirSync(join(root, 'dist', 'cli'), { recursive: true });
    writeFileSync(join(root, 'package.json'), JSON.stringify({ name: 'polychrome', version }));
    if (info !== undefined) writeFileSync(join(root, 'dist', 'build-info.json'), info);
    return join(root, 'dist', 'cli');
  }

  it("prints package.json's version; from the sources, no build recorded a commit", async () => {
    const pkg = JSON.parse(readFileSync(join(__dirname, '..', 'package.json'), 'utf8')) as {
      version: string;
    };
    const a = io();
    expect(await runKubectlPolychrome(['version'], a.io, noCluster)).toBe(ExitCode.Ok);
    expect(a.text.out).toBe(
      `kubectl-polychrome ${pkg.version} (commit unknown: not built with \`make build\` from a git checkout)\n`,
    );
    const b = io();
    expect(await runKubectlPolychrome(['version', 'extra'], b.io)).toBe(ExitCode.Usage);
    const c = io();
    expect(await runKubectlPolychrome(['version', '-n', 'team'], c.io, noCluster)).toBe(
      ExitCode.Ok,
    );
    expect(c.text.out).toBe(a.text.out);
  });

  it('prints the commit a build recorded, and only a commit', () => {
    const commit = 'a'.repeat(40);
    expect(versionText('kubectl-polychrome', built('1.2.3', JSON.stringify({ commit })))).toBe(
      `kubectl-polychrome 1.2.3 (commit ${commit})\n`,
    );
    for (const info of [JSON.stringify({ commit: '$(reboot)' }), '{}', 'not json']) {
      expect(versionText('kubectl-polychrome', built('1.2.3', info))).toBe(
        'kubectl-polychrome 1.2.3 (commit unknown: not built with `make build` from a git checkout)\n',
      );
    }
  });
});

describe('completions', () => {
  it('completes verbs, and sessions and personas actions', async () => {
    expect(await completions(['a'])).toEqual(['approve', 'answer', 'accept-rollback']);
    expect(await completions(['sessions', ''])).toEqual(['create', 'revoke']);
    expect(await completions(['personas', ''])).toEqual(['set-roles', 'payment-policy']);
    expect(await completions(['personas', 'payment-policy', ''])).toEqual(['set', 'clear', 'get']);
    expect(await completions(['personas', 'payment-policy', 'g'])).toEqual(['get']);
    expect(await completions(['personas', 'set-roles', ''])).toEqual([]);
    expect(await completions(['send', 'hello', ''])).toEqual([]);
  });

  it('offers no names when the kubeconfig cannot be read', async () => {
    expect(await completions(['get', ''], { KUBECONFIG: '/nonexistent' })).toEqual([]);
  });
});
