/**
 * hack/build-cli.ts: the bundle runs from a folder with no node_modules above it, answers as
 * the sources do, loads no library at start that only a verb needs, and holds no code of
 * the planes that cli/ does not import.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { execFileSync, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { PassThrough } from 'node:stream';

import { runKubectlPolychrome } from '../cli/kube-cli';
import { runCompletion } from '../cli/kube-completion';
import { KUBE_USAGE } from '../cli/kube-verbs';
import { buildCli, startupInputs, type BuiltCli } from './build-cli';
import { headCommit } from './build-info';
import { importGraph } from './lib/import-graph';
import { repoRoot } from './lib/paths';

const dir = mkdtempSync(join(tmpdir(), 'polychrome-bundle-'));
const bundle = join(dir, 'bundle');
let built: BuiltCli;

/**
 * The kubeconfig's server: a port a child process holds for this file's whole run and whose
 * every connection it drops once the client's first TLS record (its ClientHello) is read
 * whole, so a verb that reaches it fails the same way from the sources and from the bundle:
 * the connection ends before the handshake. Dropped at once instead, a ClientHello that
 * arrives after the close draws a reset, and the client reports `read ECONNRESET` or the end
 * of the connection depending on which it reads first (the runs then differed under load).
 * (A port merely closed again could be handed to another process's listener between the
 * tests, and the two runs would then meet different peers; a listener in this process could
 * not answer while `spawnSync` blocks it.)
 */
let closedPort: number;
let dropping: ChildProcess;

const DROPPER = `const server = require('node:net').createServer((socket) => {
  let got = Buffer.alloc(0);
  socket.on('data', (chunk) => {
    got = Buffer.concat([got, chunk]);
    if (got.length >= 5 && got.length >= 5 + got.readUInt16BE(3)) socket.destroy();
  });
});
server.listen(0, '127.0.0.1', () => process.stdout.write(server.address().port + '\\n'));`;

beforeAll(async () => {
  built = await buildCli(bundle);
  dropping = spawn(process.execPath, ['-e', DROPPER], { stdio: ['ignore', 'pipe', 'inherit'] });
  const [line] = (await once(createInterface({ input: dropping.stdout! }), 'line')) as [string];
  closedPort = Number(line);
}, 120_000);
afterAll(async () => {
  const exited = once(dropping, 'exit');
  dropping.kill();
  await exited;
  rmSync(dir, { recursive: true, force: true });
});

/** Runs a bundle entry as its own process, in `dir`, with PATH holding node only and HOME `dir`. */
function runBundle(entry: string, args: readonly string[]) {
  const run = spawnSync(process.execPath, [join(bundle, `${entry}.mjs`), ...args], {
    cwd: dir,
    env: { PATH: dirname(process.execPath), HOME: dir },
    encoding: 'utf8',
    timeout: 30_000,
  });
  return { status: run.status, out: run.stdout, err: run.stderr };
}

/** What the sources print for the same arguments, run in this process. */
async function runSource(
  run: (
    args: readonly string[],
    io: { stdout: PassThrough; stderr: PassThrough },
  ) => Promise<number>,
  args: readonly string[],
) {
  const stdout = new PassThrough();
  const stderr = new PassThrough();
  const text = { out: '', err: '' };
  stdout.on('data', (c: Buffer) => (text.out += c.toString()));
  stderr.on('data', (c: Buffer) => (text.err += c.toString()));
  const status = await run(args, { stdout, stderr });
  return { status, ...text };
}

/** A kubeconfig whose cluster is the closed port. */
function kubeconfig(): string {
  const path = join(dir, 'kubeconfig');
  writeFileSync(
    path,
    [
      'apiVersion: v1',
      'kind: Config',
      'clusters:',
      `- {name: c, cluster: {server: "https://127.0.0.1:${closedPort}"}}`,
      'users:',
      '- {name: u, user: {token: not-a-real-token}}',
      'contexts:',
      '- {name: ctx, context: {cluster: c, user: u, namespace: team}}',
      'current-context: ctx',
      '',
    ].join('\n'),
  );
  return path;
}

/**
 * The budget of a test that runs bundle processes one after another (up to nine, each a
 * node start): jest's 5 s default is less than that takes on a loaded 2-core machine.
 */
const PROCESS_TESTS_MS = 60_000;

