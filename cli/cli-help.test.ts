import { readFileSync } from 'node:fs';
import { join } from 'node:path';

import { describe, expect, it } from '@jest/globals';

import { ExitCode } from './cli-support';
import { USAGE } from './run-cli';
import { runCaptured } from './testdata/captured-run';

/*
 * `polychrome help COMMAND`, `polychrome COMMAND --help` and `polychrome version`, through
 * the entry point's own runCli: text only, reaching no server (no api or state flags are
 * set, so a command that ran would fail).
 */

const run = (args: readonly string[]): ReturnType<typeof runCaptured> => runCaptured(args, {});

/** Every command the usage names: the words of each header line before its first argument. */
const COMMANDS = [
  ...new Set(
    USAGE.split('\n')
      .filter((line) => line.startsWith('  polychrome '))
      .map((line) => {
        const words = line.trim().split(' ').slice(1);
        const end = words.findIndex((w) => !/^[a-z][a-z-]*$/u.test(w));
        return words.slice(0, end === -1 ? undefined : end).join(' ');
      }),
  ),
];

describe('polychrome COMMAND --help', () => {
  it('knows the commands the usage names', () => {
    expect(COMMANDS).toEqual(
      expect.arrayContaining(['send', 'state verify', 'journal replay', 'payments link']),
    );
  });

  it.each(COMMANDS)('%s --help prints its own lines of the usage (exit 0)', async (command) => {
    const words = command.split(' ');
    const a = await run([...words, '--help']);
    expect(a.code).toBe(ExitCode.Ok);
    expect(a.stderr).toBe('');
    expect(a.stdout).toMatch(new RegExp(`^usage: polychrome ${command} \\.\\.\\.\\n\\n`, 'u'));
    expect(a.stdout).toMatch(new RegExp(`^ {2}polychrome ${command}( |$)`, 'mu'));
    expect(a.stdout).toContain('\nexit codes: 0 ok');
    // Only its own: its forms, and the forms that share its description (payments link,
    // unlink and policy), never another group's.
    const group = words[0] ?? '';
    for (const line of a.stdout.split('\n').filter((l) => l.startsWith('  polychrome '))) {
      expect(line).toMatch(new RegExp(`^ {2}polychrome ${group}( |$)`, 'u'));
    }
    expect(a.stdout.length).toBeLessThan(USAGE.length / 2);
    // -h and `help COMMAND` say the same.
    for (const args of [
      [...words, '-h'],
      ['help', ...words],
    ]) {
      expect({ args, ...(await run(args)) }).toEqual({ args, ...a });
    }
  });

  it('takes the flags and arguments the command would, and -- ends the flags', async () => {
    const help = await run(['help', 'state', 'verify']);
    const withArgs = await run(['state', 'verify', 'conv-1', '--ca', 'x', '--json', '--help']);
    expect(withArgs).toEqual(help);
    // After --, --help is text: send runs, and fails here on its conversation id.
    const text = await run(['send', 'not-an-id', '--', '--help']);
    expect(text.code).toBe(ExitCode.Usage);
    expect(text.stdout).toBe('');
    expect(text.stderr).toContain('"not-an-id" is not a conversation id');
  });

  it('carries the notes and flags the command refers to, and no others', async () => {
    const verify = (await run(['state', 'verify', '--help'])).stdout;
    expect(verify).toContain('  --checkpoint N:ROOTHEX[:KEYID] catches a journal cut short');
    expect(verify).toContain('connection flags (or environment variables):\n  --address');
    expect(verify).toContain('\n--json is short for --format json.\n');
    expect((await run(['state', 'backup', '--help'])).stdout).not.toContain('--json');
    expect(verify).not.toContain('api flags');
    expect(verify).not.toContain('Journal keys');
    const replay = (await run(['conversation', 'replay', '--help'])).stdout;
    expect(replay).toContain('  Journal keys (conversation verify and replay):');
    expect(replay).toContain('CHANGE is one of:\n    tool-result@POS=TEXT');
    expect(replay).toContain('TEXT or JSON may be @FILE');
    expect(replay).toContain('api flags (or environment variables):\n  --api URL');
    expect(replay).not.toContain('connection flags');
    const offline = (await run(['journal', 'verify', '--help'])).stdout;
    expect(offline).not.toContain('Journal keys');
    expect(offline).not.toContain('flags (or environment variables)');
    // One description serves the forms above it.
    const link = (await run(['payments', 'link', '--help'])).stdout;
    expect(link).toContain('  polychrome payments unlink ID');
    expect(link).toContain('Link a wallet of the control plane');
  });

  it('refuses help for words that name no command, naming them (exit 2)', async () => {
    for (const args of [
      ['frobnicate', '--help'],
      ['help', 'frobnicate'],
    ]) {
      const r = await run(args);
      expect({ args, code: r.code, stdout: r.stdout }).toEqual({
        args,
        code: ExitCode.Usage,
        stdout: '',
      });
      expect(r.stderr).toContain('no command "frobnicate" to give');
      expect(r.stderr).toContain('`polychrome help` lists the commands');
    }
    expect(await run(['help'])).toEqual({ code: ExitCode.Ok, stdout: USAGE, stderr: '' });
  });
});

describe('polychrome version', () => {
  it("prints package.json's version; from the sources, no build recorded a commit", async () => {
    const { version } = JSON.parse(readFileSync(join(__dirname, '..', 'package.json'), 'utf8')) as {
      version: string;
    };
    expect(await run(['version'])).toEqual({
      code: ExitCode.Ok,
      stdout: `polychrome ${version} (commit unknown: not built with \`make build\` from a git checkout)\n`,
      stderr: '',
    });
    const extra = await run(['version', 'now']);
    expect(extra.code).toBe(ExitCode.Usage);
    expect(extra.stderr).toContain('version takes no argument, got now');
  });
});
