/**
 * config/components/payments as the real `kubectl kustomize` builds it, against the code that
 * reads it: the base leaves payments off (the control plane's payment loader says so), the
 * component turns x402 on (the same loader, on the Deployment's environment), its Role grants
 * `get` on wallet Secrets by name and nothing else, bound to the control plane's
 * ServiceAccount, and the overlay patch its header documents names the wallets. The
 * component's own patch refuses to replace another variable when the base's environment
 * moved. test/integration/payments-install.test.ts asks a real API server what the grant
 * allows.
 */
import { afterAll, describe, expect, it } from '@jest/globals';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { parseAllDocuments, stringify } from 'yaml';
import { loadPaymentConfig } from '../operator/payments/payment-config';
import { isWalletName, walletSecretName } from '../operator/payments/secret-store';
import { defaultBinDir, repoRoot } from './lib/paths';
import { offlineKubeConfig } from '../test/support/offline-kube-config';

type Obj = Record<string, unknown>;

const COMPONENT = 'config/components/payments';
const ROLE = 'polychrome-control-plane-wallets';

/** `kubectl kustomize` of a directory under the repository; its objects. */
function build(dir: string): Obj[] {
  const out = execFileSync(join(defaultBinDir, 'kubectl'), ['kustomize', join(repoRoot, dir)], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  return parseAllDocuments(out).map((d) => d.toJS() as Obj);
}

/** What `kubectl kustomize` printed on stderr when it refused `dir`. */
function buildError(dir: string): string {
  try {
    build(dir);
  } catch (err: unknown) {
    return String((err as { stderr?: unknown }).stderr ?? err);
  }
  throw new Error(`kustomize built ${dir}`);
}

const scratch: string[] = [];
afterAll(() => {
  for (const dir of scratch) rmSync(dir, { recursive: true, force: true });
});

/** A kustomization written under config/ (kustomize loads only below its root), relative to the repository. */
function overlay(kustomization: Obj, files: Record<string, string> = {}): string {
  const dir = mkdtempSync(join(repoRoot, 'config', '.payments-test-'));
  scratch.push(dir);
  writeFileSync(join(dir, 'kustomization.yaml'), stringify(kustomization));
  for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, name), text);
  return relative(repoRoot, dir);
}

const find = (objects: readonly Obj[], kind: string, name: string): Obj => {
  const found = objects.filter(
    (o) => o['kind'] === kind && (o['metadata'] as Obj | undefined)?.['name'] === name,
  );
  if (found.length !== 1) throw new Error(`expected one ${kind} ${name}, found ${found.length}`);
  return found[0] as Obj;
};

/** The control plane container's environment as name -> value (literal values only). */
function controlPlaneEnv(objects: readonly Obj[]): Record<string, string> {
  const spec = (find(objects, 'Deployment', 'polychrome-control-plane')['spec'] as Obj)[
    'template'
  ] as Obj;
  const containers = (spec['spec'] as Obj)['containers'] as Obj[];
  const container = containers.find((c) => c['name'] === 'control-plane') as Obj;
  const env = container['env'] as { name: string; value?: string }[];
  return Object.fromEntries(env.flatMap((v) => (v.value === undefined ? [] : [[v.name, v.value]])));
}

const kc = offlineKubeConfig();
const paymentsOf = (objects: readonly Obj[]) =>
  loadPaymentConfig(kc, 'polychrome-system', controlPlaneEnv(objects));

/** The patch config/components/payments/kustomization.yaml shows for naming wallets, as written there. */
function documentedWalletPatch(): string {
  const header = readFileSync(join(repoRoot, COMPONENT, 'kustomization.yaml'), 'utf8');
  const start = header.indexOf('#   patches:');
  const lines = header.slice(start).split('\n');
  const end = lines.findIndex((l) => !l.startsWith('#   '));
  return lines
    .slice(0, end)
    .map((l) => l.slice('#   '.length))
    .join('\n');
}

