/**
 * How a release goes onto the empty cluster of support/release-install.ts: its
 * polychrome.yaml applied server-side, or its Helm chart installed from the registry, each
 * as the docs tell a platform team (docs/operator.md, docs/release.md "Installing").
 */
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { defaultBinDir, repoRoot } from '../../../hack/lib/paths';
import { type InstallStep, kubectl } from './release-install';

const run = promisify(execFile);

/**
 * `helm` (hack/bin) against `kubeconfig`, its caches and settings under `home`; rejects with
 * its stderr.
 */
export async function helm(
  kubeconfig: string,
  home: string,
  args: readonly string[],
): Promise<string> {
  try {
    const { stdout } = await run(
      join(defaultBinDir, 'helm'),
      [...args, `--kubeconfig=${kubeconfig}`],
      {
        maxBuffer: 16 << 20,
        env: {
          PATH: process.env.PATH ?? '',
          // Its Kubernetes client caches discovery under ~/.kube: in `home` too.
          HOME: home,
          HELM_CACHE_HOME: join(home, 'cache'),
          HELM_CONFIG_HOME: join(home, 'config'),
          HELM_DATA_HOME: join(home, 'data'),
        },
      },
    );
    return stdout;
  } catch (err: unknown) {
    const e = err as { stderr?: string; message: string };
    throw new Error(`helm ${args.join(' ')}: ${e.stderr ?? e.message}`);
  }
}

/** `kubectl apply --server-side -f manifest` (polychrome.yaml, docs/operator.md). */
export function applyManifest(manifest: string): InstallStep {
  return {
    name: 'kubectl apply',
    run: async (kubeconfig) => {
      await kubectl(kubeconfig, ['apply', '--server-side', '-f', manifest]);
    },
  };
}

/** The registry and version docs/release.md's commands are written for. */
export const DOCS_REGISTRY = 'ghcr.io/acme/polychrome';
export const DOCS_VERSION = '0.2.0';

/**
 * The `helm install` command docs/release.md ("Installing") gives a platform team, its
 * arguments after `helm`, for the release at `registry` (REGISTRY of make release) and
 * `version`: the docs' example registry and version replaced.
 *
 * @throws Error when the page has no such command, or it names another registry or version.
 */
export function documentedHelmInstall(registry: string, version: string): string[] {
  const page = readFileSync(join(repoRoot, 'docs', 'release.md'), 'utf8');
  const blocks = [...page.matchAll(/```sh\n([\s\S]*?)```/gu)].map((m) => m[1] ?? '');
  const command = blocks
    .flatMap((b) => b.replace(/\\\n/gu, ' ').split('\n'))
    .find((l) => l.trimStart().startsWith('helm install '));
  if (command === undefined)
    throw new Error('docs/release.md gives no `helm install` command in a ```sh block');
  const args = command.replace(/#.*$/u, '').trim().split(/\s+/u).slice(1);
  const text = args.join(' ');
  if (!text.includes(`oci://${DOCS_REGISTRY}/charts/`) || !text.includes(DOCS_VERSION))
    throw new Error(
      `docs/release.md's helm install (${text}) is not for oci://${DOCS_REGISTRY}/charts/… at ${DOCS_VERSION}`,
    );
  return args.map((a) => a.replace(DOCS_REGISTRY, registry).replace(DOCS_VERSION, version));
}

/**
 * `helm <args>` (documentedHelmInstall's), with `--plain-http` for a registry on this
 * machine.
 */
export function helmInstall(args: readonly string[]): InstallStep {
  return {
    name: 'helm install',
    run: async (kubeconfig, dir) => {
      await helm(kubeconfig, join(dir, 'helm'), [...args, '--plain-http']);
    },
  };
}
