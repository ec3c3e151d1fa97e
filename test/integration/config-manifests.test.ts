/**
 * config/ on a real API server, the way Argo CD syncs it: kustomize-built, server-side
 * applied with a server dry run (schema, strict field validation, admission, defaulting;
 * nothing is stored), and compared with what went in, so a field the server drops (an
 * unknown or feature-gated one) fails the test. hack/config-manifests.test.ts checks the
 * same files against the code that reads them.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse, parseAllDocuments } from 'yaml';
import { defaultBinDir, repoRoot } from '../../hack/lib/local-cluster';
import { freshNamespace, kubeConfig, sharedCluster } from './support/kube';

type Obj = Record<string, unknown>;

function isObj(value: unknown): value is Obj {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function kubectl(kubeconfig: string, args: readonly string[], input?: string): string {
  return execFileSync(join(defaultBinDir, 'kubectl'), [`--kubeconfig=${kubeconfig}`, ...args], {
    encoding: 'utf8',
    ...(input === undefined ? {} : { input }),
    stdio: ['pipe', 'pipe', 'pipe'],
  });
}

/** kubectl's error output when it exits non-zero, else a failure. */
function kubectlError(kubeconfig: string, args: readonly string[], input?: string): string {
  try {
    kubectl(kubeconfig, args, input);
  } catch (err: unknown) {
    const stderr: unknown = isObj(err) ? err['stderr'] : undefined;
    return typeof stderr === 'string' ? stderr : String(err);
  }
  throw new Error(`kubectl ${args.join(' ')} succeeded`);
}

/** The objects of a kustomization, as `kubectl kustomize` builds them. */
function build(kubeconfig: string, dir: string): Obj[] {
  return parseAllDocuments(kubectl(kubeconfig, ['kustomize', join(repoRoot, dir)]))
    .map((d) => d.toJS() as unknown)
    .filter(isObj);
}

/** The objects `kubectl ... -o json` printed (one object, or a List of them). */
function printed(json: string): Obj[] {
  const out: unknown = JSON.parse(json);
  if (!isObj(out)) return [];
  return out['kind'] === 'List' && Array.isArray(out['items']) ? out['items'].filter(isObj) : [out];
}

const nameOf = (o: Obj): unknown => (isObj(o['metadata']) ? o['metadata']['name'] : undefined);
const keyOf = (o: Obj): string => `${String(o['kind'])}/${String(nameOf(o))}`;

/**
 * `value` as the API server prints it: fields that hold an empty string are omitted
 * (`omitempty`), so `value: ''` comes back as no `value` at all.
 */
function withoutEmptyStrings(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(withoutEmptyStrings);
  if (!isObj(value)) return value;
  return Object.fromEntries(
    Object.entries(value)
      .filter(([, v]) => v !== '')
      .map(([k, v]) => [k, withoutEmptyStrings(v)]),
  );
}

/** The returned object for each built one, by kind and name. */
function matchUp(built: readonly Obj[], returned: readonly Obj[]): [Obj, Obj | undefined][] {
  return built.map((b) => [b, returned.find((r) => keyOf(r) === keyOf(b))]);
}

/** `pod` with the control plane's pod template spec, for a dry-run Pod create. */
function podFrom(deployment: Obj, name: string): Obj {
  const spec = deployment['spec'];
  const template = isObj(spec) ? spec['template'] : undefined;
  if (!isObj(template)) throw new Error('the Deployment has no pod template');
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { ...(template['metadata'] as Obj), name },
    spec: template['spec'],
  };
}

