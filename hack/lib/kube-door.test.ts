import { afterAll, describe, expect, it } from '@jest/globals';
import { X509Certificate } from 'node:crypto';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseAllDocuments } from 'yaml';

import { ensureDoorCertificate, kubeDoorRbacYaml } from './kube-door';

interface RbacObject {
  kind: string;
  metadata: { name: string };
  subjects?: { kind: string; name: string; namespace?: string }[];
}

describe('the Kubernetes door on a local cluster', () => {
  const dirs: string[] = [];
  afterAll(async () => {
    await Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true })));
  });

  it("puts config/kube-api's ServiceAccount subjects in the control plane's namespace, as kustomize does", async () => {
    const objects = parseAllDocuments(await kubeDoorRbacYaml('ns-under-test')).map(
      (d) => d.toJS() as RbacObject,
    );
    const bindings = objects.filter((o) => o.subjects !== undefined);
    expect(bindings.map((b) => b.metadata.name).sort()).toEqual([
      'polychrome-control-plane-auth-delegator',
      'polychrome-control-plane-authentication-reader',
    ]);
    for (const binding of bindings) {
      expect(binding.subjects).toEqual([
        { kind: 'ServiceAccount', name: 'polychrome-control-plane', namespace: 'ns-under-test' },
      ]);
    }
    // The ClusterRoles users are bound to come along, unchanged.
    expect(objects.filter((o) => o.kind === 'ClusterRole').map((o) => o.metadata.name)).toEqual(
      expect.arrayContaining([
        'polychrome-conversation-viewer',
        'polychrome-conversation-reader',
        'polychrome-conversation-user',
        'polychrome-conversation-admin',
      ]),
    );
  });

  it('issues a serving certificate for the Service name, signed by the CA it returns, once', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'kube-door-'));
    dirs.push(dir);
    const first = await ensureDoorCertificate(dir, 'polychrome-system');
    const cert = new X509Certificate(await readFile(first.certPath));
    const ca = new X509Certificate(first.caPem);
    expect(cert.checkIssued(ca)).toBe(true);
    expect(cert.verify(ca.publicKey)).toBe(true);
    expect(cert.subjectAltName).toBe(
      'DNS:polychrome-kube-api.polychrome-system.svc, DNS:localhost',
    );
    expect(cert.keyUsage).toEqual(['1.3.6.1.5.5.7.3.1']); // serverAuth only
    // A second start keeps the certificate and CA the APIService already trusts.
    const again = await ensureDoorCertificate(dir, 'polychrome-system');
    expect(await readFile(again.certPath, 'utf8')).toBe(await readFile(first.certPath, 'utf8'));
    expect(again.caPem).toBe(first.caPem);
  });
});
