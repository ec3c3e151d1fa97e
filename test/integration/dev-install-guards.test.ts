/**
 * What `make dev` writes beside the provisioner and onboarding (hack/lib/dev-base.ts,
 * hack/lib/dev-onboarding.ts), against the real local kube-apiserver: it never writes a
 * Secret it did not make or that onboarding does not own, and it refuses a cluster an earlier
 * `make dev` filled by hand. dev-stack.test.ts runs the whole of `make dev`; these are the
 * doors it must keep shut, each in seconds.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { CoreV1Api, type KubeConfig } from '@kubernetes/client-node';

import { assertNoHandMadeSecrets } from '../../hack/lib/dev-base';
import { applyModelKeys } from '../../hack/lib/dev-onboarding';
import { CredentialSecret, ONBOARDED_LABEL } from '../../operator/onboarding/catalog';
import { PROVISIONED_LABEL, SecretName } from '../../operator/provision/catalog';
import { dataKeyOwners } from './support/dev-install';
import { freshNamespace, kubeConfig } from './support/kube';

let kc: KubeConfig;
let core: CoreV1Api;
let ns: { name: string; dispose: () => Promise<void> };

beforeAll(async () => {
  kc = await kubeConfig();
  core = kc.makeApiClient(CoreV1Api);
  ns = await freshNamespace(kc, 'dev-guards');
});

afterAll(async () => {
  await ns.dispose();
});

async function makeSecret(name: string, labels: Record<string, string>): Promise<void> {
  await core.createNamespacedSecret({
    namespace: ns.name,
    body: { metadata: { name, labels }, stringData: { 'approval-public-key': 'ab'.repeat(32) } },
  });
}

describe('applyModelKeys', () => {
  it('never creates the harness Secret: absent stays absent', async () => {
    expect(await applyModelKeys(kc, ns.name, { 'anthropic-api-key': 'k' })).toBe('absent');
    await expect(
      core.readNamespacedSecret({ name: CredentialSecret.Harness, namespace: ns.name }),
    ).rejects.toMatchObject({ code: 404 });
  });

  it('refuses a Secret of that name onboarding did not make, and leaves it as it was', async () => {
    const other = await freshNamespace(kc, 'dev-guards-user');
    try {
      await core.createNamespacedSecret({
        namespace: other.name,
        body: { metadata: { name: CredentialSecret.Harness }, stringData: { mine: 'yes' } },
      });
      const before = await core.readNamespacedSecret({
        name: CredentialSecret.Harness,
        namespace: other.name,
      });
      await expect(applyModelKeys(kc, other.name, { 'anthropic-api-key': 'k' })).rejects.toThrow(
        /lacks the label app\.kubernetes\.io\/managed-by=polychrome-onboarding.*make dev-reset/u,
      );
      const after = await core.readNamespacedSecret({
        name: CredentialSecret.Harness,
        namespace: other.name,
      });
      expect(after.metadata?.resourceVersion).toBe(before.metadata?.resourceVersion);
    } finally {
      await other.dispose();
    }
  });

  it("adds the keys as make dev's own fields, removes one left out next time, keeps onboarding's", async () => {
    await makeSecret(CredentialSecret.Harness, { [ONBOARDED_LABEL.key]: ONBOARDED_LABEL.value });
    const model = { 'anthropic-api-key': 'sk-test', 'anthropic-base-url': 'http://127.0.0.1:9' };
    expect(await applyModelKeys(kc, ns.name, model)).toBe('changed');
    expect(await applyModelKeys(kc, ns.name, model)).toBe('unchanged');
    let secret = await core.readNamespacedSecret({
      name: CredentialSecret.Harness,
      namespace: ns.name,
    });
    expect(Object.keys(secret.data ?? {}).sort()).toEqual([
      'anthropic-api-key',
      'anthropic-base-url',
      'approval-public-key',
    ]);
    expect(dataKeyOwners(secret, 'anthropic-api-key')).toEqual(['make-dev']);
    expect(dataKeyOwners(secret, 'approval-public-key')).not.toContain('make-dev');

    expect(await applyModelKeys(kc, ns.name, { 'anthropic-base-url': 'http://127.0.0.1:9' })).toBe(
      'changed',
    );
    secret = await core.readNamespacedSecret({
      name: CredentialSecret.Harness,
      namespace: ns.name,
    });
    expect(Object.keys(secret.data ?? {}).sort()).toEqual([
      'anthropic-base-url',
      'approval-public-key',
    ]);
  });
});

describe('assertNoHandMadeSecrets', () => {
  it("passes the provisioner's own Secrets and a user's, refuses one an earlier make dev wrote", async () => {
    await makeSecret(SecretName.StateCa, { [PROVISIONED_LABEL.key]: PROVISIONED_LABEL.value });
    await makeSecret(SecretName.StateTls, {});
    await expect(assertNoHandMadeSecrets(core, ns.name)).resolves.toBeUndefined();
    await makeSecret(SecretName.RecordsKey, { [PROVISIONED_LABEL.key]: 'make-dev' });
    await expect(assertNoHandMadeSecrets(core, ns.name)).rejects.toThrow(
      `Secret ${ns.name}/${SecretName.RecordsKey} was written by an earlier make dev`,
    );
  });
});
