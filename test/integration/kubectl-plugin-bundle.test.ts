/**
 * The bundled completion (hack/build-cli.ts) against the shared local cluster's
 * kube-apiserver: Conversation names completed by the bundle, run from a folder with no
 * node_modules and only node on the PATH, are what the sources complete for the same words
 * (docs/kubectl.md, "Completion" and "Start time").
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { PassThrough } from 'node:stream';

import { runCompletion } from '../../cli/kube-completion';
import { buildCli } from '../../hack/build-cli';
import { TEST_CONVERSATION_SPEC } from '../support/real-turns';
import {
  createConversationObject,
  freshNamespace,
  kubeConfig,
  sharedCluster,
} from './support/kube';

const NAMES = ['alpha', 'alpine', 'beta'];

describe('the bundled kubectl_complete-polychrome', () => {
  const dir = mkdtempSync(join(tmpdir(), 'polychrome-bundle-it-'));
  let namespace: { name: string; dispose: () => Promise<void> };
  let kubeconfig: string;

  beforeAll(async () => {
    await buildCli(join(dir, 'bundle'), ['kubectl-complete-polychrome']);
    const admin = await kubeConfig();
    kubeconfig = (await sharedCluster()).kubeconfigPath;
    namespace = await freshNamespace(admin, 'kbundle');
    for (const name of NAMES) {
      await createConversationObject(admin, namespace.name, name, TEST_CONVERSATION_SPEC);
    }
  }, 120_000);
  afterAll(async () => {
    await namespace.dispose();
    rmSync(dir, { recursive: true, force: true });
  });

  /** The bundle as its own process: HOME is the temporary folder, PATH holds node only. */
  const bundled = (args: readonly string[]): string => {
    const run = spawnSync(
      process.execPath,
      [join(dir, 'bundle', 'kubectl-complete-polychrome.mjs'), ...args],
      {
        cwd: dir,
        env: { PATH: dirname(process.execPath), HOME: dir, KUBECONFIG: kubeconfig },
        encoding: 'utf8',
        timeout: 30_000,
      },
    );
    expect(run.stderr).toBe('');
    expect(run.status).toBe(0);
    return run.stdout;
  };

  /** The sources, in this process, with the same kubeconfig. */
  const source = async (args: readonly string[]): Promise<string> => {
    const stdout = new PassThrough();
    let out = '';
    stdout.on('data', (c: Buffer) => (out += c.toString()));
    await runCompletion(args, { stdout, stderr: new PassThrough() }, { KUBECONFIG: kubeconfig });
    return out;
  };

  it('completes the Conversation names of a namespace as the sources do', async () => {
    const ns = namespace.name;
    expect(bundled(['get', '-n', ns, 'al'])).toBe('alpha\nalpine\n:4\n');
    expect(bundled(['transcript', '--namespace', ns, ''])).toBe('alpha\nalpine\nbeta\n:4\n');
    for (const args of [
      ['get', '-n', ns, 'al'],
      ['send', `--namespace=${ns}`, 'b'],
      ['export', '-n', ns, ''],
      ['get', '-n', 'no-such-namespace', ''],
      ['sessions', ''],
      ['ap'],
    ]) {
      expect({ args, out: bundled(args) }).toEqual({ args, out: await source(args) });
    }
  });
});