describe('the CLI bundle', () => {
  it(
    'runs with no node_modules reachable: help, VERB --help, version',
    () => {
      for (let up = dir; up !== dirname(up); up = dirname(up)) {
        expect(existsSync(join(up, 'node_modules'))).toBe(false);
      }
      expect(runBundle('kubectl-polychrome', ['help'])).toEqual({
        status: 0,
        out: KUBE_USAGE,
        err: '',
      });
      const { version } = JSON.parse(readFileSync(join(repoRoot, 'package.json'), 'utf8')) as {
        version: string;
      };
      expect(runBundle('kubectl-polychrome', ['version'])).toEqual({
        status: 0,
        out: `kubectl-polychrome ${version} (commit ${headCommit(repoRoot) ?? ''})\n`,
        err: '',
      });
      const cli = runBundle('polychrome', ['help']);
      expect(cli.status).toBe(0);
      expect(cli.out).toMatch(/^usage: polychrome <command>\n/u);
      expect(runBundle('polychrome', ['version'])).toEqual({
        status: 0,
        out: `polychrome ${version} (commit ${headCommit(repoRoot) ?? ''})\n`,
        err: '',
      });
      const verb = runBundle('polychrome', ['state', 'verify', '--help']);
      expect(verb.status).toBe(0);
      expect(verb.out).toMatch(/^usage: polychrome state verify \.\.\.\n/u);
    },
    PROCESS_TESTS_MS,
  );

  it(
    'completes as the sources do',
    async () => {
      const config = kubeconfig();
      for (const args of [
        [''],
        ['s'],
        ['ses'],
        ['sessions', ''],
        ['personas', ''],
        ['get', '-'],
        ['get', 'hello', ''],
        ['get', '--kubeconfig', config, ''],
        ['-n', 'team', 're'],
      ]) {
        const source = await runSource(runCompletion, args);
        expect({ args, ...runBundle('kubectl-complete-polychrome', args) }).toEqual({
          args,
          ...source,
        });
      }
      expect(runBundle('kubectl-complete-polychrome', ['s']).out).toBe('send\nsessions\n:4\n');
    },
    PROCESS_TESTS_MS,
  );

  it(
    'reads a kubeconfig and reaches for the cluster as the sources do',
    async () => {
      const args = ['transcript', 'hello', '--kubeconfig', kubeconfig()];
      const source = await runSource(runKubectlPolychrome, args);
      expect(source.err).toContain(`https://127.0.0.1:${closedPort} (context ctx, namespace team)`);
      expect(runBundle('kubectl-polychrome', args)).toEqual(source);
    },
    PROCESS_TESTS_MS,
  );

  it('loads at start none of the libraries only a verb needs', () => {
    const verbOnly = /node_modules\/(@kubernetes|@grpc|protobufjs|@anthropic-ai|zod|yaml)\//u;
    for (const entry of ['kubectl-polychrome', 'kubectl-complete-polychrome', 'polychrome']) {
      const inputs = startupInputs(built.metafile, entry);
      expect(inputs).toContain(`cli/${entry}.ts`);
      expect({
        entry,
        loaded: inputs.filter((i) => verbOnly.test(i) || i.startsWith('proto/')),
      }).toEqual({ entry, loaded: [] });
    }
    // ...and they are in the bundle, for the verbs that load them.
    const all = Object.keys(built.metafile.inputs);
    expect(all.some((i) => i.includes('node_modules/@kubernetes/client-node/'))).toBe(true);
    expect(all.some((i) => i.includes('node_modules/@grpc/grpc-js/'))).toBe(true);
  });

  it('holds no code of operator/, state/ or harness/ that cli/ does not import', () => {
    const listed = execFileSync(
      'git',
      ['ls-files', '--cached', '--others', '--exclude-standard', '*.ts'],
      {
        cwd: repoRoot,
        encoding: 'utf8',
      },
    );
    const files = listed.split('\n').filter((f) => f !== '' && !f.endsWith('.test.ts'));
    const graph = importGraph(
      new Map(files.map((f) => [f, readFileSync(join(repoRoot, f), 'utf8')])),
    );
    const reached = new Set<string>();
    const stack = [
      'cli/kubectl-polychrome.ts',
      'cli/kubectl-complete-polychrome.ts',
      'cli/polychrome.ts',
    ];
    for (let next = stack.pop(); next !== undefined; next = stack.pop()) {
      if (reached.has(next)) continue;
      reached.add(next);
      stack.push(...(graph.get(next) ?? []));
    }
    const planes = Object.keys(built.metafile.inputs)
      .map((input) => relative(repoRoot, resolve(repoRoot, input)))
      .filter((input) => /^(operator|state|harness)\//u.test(input));
    expect(planes.length).toBeGreaterThan(0);
    expect(planes.filter((input) => !reached.has(input))).toEqual([]);
    expect(planes.filter((input) => input.startsWith('operator/'))).toEqual([]);
  });
});
