/**
 * The payments switch of the install (config/components/payments, the chart's payments.*
 * values) on a real API server with RBAC on: the RBAC objects of each build, applied into a
 * fresh namespace standing for the control plane's, let its ServiceAccount `get` exactly the
 * wallet Secrets named and nothing else of Secrets (SubjectAccessReviews, and the control
 * plane's own SecretStore reading with that ServiceAccount's real token); the base alone lets
 * it read none. The namespace's ServiceAccount has no cluster-wide grant here (the shared
 * cluster binds config/cluster's ClusterRoles to polychrome-system's), so what it may do is
 * what the build's Roles give; hack/payments-manifests.test.ts checks that no ClusterRole of
 * the base reads Secrets by any name but those it lists.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import {
  AuthorizationV1Api,
  CoreV1Api,
  KubeConfig,
  type V1ResourceAttributes,
} from '@kubernetes/client-node';
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseAllDocuments, stringify } from 'yaml';
import { helmTemplate } from '../../hack/chart/chart-testing';
import { defaultBinDir, repoRoot } from '../../hack/lib/paths';
import {
  kubernetesSecretReader,
  kubernetesSecretStore,
  walletSecretName,
  WALLET_SECRET_KEY,
} from '../../operator/payments/secret-store';
import { walletFromPrivateKey } from '../../operator/payments/wallet';
import { freshNamespace, kubeConfig, sharedCluster } from './support/kube';

type Obj = Record<string, unknown>;
const SERVICE_ACCOUNT = 'polychrome-control-plane';
const RBAC_KINDS = ['ServiceAccount', 'Role', 'RoleBinding'];

/** `kubectl kustomize` of an overlay of `resource` (under config/) into `namespace`, with `patches`. */
function buildInto(resource: string, namespace: string, patches: readonly Obj[] = []): Obj[] {
  const dir = mkdtempSync(join(repoRoot, 'config', '.payments-install-'));
  try {
    const kustomization = { namespace, resources: [`../${resource}`], patches };
    writeFileSync(join(dir, 'kustomization.yaml'), stringify(kustomization));
    const out = execFileSync(join(defaultBinDir, 'kubectl'), ['kustomize', dir], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    return parseAllDocuments(out).map((d) => d.toJS() as Obj);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The namespace's ServiceAccounts, Roles and RoleBindings of `objects`, applied for real. */
function applyRbac(kubeconfig: string, objects: readonly Obj[], namespace: string): string[] {
  const rbac = objects.filter(
    (o) =>
      RBAC_KINDS.includes(String(o['kind'])) && (o['metadata'] as Obj)['namespace'] === namespace,
  );
  execFileSync(
    join(defaultBinDir, 'kubectl'),
    [`--kubeconfig=${kubeconfig}`, 'apply', '--server-side', '-f', '-'],
    { input: rbac.map((o) => stringify(o)).join('---\n'), stdio: ['pipe', 'pipe', 'pipe'] },
  );
  return rbac.map((o) => `${String(o['kind'])}/${String((o['metadata'] as Obj)['name'])}`);
}

/** The wallet patch config/components/payments documents, naming `names`. */
const walletsPatch = (names: readonly string[]): Obj => ({
  target: { kind: 'Role', name: 'polychrome-control-plane-wallets' },
  patch: stringify([
    { op: 'replace', path: '/rules/0/resourceNames', value: names.map(walletSecretName) },
  ]),
});

/** A namespace with the build's RBAC applied and two wallet Secrets, alpha and beta. */
interface Install {
  readonly namespace: string;
  readonly applied: string[];
  readonly keys: Record<'alpha' | 'beta', string>;
}

describe('the payments switch on a real API server', () => {
  let admin: KubeConfig;
  let kubeconfig: string;
  const disposals: (() => Promise<void>)[] = [];

  beforeAll(async () => {
    kubeconfig = (await sharedCluster()).kubeconfigPath;
    admin = await kubeConfig();
  });
  afterAll(async () => {
    for (const dispose of disposals) await dispose();
  });

  async function install(prefix: string, objects: (namespace: string) => Obj[]): Promise<Install> {
    const ns = await freshNamespace(admin, prefix);
    disposals.push(ns.dispose);
    const applied = applyRbac(kubeconfig, objects(ns.name), ns.name);
    const core = admin.makeApiClient(CoreV1Api);
    const keys = { alpha: randomBytes(32).toString('hex'), beta: randomBytes(32).toString('hex') };
    for (const [name, key] of Object.entries(keys)) {
      await core.createNamespacedSecret({
        namespace: ns.name,
        body: {
          metadata: { name: walletSecretName(name) },
          stringData: { [WALLET_SECRET_KEY]: key },
        },
      });
    }
    return { namespace: ns.name, applied, keys };
  }

  /** Whether the control plane's ServiceAccount in `namespace` may do this, by a SubjectAccessReview. */
  async function may(namespace: string, attributes: V1ResourceAttributes): Promise<boolean> {
    const review = await admin.makeApiClient(AuthorizationV1Api).createSubjectAccessReview({
      body: {
        spec: {
          user: `system:serviceaccount:${namespace}:${SERVICE_ACCOUNT}`,
          groups: [
            'system:serviceaccounts',
            `system:serviceaccounts:${namespace}`,
            'system:authenticated',
          ],
          resourceAttributes: { namespace, resource: 'secrets', ...attributes },
        },
      },
    });
    return review.status?.allowed === true;
  }

  /** The control plane's own SecretStore, reading as the ServiceAccount with its real token. */
  async function storeAs(namespace: string) {
    const core = admin.makeApiClient(CoreV1Api);
    const request = await core.createNamespacedServiceAccountToken({
      name: SERVICE_ACCOUNT,
      namespace,
      body: { spec: { audiences: [], expirationSeconds: 600 } },
    });
    const cluster = admin.getCurrentCluster();
    if (cluster === null) throw new Error('the admin kubeconfig has no current cluster');
    const kc = new KubeConfig();
    kc.loadFromOptions({
      clusters: [cluster],
      users: [{ name: 'sa', token: request.status?.token ?? '' }],
      contexts: [{ name: 'sa', cluster: cluster.name, user: 'sa' }],
      currentContext: 'sa',
    });
    return kubernetesSecretStore(kubernetesSecretReader(kc.makeApiClient(CoreV1Api)), namespace);
  }

  /** What a grant of exactly wallet alpha allows, and all it refuses. */
  async function expectOnlyAlpha(on: Install): Promise<void> {
    const get = (name?: string): V1ResourceAttributes => ({ verb: 'get', name });
    expect(await may(on.namespace, get(walletSecretName('alpha')))).toBe(true);
    const refused = {
      'get beta': await may(on.namespace, get(walletSecretName('beta'))),
      'get the approval key': await may(on.namespace, get('polychrome-approval-key')),
      'get without a name': await may(on.namespace, get()),
      list: await may(on.namespace, { verb: 'list' }),
      watch: await may(on.namespace, { verb: 'watch' }),
      'update alpha': await may(on.namespace, { verb: 'update', name: walletSecretName('alpha') }),
      'delete alpha': await may(on.namespace, { verb: 'delete', name: walletSecretName('alpha') }),
    };
    expect(refused).toEqual(Object.fromEntries(Object.keys(refused).map((k) => [k, false])));
    const store = await storeAs(on.namespace);
    const wallet = await store.wallet('alpha');
    expect(wallet.address).toBe(walletFromPrivateKey('alpha', on.keys.alpha).address);
    await expect(store.wallet('beta')).rejects.toThrow(
      `could not read Secret ${on.namespace}/${walletSecretName('beta')} (status 403)`,
    );
  }

  it('config/components/payments with the documented patch: get on exactly the wallets named', async () => {
    const on = await install('payments-on', (ns) =>
      buildInto('with-payments', ns, [walletsPatch(['alpha'])]),
    );
    expect(on.applied).toEqual(
      expect.arrayContaining([
        `ServiceAccount/${SERVICE_ACCOUNT}`,
        'Role/polychrome-control-plane-wallets',
        'RoleBinding/polychrome-control-plane-wallets',
      ]),
    );
    await expectOnlyAlpha(on);
  });

  it('the chart with payments.enabled and payments.wallets: the same grant', async () => {
    const on = await install('payments-helm', (ns) =>
      helmTemplate({ 'payments.enabled': true, 'payments.wallets': ['alpha'] }, ns),
    );
    await expectOnlyAlpha(on);
  });

  it('config/default alone: no wallet Secret, and nothing of Secrets', async () => {
    const off = await install('payments-off', (ns) => buildInto('default', ns));
    expect(off.applied).toContain(`ServiceAccount/${SERVICE_ACCOUNT}`);
    expect(off.applied).not.toContain('Role/polychrome-control-plane-wallets');
    for (const name of ['alpha', 'beta']) {
      expect(await may(off.namespace, { verb: 'get', name: walletSecretName(name) })).toBe(false);
    }
    expect(await may(off.namespace, { verb: 'list' })).toBe(false);
    await expect((await storeAs(off.namespace)).wallet('alpha')).rejects.toThrow('(status 403)');
  });
});