describe('config/default: payments off', () => {
  const base = build('config/default');

  it('sets the payment variables empty, which the control plane reads as off', () => {
    expect(controlPlaneEnv(base)).toMatchObject({
      POLYCHROME_PAYMENT_PROTOCOLS: '',
      POLYCHROME_MPP_TOKENS: '',
    });
    expect(paymentsOf(base)).toBeUndefined();
  });

  it('lets no role of the base read a wallet Secret, nor every Secret', () => {
    const reads = base
      .filter((o) => o['kind'] === 'Role' || o['kind'] === 'ClusterRole')
      .flatMap((o) => o['rules'] as Obj[])
      .filter((rule) => (rule['resources'] as string[]).some((r) => r === 'secrets' || r === '*'))
      .filter((rule) =>
        (rule['verbs'] as string[]).some((v) => ['get', 'list', 'watch', '*'].includes(v)),
      )
      .flatMap((rule) => (rule['resourceNames'] as string[] | undefined) ?? ['(every Secret)']);
    expect(reads.length).toBeGreaterThan(0);
    expect(
      reads.filter((n) => n.startsWith(walletSecretName('')) || n === '(every Secret)'),
    ).toEqual([]);
  });
});

describe('config/with-payments', () => {
  const built = build('config/with-payments');

  it('pays x402 from the wallet Secrets of its namespace', () => {
    const config = paymentsOf(built);
    expect(config?.protocols.map((p) => p.name)).toEqual(['x402']);
  });

  it('changes only the protocols variable of the base, and adds the Role and its binding', () => {
    const base = build('config/default');
    const key = (o: Obj): string =>
      `${String(o['kind'])}/${String((o['metadata'] as Obj)['name'])}`;
    expect(built.map(key).filter((k) => !base.map(key).includes(k))).toEqual([
      `Role/${ROLE}`,
      `RoleBinding/${ROLE}`,
    ]);
    const before = controlPlaneEnv(base);
    const after = controlPlaneEnv(built);
    expect(Object.keys(after).filter((k) => after[k] !== before[k])).toEqual([
      'POLYCHROME_PAYMENT_PROTOCOLS',
    ]);
  });

  it('grants get on wallet Secrets by name only, to the control plane in its namespace', () => {
    const role = find(built, 'Role', ROLE);
    expect(role['rules']).toEqual([
      {
        apiGroups: [''],
        resources: ['secrets'],
        resourceNames: [walletSecretName('main')],
        verbs: ['get'],
      },
    ]);
    const binding = find(built, 'RoleBinding', ROLE);
    expect(binding['roleRef']).toEqual({
      apiGroup: 'rbac.authorization.k8s.io',
      kind: 'Role',
      name: ROLE,
    });
    expect(binding['subjects']).toEqual([
      { kind: 'ServiceAccount', name: 'polychrome-control-plane', namespace: 'polychrome-system' },
    ]);
  });

  it('names the wallets with the patch its header documents', () => {
    const patches = (parseAllDocuments(documentedWalletPatch())[0]?.toJS() as Obj)['patches'];
    const dir = overlay({
      apiVersion: 'kustomize.config.k8s.io/v1beta1',
      kind: 'Kustomization',
      resources: ['../with-payments'],
      patches,
    });
    const names = (find(build(dir), 'Role', ROLE)['rules'] as Obj[])[0]?.['resourceNames'];
    expect(names).toEqual(['polychrome-wallet-treasury', 'polychrome-wallet-research']);
    for (const name of names as string[]) {
      expect(isWalletName(name.slice(walletSecretName('').length))).toBe(true);
    }
  });

  it('refuses to build when the base environment moved, naming the path, instead of replacing another variable', () => {
    const dir = overlay({
      apiVersion: 'kustomize.config.k8s.io/v1beta1',
      kind: 'Kustomization',
      resources: ['../default'],
      patches: [
        {
          target: { kind: 'Deployment', name: 'polychrome-control-plane' },
          patch: stringify([
            { op: 'remove', path: '/spec/template/spec/containers/0/env/14' },
            {
              op: 'add',
              path: '/spec/template/spec/containers/0/env/-',
              value: { name: 'POLYCHROME_PAYMENT_PROTOCOLS', value: '' },
            },
          ]),
        },
      ],
    });
    const moved = overlay({
      apiVersion: 'kustomize.config.k8s.io/v1beta1',
      kind: 'Kustomization',
      resources: [`../${dir.split('/').pop() ?? ''}`],
      components: ['../components/payments'],
    });
    expect(buildError(moved)).toMatch(/env\/14\/name/u);
  });
});