describe('config/ manifests on a real API server', () => {
  let kubeconfig: string;
  let ns: { name: string; dispose: () => Promise<void> };
  beforeAll(async () => {
    kubeconfig = (await sharedCluster()).kubeconfigPath;
    ns = await freshNamespace(await kubeConfig(), 'manifests');
  });
  afterAll(async () => {
    await ns.dispose();
  });

  it('accepts the whole base under config/ on a server-side dry run and drops none of its fields', () => {
    // The base's namespaced objects need their namespace to exist before a dry run can
    // admit them: apply the base's own Namespace for real (the same object, the same field
    // manager as a full sync; idempotent).
    kubectl(kubeconfig, [
      'apply',
      '--server-side',
      '-f',
      join(repoRoot, 'config', 'namespace.yaml'),
    ]);
    const built = build(kubeconfig, 'config');
    expect(built.map(keyOf)).toEqual(
      expect.arrayContaining([
        'Deployment/polychrome-control-plane',
        'Service/polychrome-control-plane',
        'PodDisruptionBudget/polychrome-control-plane',
        'StatefulSet/polychrome-state',
      ]),
    );
    const returned = printed(
      kubectl(kubeconfig, [
        'apply',
        '--server-side',
        '--dry-run=server',
        '-k',
        join(repoRoot, 'config'),
        '-o',
        'json',
      ]),
    );
    for (const [b, r] of matchUp(built, returned)) {
      expect({ key: keyOf(b), found: r !== undefined }).toEqual({ key: keyOf(b), found: true });
      // Defaults are added; nothing that went in is missing or changed.
      expect(r).toMatchObject(withoutEmptyStrings(b) as Obj);
    }
  });

  it('admits the control plane pod under the restricted Pod Security level its namespace enforces', () => {
    // A namespace labelled as config/namespace.yaml labels polychrome-system.
    const namespaceDoc: unknown = parse(
      readFileSync(join(repoRoot, 'config', 'namespace.yaml'), 'utf8'),
    );
    const labels =
      isObj(namespaceDoc) && isObj(namespaceDoc['metadata'])
        ? namespaceDoc['metadata']['labels']
        : {};
    const enforce = isObj(labels) ? labels['pod-security.kubernetes.io/enforce'] : undefined;
    expect(enforce).toBe('restricted');
    kubectl(kubeconfig, [
      'label',
      'namespace',
      ns.name,
      `pod-security.kubernetes.io/enforce=${String(enforce)}`,
    ]);
    kubectl(kubeconfig, ['create', 'serviceaccount', '-n', ns.name, 'polychrome-control-plane']);

    const deployment = build(kubeconfig, 'config').find(
      (o) => keyOf(o) === 'Deployment/polychrome-control-plane',
    );
    if (deployment === undefined) throw new Error('config/ builds no control-plane Deployment');
    const pod = podFrom(deployment, 'control-plane-dry-run');
    const created = printed(
      kubectl(
        kubeconfig,
        ['create', '--dry-run=server', '-n', ns.name, '-f', '-', '-o', 'json'],
        JSON.stringify(pod),
      ),
    );
    expect(created[0]).toMatchObject({
      kind: 'Pod',
      spec: { serviceAccountName: 'polychrome-control-plane' },
    });

    // The admission is live: the same pod without one of its hardening fields is refused.
    const weakened = structuredClone(pod) as { spec: { containers: { securityContext: Obj }[] } };
    for (const c of weakened.spec.containers) delete c.securityContext['allowPrivilegeEscalation'];
    expect(
      kubectlError(
        kubeconfig,
        ['create', '--dry-run=server', '-n', ns.name, '-f', '-'],
        JSON.stringify(weakened),
      ),
    ).toMatch(/violates PodSecurity "restricted:[^"]+": allowPrivilegeEscalation != false/);
  });

  it('accepts config/sandbox with its harness NetworkPolicy in a conversation namespace', () => {
    const built = build(kubeconfig, 'config/sandbox');
    expect(built.map(keyOf)).toContain('NetworkPolicy/polychrome-harness');
    const returned = printed(
      kubectl(kubeconfig, [
        'apply',
        '--server-side',
        '--dry-run=server',
        '-n',
        ns.name,
        '-k',
        join(repoRoot, 'config', 'sandbox'),
        '-o',
        'json',
      ]),
    );
    for (const [b, r] of matchUp(built, returned)) {
      expect({ key: keyOf(b), found: r !== undefined }).toEqual({ key: keyOf(b), found: true });
      expect(r).toMatchObject(withoutEmptyStrings(b) as Obj);
    }
    const policy = returned.find((o) => keyOf(o) === 'NetworkPolicy/polychrome-harness');
    expect(policy).toMatchObject({ metadata: { namespace: ns.name } });
  });
});
